#include "engine/jit/segment_jit.hh"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Transforms/IPO/AlwaysInliner.h>
#include <llvm/Transforms/IPO/GlobalDCE.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Scalar/EarlyCSE.h>
#include <llvm/Transforms/Scalar/SROA.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "engine/jit/bpf_ir.hh"
#include "engine/jit/bpf_jit.hh"
#include "engine/jit/element_bitcode.hh"
#include "engine/packet/pcap_filter.hh"
#include "engine/runtime/channel.hh"
#include "engine/runtime/element_runtime.hh"

namespace sluice {

namespace {

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

// Errors of LLVM's linker and readers reach the context's diagnostic
// handler; by default an error ends the process.
struct Diagnostics {
  std::string text;
  static void handle(const llvm::DiagnosticInfo *d, void *self) {
    auto *diag = static_cast<Diagnostics *>(self);
    if (d->getSeverity() != llvm::DS_Error) return;
    llvm::raw_string_ostream os(diag->text);
    llvm::DiagnosticPrinterRawOStream printer(os);
    d->print(printer);
    os << "\n";
  }
};

struct JitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename T>
T take(llvm::Expected<T> v, const std::string &what) {
  if (!v) throw JitError(what + ": " + llvm::toString(v.takeError()));
  return std::move(*v);
}

// The bitcode files the JIT links from, and which one defines which
// external symbol (read lazily: only the symbol tables): the binary's own,
// embedded, and a plugin's, read from beside it (PLUGIN.so.bc) when one of
// its classes is first compiled. Thread-safe.
class BitcodeIndex {
 public:
  static BitcodeIndex &get() {
    static BitcodeIndex index;
    return index;
  }
  int file_defining(const std::string &symbol) const {
    std::lock_guard lock(mutex_);
    auto it = symbols_.find(symbol);
    return it == symbols_.end() ? -1 : it->second;
  }
  llvm::MemoryBufferRef file(int i) const {
    std::lock_guard lock(mutex_);
    return files_[size_t(i)];
  }
  // Reads a plugin's bitcode (once); false, with *error, when it cannot.
  bool add_file(const std::string &path, std::string *error) {
    std::lock_guard lock(mutex_);
    if (std::find(read_.begin(), read_.end(), path) != read_.end()) return true;
    auto buf = llvm::MemoryBuffer::getFile(path);
    if (!buf) {
      *error = buf.getError().message();
      return false;
    }
    owned_.push_back(std::move(*buf));
    read_.push_back(path);
    index(owned_.back()->getMemBufferRef());
    return true;
  }

 private:
  BitcodeIndex() {
    for (const EmbeddedBitcode &f : embedded_bitcode()) index(llvm::MemoryBufferRef(f.bytes(), f.source));
  }
  void index(llvm::MemoryBufferRef buf) {
    llvm::LLVMContext cx;
    auto m = llvm::getLazyBitcodeModule(buf, cx);
    if (!m) {
      llvm::consumeError(m.takeError());
      return;
    }
    int i = int(files_.size());
    files_.push_back(buf);
    for (llvm::GlobalValue &g : (*m)->global_values())
      if (!g.isDeclaration() && g.hasExternalLinkage()) symbols_.emplace(g.getName().str(), i);
  }
  mutable std::mutex mutex_;
  std::vector<llvm::MemoryBufferRef> files_;
  std::map<std::string, int> symbols_;
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> owned_;
  std::vector<std::string> read_;
};

// The shared object a class's code was loaded from, when it is not the
// executable (a plugin's .so); empty otherwise.
std::string plugin_of(const JitEntry &entry) {
  Dl_info mine{}, theirs{};
  if (!dladdr(reinterpret_cast<const void *>(&plugin_of), &mine) || !dladdr(entry.stamp, &theirs) || !theirs.dli_fname)
    return "";
  if (mine.dli_fname && std::string(mine.dli_fname) == theirs.dli_fname) return "";
  return theirs.dli_fname;
}

// engine/jit/bitcode/support.cc: what the generated loop calls.
constexpr const char *kSupportFunctions[] = {"sluice_jit_poll",  "sluice_jit_channel_receive", "sluice_jit_channel_flows",
                                             "sluice_jit_tick",  "sluice_jit_emit",            "sluice_jit_count",
                                             "sluice_jit_filter_match"};

std::string sanitize(const std::string &s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  return o;
}

std::string element_label(const RuntimeElement &e) {
  return "'" + e.name() + "'" + (e.lane() >= 0 ? " (lane " + std::to_string(e.lane()) + ")" : "");
}

// Thread-local globals that `root`, or a function it reaches, uses; with
// the function that uses the first.
std::pair<const llvm::GlobalVariable *, const llvm::Function *> find_thread_local(const llvm::Function &root) {
  std::set<const llvm::Function *> seen;
  std::vector<const llvm::Function *> todo{&root};
  std::function<const llvm::GlobalVariable *(const llvm::Value *, int)> tls_in =
      [&](const llvm::Value *v, int depth) -> const llvm::GlobalVariable * {
    if (auto *g = llvm::dyn_cast<llvm::GlobalVariable>(v)) return g->isThreadLocal() ? g : nullptr;
    if (auto *ce = llvm::dyn_cast<llvm::ConstantExpr>(v); ce && depth < 8)
      for (const llvm::Value *op : ce->operands())
        if (auto *g = tls_in(op, depth + 1)) return g;
    return nullptr;
  };
  while (!todo.empty()) {
    const llvm::Function *f = todo.back();
    todo.pop_back();
    if (!seen.insert(f).second || f->isDeclaration()) continue;
    // the loop's own functions lead to other elements' code, checked on its own
    if (f != &root && (f->getName().starts_with("emit.") || f->getName().starts_with("deliver.") ||
                       f->getName().starts_with("push.") || f->getName().starts_with("pass.")))
      continue;
    for (const llvm::BasicBlock &bb : *f)
      for (const llvm::Instruction &in : bb)
        for (const llvm::Value *op : in.operands()) {
          if (auto *g = tls_in(op, 0)) return {g, f};
          if (auto *callee = llvm::dyn_cast<llvm::Function>(op)) todo.push_back(callee);
        }
  }
  return {nullptr, nullptr};
}

std::string thread_local_error(const llvm::Function &root, const std::string &element) {
  auto [g, f] = find_thread_local(root);
  if (!g) return "";
  return "JIT: element " + element + ": its bitcode uses thread-local storage ('" + g->getName().str() +
         "', in " + f->getName().str() +
         "), which code run through ORC cannot reach correctly; route that operation through a host function, "
         "or run with --no-jit";
}

// The absolute address a pointer value stands for, when it is a constant
// address (an instance's `inttoptr`) plus constant offsets.
std::optional<uint64_t> constant_address(const llvm::Value *p, const llvm::DataLayout &dl) {
  llvm::APInt offset(64, 0);
  const llvm::Value *base = p->stripAndAccumulateConstantOffsets(dl, offset, /*AllowNonInbounds=*/true);
  auto *ce = llvm::dyn_cast<llvm::ConstantExpr>(base);
  if (!ce || ce->getOpcode() != llvm::Instruction::IntToPtr) return std::nullopt;
  auto *ci = llvm::dyn_cast<llvm::ConstantInt>(ce->getOperand(0));
  if (!ci) return std::nullopt;
  return ci->getZExtValue() + offset.getZExtValue();
}

// Whether the stamp the bitcode recorded for an element class (its
// instance size, its source file's time) is the binary's: empty, or why not.
std::string stamp_problem(const llvm::Module &m, const JitEntry &entry, const JitStamp &host, const std::string &what) {
  const llvm::GlobalVariable *g = m.getGlobalVariable(entry.stamp_symbol);
  auto *init = g && g->hasInitializer() ? llvm::dyn_cast<llvm::ConstantStruct>(g->getInitializer()) : nullptr;
  if (!init) return "JIT: the bitcode of " + what + " has no stamp (" + entry.stamp_symbol + ")";
  uint64_t size = llvm::cast<llvm::ConstantInt>(init->getOperand(0))->getZExtValue();
  std::string when;
  // char[32]: the time, then zeros (clang may split it into a packed struct of both)
  llvm::Constant *text = init->getOperand(1);
  if (auto *packed = llvm::dyn_cast<llvm::ConstantStruct>(text)) text = packed->getOperand(0);
  if (auto *arr = llvm::dyn_cast<llvm::ConstantDataSequential>(text)) {
    llvm::StringRef raw = arr->getRawDataValues();
    when.assign(raw.data(), strnlen(raw.data(), raw.size()));
  }
  if (size == host.object_size && when == host.source_time) return "";
  return "JIT: the bitcode of " + what + " is stale: it was built from the source of " + when + " with objects of " +
         std::to_string(size) + " bytes, this binary from the source of " + host.source_time + " with " +
         std::to_string(host.object_size) + " bytes; rebuild, or run with --no-jit";
}

class FusedProgram final : public SegmentProgram {
 public:
  FusedProgram(std::unique_ptr<llvm::orc::LLJIT> jit, bool (*step)()) : jit_(std::move(jit)), step_(step) {}
  SLUICE_CALLS_JIT_CODE bool step(SegmentRunner &) override { return step_(); }
  const char *kind() const override { return "jit"; }

 private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;  // owns the code step_ points into
  bool (*step_)();
};

// One segment's compilation.
class SegmentBuilder {
 public:
  SegmentBuilder(SegmentRunner &seg, const std::string &cpu) : seg_(seg), cpu_(cpu) {
    cx_ = std::make_unique<llvm::LLVMContext>();
    cx_->setDiagnosticHandlerCallBack(&Diagnostics::handle, &diag_);
    m_ = std::make_unique<llvm::Module>("segment_" + std::to_string(seg.segment().id), *cx_);
  }

  ProgramCompiler::Result build(bool want_ir) {
    auto t0 = std::chrono::steady_clock::now();
    ProgramCompiler::Result r;
    try {
      make_target();
      link_bitcode();
      prepare_linked();
      generate_step();
      check_thread_locals();
      if (llvm::verifyModule(*m_, &verify_os_)) throw JitError("JIT: generated module is invalid: " + verify_);
      specialize();
      optimize_final();
      check_file_locals();
      if (want_ir) {
        llvm::raw_string_ostream os(r.ir);
        m_->print(os, nullptr);
      }
      r.program = run_through_orc();
    } catch (const JitError &e) {
      r.error = e.what();
    }
    r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

 private:
  llvm::Type *ptr() { return llvm::PointerType::get(*cx_, 0); }
  llvm::Constant *address(const void *p) {
    return llvm::ConstantExpr::getIntToPtr(llvm::ConstantInt::get(llvm::Type::getInt64Ty(*cx_), uint64_t(uintptr_t(p))),
                                           ptr());
  }

  void make_target() {
    auto jtmb = take(llvm::orc::JITTargetMachineBuilder::detectHost(), "JIT: no target for this machine");
    if (cpu_ != llvm::sys::getHostCPUName()) jtmb.getFeatures() = llvm::SubtargetFeatures();  // the CPU's own features
    jtmb.setCPU(cpu_);
    jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    jtmb_ = std::make_unique<llvm::orc::JITTargetMachineBuilder>(jtmb);
    tm_ = take(jtmb.createTargetMachine(), "JIT: target " + cpu_);
    m_->setDataLayout(tm_->createDataLayout());
    m_->setTargetTriple(tm_->getTargetTriple().str());
  }

  // Links the entries of the segment's element classes, then whatever they
  // call that some bitcode file defines (the flow cache, support functions),
  // only what is needed.
  void link_bitcode() {
    BitcodeIndex &index = BitcodeIndex::get();
    llvm::FunctionType *push_type =
        llvm::FunctionType::get(llvm::Type::getVoidTy(*cx_), {ptr(), llvm::Type::getInt32Ty(*cx_), ptr()}, false);
    for (RuntimeElement *e : seg_.elements()) {
      const JitEntry *entry = RuntimeRegistry::global().find_jit(e->class_name());
      if (!entry) throw JitError("JIT: element " + element_label(*e) + " (" + e->class_name() + ") has no JIT entry");
      int file = index.file_defining(entry->push_symbol);
      if (std::string plugin = plugin_of(*entry); file < 0 && !plugin.empty()) {
        // A plugin's element: its bitcode ships beside it.
        std::string why;
        if (!index.add_file(plugin + ".bc", &why))
          throw JitError("JIT: no bitcode for element " + element_label(*e) + " (class " + e->class_name() +
                         ", from plugin " + plugin + "): cannot read " + plugin + ".bc (" + why +
                         "); build it beside the plugin (docs/jit.md), or run with --no-jit");
        file = index.file_defining(entry->push_symbol);
      }
      if (file < 0)
        throw JitError("JIT: no bitcode for element " + element_label(*e) + " (class " + e->class_name() +
                       "): neither this binary nor a plugin's .bc has it; run with --no-jit");
      entries_[e] = entry;
      m_->getOrInsertFunction(entry->push_symbol, push_type);
      if (entry->classify_symbol) {
        m_->getOrInsertFunction(entry->classify_symbol, llvm::FunctionType::get(llvm::Type::getInt32Ty(*cx_),
                                                                                {ptr(), ptr()}, false));
        m_->getOrInsertFunction(entry->batch_done_symbol,
                                llvm::FunctionType::get(llvm::Type::getVoidTy(*cx_),
                                                        {ptr(), llvm::Type::getInt64Ty(*cx_), llvm::Type::getInt64Ty(*cx_)},
                                                        false));
      }
    }
    // The stamps, compared before anything is linked.
    for (auto &[e, entry] : entries_) m_->getOrInsertGlobal(entry->stamp_symbol, llvm::Type::getInt8Ty(*cx_));
    // Declared with any type: linking brings their definitions.
    for (const char *support : kSupportFunctions) {
      if (index.file_defining(support) < 0) throw JitError(std::string("JIT: the embedded bitcode lacks ") + support);
      m_->getOrInsertFunction(support, llvm::FunctionType::get(llvm::Type::getVoidTy(*cx_), false));
    }

    llvm::Linker linker(*m_);
    for (int round = 0; round < 16; ++round) {
      std::set<int> wanted;
      for (llvm::GlobalValue &g : m_->global_values())
        if (g.isDeclaration() && !g.getName().starts_with("llvm."))
          if (int f = index.file_defining(g.getName().str()); f >= 0) wanted.insert(f);
      if (wanted.empty()) return;
      for (int f : wanted) {
        llvm::MemoryBufferRef buf = index.file(f);
        std::string source = buf.getBufferIdentifier().str();
        auto src = take(llvm::parseBitcodeFile(buf, *cx_), "JIT: bitcode of " + source);
        src->setDataLayout(m_->getDataLayout());
        src->setTargetTriple(m_->getTargetTriple());
        for (llvm::Function &fn : *src)
          if (!fn.isDeclaration()) source_of_[fn.getName().str()] = source;
        if (linker.linkInModule(std::move(src), llvm::Linker::Flags::LinkOnlyNeeded))
          throw JitError("JIT: linking the bitcode of " + source + " failed: " + diag_.text);
      }
    }
    throw JitError("JIT: linking the bitcode did not settle");
  }

  // The stamps; then linkage: the linked functions become the loop's
  // private copies (internal: O3 inlines or specializes them freely, and
  // what it leaves is emitted here, for the JIT's target); variables are
  // the host's (declarations), so that state is never duplicated; constants
  // keep their values for folding.
  void prepare_linked() {
    for (auto &[e, entry] : entries_) {
      std::string file = source_of_.count(entry->push_symbol) ? source_of_[entry->push_symbol] : "?";
      std::string stale = stamp_problem(*m_, *entry, *entry->stamp,
                                        "element " + element_label(*e) + " (class " + e->class_name() + ", " + file + ")");
      if (!stale.empty()) throw JitError(stale);
    }
    if (auto *g = m_->getGlobalVariable("llvm.global_ctors")) g->eraseFromParent();
    if (auto *g = m_->getGlobalVariable("llvm.global_dtors")) g->eraseFromParent();
    for (llvm::Function &f : *m_) {
      f.removeFnAttr("target-cpu");
      f.removeFnAttr("target-features");
      f.removeFnAttr("tune-cpu");
      if (f.isDeclaration()) continue;
      if (f.hasExternalLinkage()) f.setLinkage(llvm::GlobalValue::InternalLinkage);
    }
    for (llvm::GlobalVariable &g : m_->globals()) {
      if (g.isDeclaration() || g.hasLocalLinkage() || g.getName().starts_with("llvm.")) continue;
      if (g.isConstant() && g.hasExternalLinkage()) {
        g.setLinkage(llvm::GlobalValue::AvailableExternallyLinkage);
      } else if (!g.isConstant()) {
        g.setInitializer(nullptr);
        g.setLinkage(llvm::GlobalValue::ExternalLinkage);
        g.setComdat(nullptr);
      }
    }
    // An alias (a C++ constructor's second name) would define the host's
    // symbol again in the JIT: it becomes a declaration of the host's.
    std::vector<llvm::GlobalAlias *> aliases;
    for (llvm::GlobalAlias &a : m_->aliases())
      if (!a.hasLocalLinkage()) aliases.push_back(&a);
    for (llvm::GlobalAlias *a : aliases) {
      llvm::GlobalValue *decl;
      if (auto *fty = llvm::dyn_cast<llvm::Function>(a->getAliaseeObject()))
        decl = llvm::Function::Create(fty->getFunctionType(), llvm::GlobalValue::ExternalLinkage, "", m_.get());
      else
        decl = new llvm::GlobalVariable(*m_, a->getValueType(), false, llvm::GlobalValue::ExternalLinkage, nullptr);
      decl->takeName(a);
      a->replaceAllUsesWith(decl);
      a->eraseFromParent();
    }
    emit_fn_ = callee_in("sluice_jit_emit");
    // By name: with no Filter in the segment, the declaration goes away
    // when the support function that names it does.
    match_name_ = callee_in("sluice_jit_filter_match")->getName().str();
  }

  // The host function a support function calls (its body names it).
  llvm::Function *callee_in(const char *name) {
    llvm::Function *f = m_->getFunction(name);
    if (f)
      for (llvm::BasicBlock &bb : *f)
        for (llvm::Instruction &in : bb)
          if (auto *call = llvm::dyn_cast<llvm::CallBase>(&in))
            if (llvm::Function *c = call->getCalledFunction(); c && !c->isIntrinsic()) return c;
    throw JitError(std::string("JIT: cannot find what ") + name + " calls in the support bitcode");
  }

  llvm::Function *support(const char *name) { return m_->getFunction(name); }

  llvm::Function *new_function(const std::string &name, llvm::FunctionType *type) {
    auto *f = llvm::Function::Create(type, llvm::Function::InternalLinkage, name, *m_);
    f->addFnAttr(llvm::Attribute::AlwaysInline);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    return f;
  }

  llvm::FunctionType *batch_fn_type() {
    return llvm::FunctionType::get(llvm::Type::getVoidTy(*cx_), {ptr()}, false);
  }

  bool in_segment(const RuntimeElement *e) const {
    for (RuntimeElement *x : seg_.elements())
      if (x == e) return true;
    return false;
  }

  std::string fn_name(const char *what, const RuntimeElement *e, int port) {
    return std::string(what) + "." + sanitize(e->name()) + (e->lane() >= 0 ? ".lane" + std::to_string(e->lane()) : "") +
           "." + std::to_string(port);
  }

  // batch->count as i64.
  llvm::Value *batch_count(llvm::IRBuilder<> &b, llvm::Value *batch) {
    static_assert(offsetof(PacketBatch, count) == 0);
    return b.CreateZExt(b.CreateLoad(b.getInt16Ty(), batch, "count"), b.getInt64Ty());
  }

  void count(llvm::IRBuilder<> &b, const Counter &c, llvm::Value *n) {
    b.CreateCall(support("sluice_jit_count"), {address(&c), n});
  }

  // The element's own push for this instance and input port: the class's
  // entry with both as constants, the push inlined into it, and its emits to
  // fused outputs made direct calls.
  llvm::Function *push_fn(RuntimeElement *e, int port) {
    auto key = std::make_pair(e, port);
    if (auto it = push_.find(key); it != push_.end()) return it->second;
    llvm::Function *entry = m_->getFunction(entries_.at(e)->push_symbol);
    if (!entry || entry->isDeclaration())
      throw JitError("JIT: the bitcode of " + e->class_name() + " lost its entry " + entries_.at(e)->push_symbol);
    llvm::ValueToValueMapTy map;
    map[entry->getArg(0)] = address(e);
    map[entry->getArg(1)] = llvm::ConstantInt::get(llvm::Type::getInt32Ty(*cx_), port);
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
                c && !c->isDeclaration() && c != emit_fn_ && call->arg_size() > 0 && call->getArgOperand(0) == self &&
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
          if (call->getCalledFunction() == emit_fn_ && call->getArgOperand(0) == self &&
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
  llvm::Function *deliver_fn(RuntimeElement *e, int port) {
    auto key = std::make_pair(e, port);
    if (auto it = deliver_.find(key); it != deliver_.end()) return it->second;
    llvm::Function *f = new_function(fn_name("deliver", e, port), batch_fn_type());
    deliver_[key] = f;
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(*cx_, "entry", f));
    count(b, e->counters.in, batch_count(b, f->getArg(0)));
    b.CreateCall(entries_.at(e)->classify_symbol ? one_pass_fn(e) : push_fn(e, port), {f->getArg(0)});
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
  struct StageNode {
    RuntimeElement *e;
    std::vector<std::unique_ptr<StageNode>> next;  // per output; null: an exit
    llvm::Value *packets = nullptr, *bytes = nullptr;
    std::vector<llvm::Value *> exit_batch, exit_count;  // per output that is an exit
  };

  bool is_stage(const RuntimeElement *e) const { return entries_.at(const_cast<RuntimeElement *>(e))->classify_symbol; }

  RuntimeElement *chain_successor(RuntimeElement *e, int port) {
    if (port >= int(e->output_count())) return nullptr;
    const std::vector<OutputTarget> &t = e->targets(port);
    if (t.size() != 1 || !t[0].element || t[0].channel || !in_segment(t[0].element) || !is_stage(t[0].element))
      return nullptr;
    return t[0].element;
  }

  std::unique_ptr<StageNode> chain_from(RuntimeElement *e, const std::map<RuntimeElement *, int> &reached) {
    auto node = std::make_unique<StageNode>();
    node->e = e;
    for (int q = 0; q < int(e->output_count()); ++q) {
      RuntimeElement *t = chain_successor(e, q);
      node->next.push_back(t && reached.at(t) == 1 ? chain_from(t, reached) : nullptr);
    }
    return node;
  }

  llvm::Function *one_pass_fn(RuntimeElement *root) {
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
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(*cx_, "entry", f));
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
    auto *loop = llvm::BasicBlock::Create(*cx_, "packet", f), *after = llvm::BasicBlock::Create(*cx_, "after", f);
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
      llvm::Function *classify = m_->getFunction(entries_.at(node.e)->classify_symbol);
      classify->addFnAttr(llvm::Attribute::AlwaysInline);
      llvm::Value *port = b.CreateCall(classify, {address(node.e), m});
      auto *done = llvm::BasicBlock::Create(*cx_, "next", f);
      std::vector<llvm::BasicBlock *> to(node.next.size());
      for (size_t q = 0; q < to.size(); ++q) to[q] = llvm::BasicBlock::Create(*cx_, "out" + std::to_string(q), f);
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
      auto *call = llvm::BasicBlock::Create(*cx_, "batch_done", f), *next = llvm::BasicBlock::Create(*cx_, "done", f);
      b.CreateCondBr(b.CreateICmpEQ(k, b.getInt64(0)), next, call);
      b.SetInsertPoint(call);
      b.CreateCall(m_->getFunction(entries_.at(node->e)->batch_done_symbol),
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
  llvm::Function *emit_fn(RuntimeElement *e, int port) {
    auto key = std::make_pair(e, port);
    if (auto it = emit_.find(key); it != emit_.end()) return it->second;
    llvm::Function *f = new_function(fn_name("emit", e, port), batch_fn_type());
    emit_[key] = f;
    llvm::Value *batch = f->getArg(0);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(*cx_, "entry", f));
    const std::vector<OutputTarget> *targets = port < int(e->output_count()) ? &e->targets(port) : nullptr;
    bool fused = targets && targets->size() == 1 && (*targets)[0].element && !(*targets)[0].channel &&
                 in_segment((*targets)[0].element);
    if (!fused) {
      b.CreateCall(support("sluice_jit_emit"), {address(e), b.getInt32(port), batch});
      b.CreateRetVoid();
      return f;
    }
    auto *go = llvm::BasicBlock::Create(*cx_, "go", f), *done = llvm::BasicBlock::Create(*cx_, "done", f);
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
  void generate_step() {
    auto *i1 = llvm::Type::getInt1Ty(*cx_);
    step_ = llvm::Function::Create(llvm::FunctionType::get(i1, false), llvm::Function::ExternalLinkage,
                                   "segment_" + std::to_string(seg_.segment().id) + "_step", *m_);
    step_->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(*cx_, "entry", step_));
    llvm::Type *batch_type = llvm::ArrayType::get(b.getInt8Ty(), sizeof(PacketBatch));
    llvm::AllocaInst *batch = b.CreateAlloca(batch_type, nullptr, "batch");
    batch->setAlignment(llvm::Align(alignof(PacketBatch)));
    llvm::AllocaInst *work = b.CreateAlloca(i1, nullptr, "work");
    b.CreateStore(b.getFalse(), work);
    auto when = [&](llvm::Value *cond, const std::string &name, const std::function<void()> &body) {
      auto *then = llvm::BasicBlock::Create(*cx_, name, step_), *next = llvm::BasicBlock::Create(*cx_, name + ".next", step_);
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
  }

  // What runs of each element in the loop: its push copies, or its
  // classify() and batch_done() in a one-pass chain.
  void check_thread_locals() {
    std::vector<std::pair<RuntimeElement *, llvm::Function *>> code;
    for (auto &[key, f] : push_) code.push_back({key.first, f});
    for (auto &[e, entry] : entries_)
      if (entry->classify_symbol)
        for (const char *s : {entry->classify_symbol, entry->batch_done_symbol})
          if (llvm::Function *f = m_->getFunction(s)) code.push_back({e, f});
    for (auto &[e, f] : code) {
      std::string err = thread_local_error(*f, element_label(*e) + " (class " + e->class_name() + ")");
      if (!err.empty()) throw JitError(err);
    }
  }

  llvm::PassBuilder pass_builder(llvm::LoopAnalysisManager &lam, llvm::FunctionAnalysisManager &fam,
                                 llvm::CGSCCAnalysisManager &cgam, llvm::ModuleAnalysisManager &mam) {
    llvm::PassBuilder pb(tm_.get());
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    return pb;
  }

  // Inlines the generated functions into the loop, then, until nothing
  // changes: loads of constant bytes become constants, calls of a Filter's
  // matches() become calls of its program as IR, and the result simplified.
  void specialize() {
    struct Span {
      uint64_t begin, end;
    };
    std::vector<Span> spans;
    std::map<uint64_t, const PcapFilter *> filters;
    for (RuntimeElement *e : seg_.elements()) {
      std::vector<RuntimeElement::ConstantBytes> bytes;
      e->jit_constant_bytes(bytes);
      for (auto &c : bytes) spans.push_back({uint64_t(uintptr_t(c.begin)), uint64_t(uintptr_t(c.begin)) + c.size});
      if (const PcapFilter *pf = e->jit_pcap_filter()) filters[uint64_t(uintptr_t(pf))] = pf;
    }
    auto constant_span = [&](uint64_t a, uint64_t n) {
      for (const Span &s : spans)
        if (a >= s.begin && a + n <= s.end) return true;
      return false;
    };
    std::map<const PcapFilter *, llvm::Function *> programs;
    const llvm::DataLayout &dl = m_->getDataLayout();

    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb = pass_builder(lam, fam, cgam, mam);
    llvm::ModulePassManager inline_all;
    inline_all.addPass(llvm::AlwaysInlinerPass());
    inline_all.addPass(llvm::GlobalDCEPass());
    llvm::FunctionPassManager simplify;
    simplify.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
    simplify.addPass(llvm::EarlyCSEPass(true));
    simplify.addPass(llvm::InstCombinePass());
    simplify.addPass(llvm::SimplifyCFGPass());
    inline_all.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(simplify)));
    inline_all.run(*m_, mam);

    for (int round = 0; round < 8; ++round) {
      bool changed = false;
      llvm::Function *match_fn = m_->getFunction(match_name_);
      for (llvm::Function &f : *m_) {
        if (f.isDeclaration()) continue;
        std::vector<llvm::Instruction *> dead;
        for (llvm::BasicBlock &bb : f)
          for (llvm::Instruction &in : bb) {
            if (auto *load = llvm::dyn_cast<llvm::LoadInst>(&in); load && load->isSimple()) {
              auto a = constant_address(load->getPointerOperand(), dl);
              llvm::Type *t = load->getType();
              uint64_t n = dl.getTypeStoreSize(t);
              if (!a || !constant_span(*a, n) || n > 8 || !(t->isIntegerTy() || t->isPointerTy() || t->isFloatingPointTy()))
                continue;
              uint64_t bits = 0;
              std::memcpy(&bits, reinterpret_cast<const void *>(uintptr_t(*a)), n);
              llvm::Constant *c = nullptr;
              if (t->isIntegerTy()) c = llvm::ConstantInt::get(t, bits);
              else if (t->isPointerTy()) c = llvm::ConstantExpr::getIntToPtr(llvm::ConstantInt::get(llvm::Type::getInt64Ty(*cx_), bits), t);
              else c = llvm::ConstantExpr::getBitCast(llvm::ConstantInt::get(llvm::IntegerType::get(*cx_, unsigned(n * 8)), bits), t);
              load->replaceAllUsesWith(c);
              dead.push_back(load);
              changed = true;
            } else if (auto *call = llvm::dyn_cast<llvm::CallInst>(&in); call && match_fn && call->getCalledFunction() == match_fn) {
              auto a = constant_address(call->getArgOperand(0), dl);
              auto it = a ? filters.find(*a) : filters.end();
              if (it == filters.end()) continue;
              llvm::Function *&program = programs[it->second];
              if (!program) {
                program = emit_bpf_function(*m_, "filter." + sanitize(it->second->expression()), it->second->insns(),
                                            it->second->insn_count());
                program->setLinkage(llvm::GlobalValue::InternalLinkage);
              }
              llvm::IRBuilder<> b(call);
              // matches(data, caplen, wirelen); the program takes (packet, wirelen, caplen)
              llvm::Value *len = b.CreateCall(program, {call->getArgOperand(1), call->getArgOperand(3), call->getArgOperand(2)});
              call->replaceAllUsesWith(b.CreateICmpNE(len, b.getInt32(0)));
              dead.push_back(call);
              changed = true;
            }
          }
        for (llvm::Instruction *i : dead) i->eraseFromParent();
      }
      changed |= specialize_constant_this();
      if (!changed) break;
      llvm::FunctionPassManager again;
      again.addPass(llvm::EarlyCSEPass(true));
      again.addPass(llvm::InstCombinePass());
      again.addPass(llvm::SimplifyCFGPass());
      llvm::ModulePassManager mpm;
      mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(again)));
      mpm.run(*m_, mam);
    }
  }

  // A call of the element's or the flow cache's code on an object at a
  // constant address (FlowCache::account_batch on the table's cache) gets a
  // copy of the callee with that address as a constant, so that the loads
  // of its configuration fold there too, whether O3 inlines it or not.
  bool specialize_constant_this() {
    const llvm::DataLayout &dl = m_->getDataLayout();
    std::vector<llvm::CallBase *> calls;
    for (llvm::Function &f : *m_)
      for (llvm::BasicBlock &bb : f)
        for (llvm::Instruction &in : bb)
          if (auto *call = llvm::dyn_cast<llvm::CallBase>(&in))
            if (llvm::Function *c = call->getCalledFunction();
                c && !c->isDeclaration() && c->hasLocalLinkage() && !c->isVarArg() && call->arg_size() > 0 &&
                c->arg_size() == call->arg_size() && call->getArgOperand(0)->getType()->isPointerTy() &&
                !specialized_.count(c) && constant_address(call->getArgOperand(0), dl))
              calls.push_back(call);
    for (llvm::CallBase *call : calls) {
      llvm::Function *callee = call->getCalledFunction();
      uint64_t at = *constant_address(call->getArgOperand(0), dl);
      llvm::Function *&copy = specializations_[{callee, at}];
      if (!copy) {
        llvm::ValueToValueMapTy map;
        map[callee->getArg(0)] = address(reinterpret_cast<const void *>(uintptr_t(at)));
        copy = llvm::CloneFunction(callee, map);
        copy->setName(callee->getName() + ".at");
        copy->setLinkage(llvm::GlobalValue::InternalLinkage);
        specialized_.insert(copy);
      }
      std::vector<llvm::Value *> args(call->arg_begin() + 1, call->arg_end());
      llvm::IRBuilder<> b(call);
      llvm::CallInst *replacement = b.CreateCall(copy, args);
      replacement->setCallingConv(copy->getCallingConv());
      if (!call->getType()->isVoidTy()) call->replaceAllUsesWith(replacement);
      call->eraseFromParent();
    }
    return !calls.empty();
  }
  std::map<std::pair<llvm::Function *, uint64_t>, llvm::Function *> specializations_;
  std::set<llvm::Function *> specialized_;

  void optimize_final() {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb = pass_builder(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(*m_, mam);
  }

  // A variable of an element's file that the loop still uses would be a
  // second copy of it, apart from the host's.
  void check_file_locals() {
    for (llvm::GlobalVariable &g : m_->globals())
      if (g.hasLocalLinkage() && !g.isConstant() && !g.use_empty())
        throw JitError("JIT: the fused loop uses '" + g.getName().str() +
                       "', a variable local to an element's source file, which it would duplicate; make it a "
                       "member of the element, or run with --no-jit");
  }

  std::unique_ptr<SegmentProgram> run_through_orc() {
    auto jit = take(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb_).create(), "JIT: ORC");
    jit->getMainJITDylib().addGenerator(take(
        llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(jit->getDataLayout().getGlobalPrefix()),
        "JIT: host symbols"));
    std::string name = step_->getName().str();
    if (auto e = jit->addIRModule(llvm::orc::ThreadSafeModule(std::move(m_), std::move(cx_))))
      throw JitError("JIT: ORC: " + llvm::toString(std::move(e)));
    auto sym = take(jit->lookup(name), "JIT: ORC could not make the loop");
    return std::make_unique<FusedProgram>(std::move(jit), sym.toPtr<bool (*)()>());
  }

  SegmentRunner &seg_;
  std::string cpu_;
  Diagnostics diag_;
  std::unique_ptr<llvm::LLVMContext> cx_;
  std::unique_ptr<llvm::Module> m_;
  std::unique_ptr<llvm::TargetMachine> tm_;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb_;
  std::map<RuntimeElement *, const JitEntry *> entries_;
  std::map<std::string, std::string> source_of_;  // function -> bitcode file it came from
  llvm::Function *emit_fn_ = nullptr, *step_ = nullptr;
  std::string match_name_;  // PcapFilter::matches
  std::map<std::pair<RuntimeElement *, int>, llvm::Function *> push_, deliver_, emit_;
  std::map<RuntimeElement *, llvm::Function *> one_pass_;
  std::string verify_;
  llvm::raw_string_ostream verify_os_{verify_};
};

class SegmentJit final : public ProgramCompiler {
 public:
  explicit SegmentJit(std::string cpu) : cpu_(std::move(cpu)) {}
  Result compile(SegmentRunner &segment, bool want_ir) override {
    SegmentBuilder builder(segment, cpu_);
    return builder.build(want_ir);
  }
  std::string describe() const override { return "LLVM ORC, " + cpu_; }

 private:
  std::string cpu_;
};

}  // namespace

std::string default_jit_cpu() {
  init_llvm();
  auto features = llvm::sys::getHostCPUFeatures();
  for (const char *f : {"avx2", "bmi2", "fma", "movbe", "f16c", "lzcnt", "bmi"})
    if (!features.lookup(f)) return llvm::sys::getHostCPUName().str();
  return "x86-64-v3";
}

std::unique_ptr<ProgramCompiler> make_segment_jit(const JitSettings &settings, std::string *error) {
  init_llvm();
  std::string cpu = settings.cpu.empty() ? default_jit_cpu() : settings.cpu == "host" ? llvm::sys::getHostCPUName().str()
                                                                                       : settings.cpu;
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) {
    *error = "JIT: no target for this machine: " + llvm::toString(jtmb.takeError());
    return nullptr;
  }
  std::string triple_error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(jtmb->getTargetTriple().str(), triple_error);
  if (!target) {
    *error = "JIT: " + triple_error;
    return nullptr;
  }
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(jtmb->getTargetTriple().str(), cpu, ""));
  if (!sti || !sti->isCPUStringValid(cpu)) {
    *error = "JIT: unknown CPU '" + cpu + "' for --jit-cpu (try x86-64-v3, x86-64-v2, host, or a name llc -mcpu=help lists)";
    return nullptr;
  }
  if (embedded_bitcode().empty()) {
    *error = "JIT: this binary embeds no element bitcode; run with --no-jit";
    return nullptr;
  }
  return std::make_unique<SegmentJit>(cpu);
}

std::string check_bitcode_stamp_for_tests(const std::string &class_name, const JitStamp &host) {
  init_llvm();
  const JitEntry *entry = RuntimeRegistry::global().find_jit(class_name);
  if (!entry) return "no JIT entry for class " + class_name;
  int file = BitcodeIndex::get().file_defining(entry->push_symbol);
  if (file < 0) return "JIT: no bitcode for class " + class_name;
  llvm::MemoryBufferRef f = BitcodeIndex::get().file(file);
  llvm::LLVMContext cx;
  auto m = llvm::parseBitcodeFile(f, cx);
  if (!m) return llvm::toString(m.takeError());
  return stamp_problem(**m, *entry, host, "class " + class_name + " (" + f.getBufferIdentifier().str() + ")");
}

std::string check_thread_locals_for_tests(const std::string &ir_text, const std::string &entry,
                                          const std::string &element) {
  llvm::LLVMContext cx;
  llvm::SMDiagnostic err;
  auto m = llvm::parseIR(llvm::MemoryBufferRef(ir_text, "test"), err, cx);
  if (!m) return "cannot parse: " + err.getMessage().str();
  llvm::Function *f = m->getFunction(entry);
  if (!f) return "no function " + entry;
  return thread_local_error(*f, element);
}

}  // namespace sluice
