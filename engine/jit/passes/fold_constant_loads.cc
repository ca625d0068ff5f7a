#include "engine/jit/passes/fold_constant_loads.hh"

#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>

#include <cstring>

#include "engine/jit/jit_common.hh"

namespace sluice {

bool FoldConstantLoadsPass::constant(uint64_t a, uint64_t n) const {
  for (const ConstantSpan &s : spans_)
    if (a >= s.begin && a + n <= s.end) return true;
  return false;
}

llvm::PreservedAnalyses FoldConstantLoadsPass::run(llvm::Module &m, llvm::ModuleAnalysisManager &) {
  folded_ = 0;
  const llvm::DataLayout &dl = m.getDataLayout();
  llvm::LLVMContext &cx = m.getContext();
  for (llvm::Function &f : m) {
    if (f.isDeclaration()) continue;
    std::vector<llvm::Instruction *> dead;
    for (llvm::BasicBlock &bb : f)
      for (llvm::Instruction &in : bb) {
        auto *load = llvm::dyn_cast<llvm::LoadInst>(&in);
        if (!load || !load->isSimple()) continue;
        auto a = constant_address(load->getPointerOperand(), dl);
        llvm::Type *t = load->getType();
        uint64_t n = dl.getTypeStoreSize(t);
        if (!a || !constant(*a, n) || n > 8 || !(t->isIntegerTy() || t->isPointerTy() || t->isFloatingPointTy()))
          continue;
        uint64_t bits = 0;
        std::memcpy(&bits, reinterpret_cast<const void *>(uintptr_t(*a)), n);
        llvm::Constant *c = nullptr;
        if (t->isIntegerTy())
          c = llvm::ConstantInt::get(t, bits);
        else if (t->isPointerTy())
          c = llvm::ConstantExpr::getIntToPtr(llvm::ConstantInt::get(llvm::Type::getInt64Ty(cx), bits), t);
        else
          c = llvm::ConstantExpr::getBitCast(
              llvm::ConstantInt::get(llvm::IntegerType::get(cx, unsigned(n * 8)), bits), t);
        load->replaceAllUsesWith(c);
        dead.push_back(load);
      }
    for (llvm::Instruction *i : dead) i->eraseFromParent();
    folded_ += dead.size();
  }
  if (!folded_) return llvm::PreservedAnalyses::all();
  // Values changed, not the control flow.
  llvm::PreservedAnalyses kept;
  kept.preserveSet<llvm::CFGAnalyses>();
  kept.preserve<llvm::FunctionAnalysisManagerModuleProxy>();
  return kept;
}

std::string FoldConstantLoadsPass::report() const {
  return std::to_string(folded_) + (folded_ == 1 ? " load" : " loads") + " folded";
}

}  // namespace sluice
