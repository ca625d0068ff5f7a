#include "engine/packet/bpf_jit.hh"

#include "engine/packet/bpf_ir.hh"

#include <pcap/bpf.h>

#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <mutex>
#include <vector>

namespace sluice {

struct BpfJit::Engine {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

BpfJit::~BpfJit() = default;

namespace {

constexpr const char *kFunctionName = "sluice_bpf";

}  // namespace

// The program as one function, instruction by instruction, with the checks
// and results of libpcap's bpf_filter(): a load past the captured bytes, or
// a division by zero, rejects the packet (returns 0).
llvm::Function *emit_bpf_function(llvm::Module &m, const std::string &name, const bpf_insn *insns, size_t count) {
  llvm::LLVMContext &cx = m.getContext();
  llvm::IRBuilder<> b(cx);
  llvm::Type *i8 = b.getInt8Ty(), *i16 = b.getInt16Ty(), *i32 = b.getInt32Ty();
  auto *type = llvm::FunctionType::get(i32, {b.getPtrTy(), i32, i32}, false);
  auto *fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, m);
  llvm::Value *packet = fn->getArg(0), *wirelen = fn->getArg(1), *caplen = fn->getArg(2);
  packet->setName("packet"), wirelen->setName("wirelen"), caplen->setName("caplen");

  auto *entry = llvm::BasicBlock::Create(cx, "entry", fn);
  auto *reject = llvm::BasicBlock::Create(cx, "reject", fn);
  std::vector<llvm::BasicBlock *> at(count);
  for (size_t pc = 0; pc < count; ++pc) at[pc] = llvm::BasicBlock::Create(cx, "pc" + std::to_string(pc), fn);
  b.SetInsertPoint(entry);
  llvm::Value *a = b.CreateAlloca(i32, nullptr, "A"), *x = b.CreateAlloca(i32, nullptr, "X");
  llvm::Value *mem = b.CreateAlloca(llvm::ArrayType::get(i32, BPF_MEMWORDS), nullptr, "M");
  b.CreateStore(b.getInt32(0), a);
  b.CreateStore(b.getInt32(0), x);
  b.CreateMemSet(mem, b.getInt8(0), BPF_MEMWORDS * 4, llvm::MaybeAlign(4));
  b.CreateBr(count ? at[0] : reject);
  b.SetInsertPoint(reject);
  b.CreateRet(b.getInt32(0));

  auto k32 = [&](uint32_t k) -> llvm::Value * { return b.getInt32(k); };
  llvm::Type *memory = llvm::ArrayType::get(i32, BPF_MEMWORDS);
  auto slot = [&](uint32_t k) { return b.CreateConstInBoundsGEP2_32(memory, mem, 0, k % BPF_MEMWORDS); };
  // Reads `size` bytes at `offset` (big-endian), after checking they were
  // captured: offset + size <= caplen, without overflow.
  auto load = [&](llvm::Value *offset, unsigned size, llvm::BasicBlock *next_check) -> llvm::Value * {
    llvm::Value *fits = b.CreateAnd(b.CreateICmpULE(offset, caplen),
                                    b.CreateICmpULE(k32(size), b.CreateSub(caplen, offset)));
    auto *ok = llvm::BasicBlock::Create(cx, "in", b.GetInsertBlock()->getParent(), next_check);
    b.CreateCondBr(fits, ok, reject);
    b.SetInsertPoint(ok);
    llvm::Value *p = b.CreateInBoundsGEP(i8, packet, b.CreateZExt(offset, b.getInt64Ty()));
    llvm::Type *t = size == 4 ? i32 : size == 2 ? i16 : i8;
    llvm::Value *v = b.CreateAlignedLoad(t, p, llvm::Align(1));
    if (size > 1) v = b.CreateUnaryIntrinsic(llvm::Intrinsic::bswap, v);
    return size == 4 ? v : b.CreateZExt(v, i32);
  };

  for (size_t pc = 0; pc < count; ++pc) {
    const bpf_insn &in = insns[pc];
    b.SetInsertPoint(at[pc]);
    llvm::BasicBlock *next = pc + 1 < count ? at[pc + 1] : reject;
    auto target = [&](size_t off) { return pc + 1 + off < count ? at[pc + 1 + off] : reject; };
    unsigned size = BPF_SIZE(in.code) == BPF_W ? 4 : BPF_SIZE(in.code) == BPF_H ? 2 : 1;
    switch (BPF_CLASS(in.code)) {
      case BPF_LD:
      case BPF_LDX: {
        llvm::Value *dst = BPF_CLASS(in.code) == BPF_LD ? a : x;
        llvm::Value *v = nullptr;
        switch (BPF_MODE(in.code)) {
          case BPF_IMM: v = k32(in.k); break;
          case BPF_LEN: v = wirelen; break;
          case BPF_MEM: v = b.CreateLoad(i32, slot(in.k)); break;
          case BPF_ABS: v = load(k32(in.k), size, next); break;
          case BPF_IND: {  // X + k, where X + k may not wrap
            llvm::Value *xv = b.CreateLoad(i32, x);
            llvm::Value *sum = b.CreateAdd(xv, k32(in.k));
            llvm::Value *wraps = b.CreateICmpULT(sum, xv);
            auto *ok = llvm::BasicBlock::Create(cx, "nowrap", fn, next);
            b.CreateCondBr(wraps, reject, ok);
            b.SetInsertPoint(ok);
            v = load(sum, size, next);
            break;
          }
          case BPF_MSH: v = b.CreateShl(b.CreateAnd(load(k32(in.k), 1, next), k32(0xf)), k32(2)); break;
          default: b.CreateBr(reject); continue;
        }
        b.CreateStore(v, dst);
        b.CreateBr(next);
        break;
      }
      case BPF_ST: b.CreateStore(b.CreateLoad(i32, a), slot(in.k)), b.CreateBr(next); break;
      case BPF_STX: b.CreateStore(b.CreateLoad(i32, x), slot(in.k)), b.CreateBr(next); break;
      case BPF_JMP: {
        if (BPF_OP(in.code) == BPF_JA) {
          b.CreateBr(target(in.k));
          break;
        }
        llvm::Value *av = b.CreateLoad(i32, a);
        llvm::Value *src = BPF_SRC(in.code) == BPF_X ? b.CreateLoad(i32, x) : k32(in.k);
        llvm::Value *cond = nullptr;
        switch (BPF_OP(in.code)) {
          case BPF_JEQ: cond = b.CreateICmpEQ(av, src); break;
          case BPF_JGT: cond = b.CreateICmpUGT(av, src); break;
          case BPF_JGE: cond = b.CreateICmpUGE(av, src); break;
          case BPF_JSET: cond = b.CreateICmpNE(b.CreateAnd(av, src), k32(0)); break;
          default: b.CreateBr(reject); continue;
        }
        b.CreateCondBr(cond, target(in.jt), target(in.jf));
        break;
      }
      case BPF_ALU: {
        llvm::Value *av = b.CreateLoad(i32, a);
        if (BPF_OP(in.code) == BPF_NEG) {
          b.CreateStore(b.CreateNeg(av), a);
          b.CreateBr(next);
          break;
        }
        llvm::Value *src = BPF_SRC(in.code) == BPF_X ? b.CreateLoad(i32, x) : k32(in.k);
        unsigned op = BPF_OP(in.code);
        if (op == BPF_DIV || op == BPF_MOD) {  // by zero: reject
          auto *ok = llvm::BasicBlock::Create(cx, "nonzero", fn, next);
          b.CreateCondBr(b.CreateICmpEQ(src, k32(0)), reject, ok);
          b.SetInsertPoint(ok);
        }
        llvm::Value *r = nullptr;
        switch (op) {
          case BPF_ADD: r = b.CreateAdd(av, src); break;
          case BPF_SUB: r = b.CreateSub(av, src); break;
          case BPF_MUL: r = b.CreateMul(av, src); break;
          case BPF_DIV: r = b.CreateUDiv(av, src); break;
          case BPF_MOD: r = b.CreateURem(av, src); break;
          case BPF_AND: r = b.CreateAnd(av, src); break;
          case BPF_OR: r = b.CreateOr(av, src); break;
          case BPF_XOR: r = b.CreateXor(av, src); break;
          case BPF_LSH:  // a shift by 32 or more gives 0, as in bpf_filter()
          case BPF_RSH: {
            llvm::Value *shifted = op == BPF_LSH ? b.CreateShl(av, src) : b.CreateLShr(av, src);
            r = b.CreateSelect(b.CreateICmpULT(src, k32(32)), shifted, k32(0));
            break;
          }
          default: b.CreateBr(reject); continue;
        }
        b.CreateStore(r, a);
        b.CreateBr(next);
        break;
      }
      case BPF_RET:
        b.CreateRet(BPF_RVAL(in.code) == BPF_K ? k32(in.k)
                    : BPF_RVAL(in.code) == BPF_A ? static_cast<llvm::Value *>(b.CreateLoad(i32, a))
                                                  : static_cast<llvm::Value *>(b.CreateLoad(i32, x)));
        break;
      case BPF_MISC:
        if (BPF_MISCOP(in.code) == BPF_TAX) b.CreateStore(b.CreateLoad(i32, a), x);
        else b.CreateStore(b.CreateLoad(i32, x), a);
        b.CreateBr(next);
        break;
      default: b.CreateBr(reject); break;
    }
  }
  return fn;
}

namespace {

void optimize(llvm::Module &m) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb;
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(m, mam);
}

}  // namespace

std::unique_ptr<BpfJit> BpfJit::compile(const bpf_insn *insns, size_t count, std::string *error) {
  static std::once_flag targets;
  std::call_once(targets, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  auto fail = [&](const std::string &why) -> std::unique_ptr<BpfJit> {
    if (error) *error = "cannot compile the filter to native code: " + why;
    return nullptr;
  };
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) return fail(llvm::toString(jit.takeError()));

  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>("filter", *context);
  module->setDataLayout((*jit)->getDataLayout());
  module->setTargetTriple((*jit)->getTargetTriple().str());
  emit_bpf_function(*module, kFunctionName, insns, count);
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(*module, &os)) return fail(problems);
  optimize(*module);

  std::unique_ptr<BpfJit> out(new BpfJit);
  llvm::raw_string_ostream ir(out->ir_);
  module->print(ir, nullptr);
  if (auto e = (*jit)->addIRModule(llvm::orc::ThreadSafeModule(std::move(module), std::move(context))))
    return fail(llvm::toString(std::move(e)));
  auto address = (*jit)->lookup(kFunctionName);
  if (!address) return fail(llvm::toString(address.takeError()));
  out->fn_ = address->toPtr<Function>();
  out->engine_ = std::make_unique<Engine>(Engine{std::move(*jit)});
  return out;
}

}  // namespace sluice
