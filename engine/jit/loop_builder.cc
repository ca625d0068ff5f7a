#include "engine/jit/loop_builder.hh"

#include <llvm/IR/Instructions.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <cstddef>

#include "engine/jit/jit_common.hh"
#include "engine/runtime/channel.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/segment.hh"

namespace sluice {

LoopBuilder::LoopBuilder(llvm::Module &m, SegmentRunner &seg, const LinkedBitcode &linked)
    : m_(m), cx_(m.getContext()), seg_(seg), linked_(linked) {}

llvm::Type *LoopBuilder::ptr() { return llvm::PointerType::get(cx_, 0); }

llvm::Constant *LoopBuilder::address(const void *p) { return address_constant(cx_, p); }

llvm::Function *LoopBuilder::new_function(const std::string &name, llvm::FunctionType *type) {
  auto *f = llvm::Function::Create(type, llvm::Function::InternalLinkage, name, m_);
  f->addFnAttr(llvm::Attribute::AlwaysInline);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  return f;
}

llvm::FunctionType *LoopBuilder::batch_fn_type() {
  return llvm::FunctionType::get(llvm::Type::getVoidTy(cx_), {ptr()}, false);
}

bool LoopBuilder::in_segment(const RuntimeElement *e) const {
  for (RuntimeElement *x : seg_.elements())
    if (x == e) return true;
  return false;
}

std::string LoopBuilder::fn_name(const char *what, const RuntimeElement *e, int port) {
  return std::string(what) + "." + sanitize(e->name()) + (e->lane() >= 0 ? ".lane" + std::to_string(e->lane()) : "") +
         "." + std::to_string(port);
}

// batch->count as i64.
llvm::Value *LoopBuilder::batch_count(llvm::IRBuilder<> &b, llvm::Value *batch) {
  static_assert(offsetof(PacketBatch, count) == 0);
  return b.CreateZExt(b.CreateLoad(b.getInt16Ty(), batch, "count"), b.getInt64Ty());
}

void LoopBuilder::count(llvm::IRBuilder<> &b, const Counter &c, llvm::Value *n) {
  b.CreateCall(support("sluice_jit_count"), {address(&c), n});
}

// The element's own push for this instance and input port: the class's
// entry with both as constants, the push inlined into it, and its emits to
// fused outputs made direct calls.
llvm::Function *LoopBuilder::push_fn(RuntimeElement *e, int port) {
  auto key = std::make_pair(e, port);
  if (auto it = push_.find(key); it != push_.end()) return it->second;
  llvm::Function *entry = m_.getFunction(linked_.entries.at(e)->push_symbol);
  if (!entry || entry->isDeclaration())
    throw JitError("JIT: the bitcode of " + e->class_name() + " lost its entry " + linked_.entries.at(e)->push_symbol);
  llvm::ValueToValueMapTy map;
  map[entry->getArg(0)] = address(e);
  map[entry->getArg(1)] = llvm::ConstantInt::get(llvm::Type::getInt32Ty(cx_), port);
  llvm::Function *f = llvm::CloneFunction(entry, map);
  f->setName(fn_name("push", e, port));
  f->setLinkage(llvm::GlobalValue::InternalLinkage);
  f->addFnAttr(llvm::Attribute::AlwaysInline);
  push_[key] = f;
  // The element's member functions called on this instance (its push,
  // its helpers) come in, so that its emits see the instance.
  llvm::Constant *self = address(e);
  for (int round = 0; round < 3; ++round) {
    std::vector<llvm::CallBase *> calls;
    for (llvm::BasicBlock &bb : *f)
      for (llvm::Instruction &in : bb)
        if (auto *call = llvm::dyn_cast<llvm::CallBase>(&in))
          if (llvm::Function *c = call->getCalledFunction();
              c && !c->isDeclaration() && c != linked_.host_emit && call->arg_size() > 0 && call->getArgOperand(0) == self &&
              !c->getName().starts_with("push.") && !c->getName().starts_with("emit."))
            calls.push_back(call);
    if (calls.empty()) break;
    for (llvm::CallBase *call : calls) {
      llvm::InlineFunctionInfo info;
      (void)llvm::InlineFunction(*call, info);
    }
  }
  std::vector<llvm::CallBase *> emits;
  for (llvm::BasicBlock &bb : *f)
    for (llvm::Instruction &in : bb)
      if (auto *call = llvm::dyn_cast<llvm::CallBase>(&in))
        if (call->getCalledFunction() == linked_.host_emit && call->getArgOperand(0) == self &&
            llvm::isa<llvm::ConstantInt>(call->getArgOperand(1)))
          emits.push_back(call);
  for (llvm::CallBase *call : emits) {
    int out = int(llvm::cast<llvm::ConstantInt>(call->getArgOperand(1))->getSExtValue());
    llvm::IRBuilder<> b(call);
    b.CreateCall(emit_fn(e, out), {call->getArgOperand(2)});
    call->eraseFromParent();
  }
  return f;
}

// Input `port` of `e` gets a batch: counted in, then its push.
llvm::Function *LoopBuilder::deliver_fn(RuntimeElement *e, int port) {
  auto key = std::make_pair(e, port);
  if (auto it = deliver_.find(key); it != deliver_.end()) return it->second;
  llvm::Function *f = new_function(fn_name("deliver", e, port), batch_fn_type());
  deliver_[key] = f;
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(cx_, "entry", f));
  count(b, e->counters.in, batch_count(b, f->getArg(0)));
  b.CreateCall(linked_.entries.at(e)->classify_symbol ? one_pass_fn(e) : push_fn(e, port), {f->getArg(0)});
  b.CreateRetVoid();
  return f;
}

// --- one pass over the batch for a chain of packet stages -----------------
// Stages (PacketStage) that feed one another directly run in one
// loop over the batch: each packet goes through the chain's classify()
// calls until it leaves it, into the batch of its exit (an output to
// anything else). Afterwards, in the order the interpreter would: the
// counts of the edges inside the chain, each stage's batch_done(), and the
// exits' batches, depth first in port order, as the stages' pushes would
// emit them. A stage reached twice (both outputs of a Filter into one
// Counter) is an exit instead, so that it sees its packets in the same
// order as in the interpreter.
bool LoopBuilder::is_stage(const RuntimeElement *e) const {
  return linked_.entries.at(const_cast<RuntimeElement *>(e))->classify_symbol;
}

RuntimeElement *LoopBuilder::chain_successor(RuntimeElement *e, int port) {
  if (port >= int(e->output_count())) return nullptr;
  const std::vector<OutputTarget> &t = e->targets(port);
  if (t.size() != 1 || !t[0].element || t[0].channel || !in_segment(t[0].element) || !is_stage(t[0].element))
    return nullptr;
  return t[0].element;
}

std::unique_ptr<LoopBuilder::StageNode> LoopBuilder::chain_from(RuntimeElement *e, const std::map<RuntimeElement *, int> &reached) {
  auto node = std::make_unique<StageNode>();
  node->e = e;
  for (int q = 0; q < int(e->output_count()); ++q) {
    RuntimeElement *t = chain_successor(e, q);
    node->next.push_back(t && reached.at(t) == 1 ? chain_from(t, reached) : nullptr);
  }
  return node;
}

llvm::Function *LoopBuilder::one_pass_fn(RuntimeElement *root) {
  if (auto it = one_pass_.find(root); it != one_pass_.end()) return it->second;
  llvm::Function *f = new_function(fn_name("pass", root, 0), batch_fn_type());
  one_pass_[root] = f;
  std::map<RuntimeElement *, int> reached;
  std::function<void(RuntimeElement *)> reach = [&](RuntimeElement *e) {
    if (++reached[e] > 1) return;
    for (int q = 0; q < int(e->output_count()); ++q)
      if (RuntimeElement *t = chain_successor(e, q)) reach(t);
  };
  reach(root);
  std::unique_ptr<StageNode> chain = chain_from(root, reached);

  llvm::Value *batch = f->getArg(0);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(cx_, "entry", f));
  llvm::Type *i64 = b.getInt64Ty(), *i32 = b.getInt32Ty();
  llvm::Type *batch_type = llvm::ArrayType::get(b.getInt8Ty(), sizeof(PacketBatch));
  std::vector<StageNode *> preorder;
  std::function<void(StageNode &)> declare = [&](StageNode &n) {
    preorder.push_back(&n);
    n.packets = b.CreateAlloca(i64, nullptr, "packets");
    n.bytes = b.CreateAlloca(i64, nullptr, "bytes");
    b.CreateStore(b.getInt64(0), n.packets);
    b.CreateStore(b.getInt64(0), n.bytes);
    n.exit_batch.assign(n.next.size(), nullptr);
    n.exit_count.assign(n.next.size(), nullptr);
    for (size_t q = 0; q < n.next.size(); ++q) {
      if (n.next[q]) {
        declare(*n.next[q]);
        continue;
      }
      auto *eb = b.CreateAlloca(batch_type, nullptr, "exit");
      eb->setAlignment(llvm::Align(alignof(PacketBatch)));
      n.exit_batch[q] = eb;
      n.exit_count[q] = b.CreateAlloca(i32, nullptr, "exit_count");
      b.CreateStore(b.getInt32(0), n.exit_count[q]);
    }
  };
  declare(*chain);
  llvm::Value *n = batch_count(b, batch);
  auto *loop = llvm::BasicBlock::Create(cx_, "packet", f), *after = llvm::BasicBlock::Create(cx_, "after", f);
  llvm::BasicBlock *entry = b.GetInsertBlock();
  b.CreateCondBr(b.CreateICmpEQ(n, b.getInt64(0)), after, loop);
  b.SetInsertPoint(loop);
  llvm::PHINode *i = b.CreatePHI(i64, 2, "i");
  i->addIncoming(b.getInt64(0), entry);
  llvm::Value *slot = b.CreateGEP(b.getInt8Ty(), batch, b.CreateAdd(b.getInt64(offsetof(PacketBatch, pkts)), b.CreateMul(i, b.getInt64(sizeof(rte_mbuf *)))));
  llvm::Value *m = b.CreateLoad(ptr(), slot, "m");
  llvm::Value *wire = b.CreateZExt(
      b.CreateLoad(i32, b.CreateGEP(b.getInt8Ty(), m, b.getInt64(sizeof(rte_mbuf) + offsetof(PacketAnno, wire_len)))), i64);
  std::function<void(StageNode &)> visit = [&](StageNode &node) {
    b.CreateStore(b.CreateAdd(b.CreateLoad(i64, node.packets), b.getInt64(1)), node.packets);
    b.CreateStore(b.CreateAdd(b.CreateLoad(i64, node.bytes), wire), node.bytes);
    llvm::Function *classify = m_.getFunction(linked_.entries.at(node.e)->classify_symbol);
    classify->addFnAttr(llvm::Attribute::AlwaysInline);
    llvm::Value *port = b.CreateCall(classify, {address(node.e), m});
    auto *done = llvm::BasicBlock::Create(cx_, "next", f);
    std::vector<llvm::BasicBlock *> to(node.next.size());
    for (size_t q = 0; q < to.size(); ++q) to[q] = llvm::BasicBlock::Create(cx_, "out" + std::to_string(q), f);
    if (to.empty()) {
      b.CreateBr(done);
    } else {
      llvm::SwitchInst *sw = b.CreateSwitch(port, to[0], unsigned(to.size()));
      for (size_t q = 1; q < to.size(); ++q) sw->addCase(b.getInt32(uint32_t(q)), to[q]);
    }
    for (size_t q = 0; q < to.size(); ++q) {
      b.SetInsertPoint(to[q]);
      if (node.next[q]) {
        visit(*node.next[q]);
      } else {
        llvm::Value *k = b.CreateLoad(i32, node.exit_count[q]);
        llvm::Value *at = b.CreateGEP(b.getInt8Ty(), node.exit_batch[q],
                                      b.CreateAdd(b.getInt64(offsetof(PacketBatch, pkts)),
                                                  b.CreateMul(b.CreateZExt(k, i64), b.getInt64(sizeof(rte_mbuf *)))));
        b.CreateStore(m, at);
        b.CreateStore(b.CreateAdd(k, b.getInt32(1)), node.exit_count[q]);
      }
      b.CreateBr(done);
    }
    b.SetInsertPoint(done);
  };
  visit(*chain);
  llvm::Value *i_next = b.CreateAdd(i, b.getInt64(1));
  i->addIncoming(i_next, b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpULT(i_next, n), loop, after);

  b.SetInsertPoint(after);
  // The edges inside the chain, as emit() and receive() count them.
  std::function<void(StageNode &)> count_edges = [&](StageNode &node) {
    for (size_t q = 0; q < node.next.size(); ++q)
      if (node.next[q]) {
        llvm::Value *k = b.CreateLoad(i64, node.next[q]->packets);
        count(b, node.e->counters.out, k);
        count(b, node.next[q]->e->counters.in, k);
        count_edges(*node.next[q]);
      }
  };
  count_edges(*chain);
  for (StageNode *node : preorder) {
    llvm::Value *k = b.CreateLoad(i64, node->packets);
    auto *call = llvm::BasicBlock::Create(cx_, "batch_done", f), *next = llvm::BasicBlock::Create(cx_, "done", f);
    b.CreateCondBr(b.CreateICmpEQ(k, b.getInt64(0)), next, call);
    b.SetInsertPoint(call);
    b.CreateCall(m_.getFunction(linked_.entries.at(node->e)->batch_done_symbol),
                 {address(node->e), k, b.CreateLoad(i64, node->bytes)});
    b.CreateBr(next);
    b.SetInsertPoint(next);
  }
  std::function<void(StageNode &)> emit_exits = [&](StageNode &node) {
    for (size_t q = 0; q < node.next.size(); ++q) {
      if (node.next[q]) {
        emit_exits(*node.next[q]);
        continue;
      }
      b.CreateStore(b.CreateTrunc(b.CreateLoad(i32, node.exit_count[q]), b.getInt16Ty()), node.exit_batch[q]);
      b.CreateCall(emit_fn(node.e, int(q)), {node.exit_batch[q]});
    }
  };
  emit_exits(*chain);
  b.CreateRetVoid();
  return f;
}

// Output `port` of `e`: to the one element of this segment it leads to,
// directly, counted out as emit() counts; any other wiring through emit().
llvm::Function *LoopBuilder::emit_fn(RuntimeElement *e, int port) {
  auto key = std::make_pair(e, port);
  if (auto it = emit_.find(key); it != emit_.end()) return it->second;
  llvm::Function *f = new_function(fn_name("emit", e, port), batch_fn_type());
  emit_[key] = f;
  llvm::Value *batch = f->getArg(0);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(cx_, "entry", f));
  const std::vector<OutputTarget> *targets = port < int(e->output_count()) ? &e->targets(port) : nullptr;
  bool fused = targets && targets->size() == 1 && (*targets)[0].element && !(*targets)[0].channel &&
               in_segment((*targets)[0].element);
  if (!fused) {
    b.CreateCall(support("sluice_jit_emit"), {address(e), b.getInt32(port), batch});
    b.CreateRetVoid();
    return f;
  }
  auto *go = llvm::BasicBlock::Create(cx_, "go", f), *done = llvm::BasicBlock::Create(cx_, "done", f);
  llvm::Value *n = batch_count(b, batch);
  b.CreateCondBr(b.CreateICmpEQ(n, b.getInt64(0)), done, go);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
  b.SetInsertPoint(go);
  count(b, e->counters.out, n);
  b.CreateCall(deliver_fn((*targets)[0].element, (*targets)[0].port), {batch});
  b.CreateRetVoid();
  return f;
}

// The interpreter's loop body (InterpretedProgram::step), unrolled over
// this segment's sources, channels and timers.
llvm::Function *LoopBuilder::build() {
  auto *i1 = llvm::Type::getInt1Ty(cx_);
  step_ = llvm::Function::Create(llvm::FunctionType::get(i1, false), llvm::Function::ExternalLinkage,
                                 "segment_" + std::to_string(seg_.segment().id) + "_step", m_);
  step_->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(cx_, "entry", step_));
  llvm::Type *batch_type = llvm::ArrayType::get(b.getInt8Ty(), sizeof(PacketBatch));
  llvm::AllocaInst *batch = b.CreateAlloca(batch_type, nullptr, "batch");
  batch->setAlignment(llvm::Align(alignof(PacketBatch)));
  llvm::AllocaInst *work = b.CreateAlloca(i1, nullptr, "work");
  b.CreateStore(b.getFalse(), work);
  auto when = [&](llvm::Value *cond, const std::string &name, const std::function<void()> &body) {
    auto *then = llvm::BasicBlock::Create(cx_, name, step_), *next = llvm::BasicBlock::Create(cx_, name + ".next", step_);
    b.CreateCondBr(cond, then, next);
    b.SetInsertPoint(then);
    b.CreateStore(b.getTrue(), work);
    body();
    b.CreateBr(next);
    b.SetInsertPoint(next);
  };
  for (SegmentRunner::Source &s : seg_.sources()) {
    llvm::Value *got = b.CreateCall(support("sluice_jit_poll"), {address(&s), batch});
    when(got, "source." + sanitize(s.element->name()), [&] { b.CreateCall(emit_fn(s.element, 0), {batch}); });
  }
  for (Channel *ch : seg_.inputs()) {
    std::string name = "channel." + sanitize(ch->target().element->name());
    if (ch->type() == StreamType::Packets) {
      llvm::Value *n = b.CreateCall(support("sluice_jit_channel_receive"), {address(ch), batch, b.getInt32(seg_.burst())});
      when(b.CreateICmpNE(n, b.getInt32(0)), name,
           [&] { b.CreateCall(deliver_fn(ch->target().element, ch->target().port), {batch}); });
    } else {
      when(b.CreateCall(support("sluice_jit_channel_flows"), {address(ch)}), name, [] {});
    }
  }
  for (RuntimeElement *t : seg_.tickers()) b.CreateCall(support("sluice_jit_tick"), {address(t)});
  b.CreateRet(b.CreateLoad(i1, work));
  return step_;
}

std::vector<std::pair<RuntimeElement *, llvm::Function *>> LoopBuilder::element_code() const {
  std::vector<std::pair<RuntimeElement *, llvm::Function *>> code;
  for (auto &[key, f] : push_) code.push_back({key.first, f});
  for (auto &[e, entry] : linked_.entries)
    if (entry->classify_symbol)
      for (const char *s : {entry->classify_symbol, entry->batch_done_symbol})
        if (llvm::Function *f = m_.getFunction(s)) code.push_back({e, f});
  return code;
}

std::vector<llvm::Function *> LoopBuilder::generated() const {
  std::vector<llvm::Function *> fns = {step_};
  for (const auto *m : {&push_, &deliver_, &emit_})
    for (auto &[key, f] : *m) fns.push_back(f);
  for (auto &[e, f] : one_pass_) fns.push_back(f);
  return fns;
}

}  // namespace sluice
