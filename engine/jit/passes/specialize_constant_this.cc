#include "engine/jit/passes/specialize_constant_this.hh"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include "engine/jit/jit_common.hh"

namespace sluice {

llvm::PreservedAnalyses SpecializeConstantThisPass::run(llvm::Module &m, llvm::ModuleAnalysisManager &) {
  redirected_ = cloned_ = 0;
  const llvm::DataLayout &dl = m.getDataLayout();
  std::vector<llvm::CallBase *> calls;
  for (llvm::Function &f : m)
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
      map[callee->getArg(0)] = address_constant(m.getContext(), reinterpret_cast<const void *>(uintptr_t(at)));
      copy = llvm::CloneFunction(callee, map);
      copy->setName(callee->getName() + ".at");
      copy->setLinkage(llvm::GlobalValue::InternalLinkage);
      specialized_.insert(copy);
      ++cloned_;
    }
    std::vector<llvm::Value *> args(call->arg_begin() + 1, call->arg_end());
    llvm::IRBuilder<> b(call);
    llvm::CallInst *replacement = b.CreateCall(copy, args);
    replacement->setCallingConv(copy->getCallingConv());
    if (!call->getType()->isVoidTy()) call->replaceAllUsesWith(replacement);
    call->eraseFromParent();
  }
  redirected_ = calls.size();
  if (calls.empty()) return llvm::PreservedAnalyses::all();
  // Calls replaced, functions added.
  return llvm::PreservedAnalyses::none();
}

std::string SpecializeConstantThisPass::report() const {
  return std::to_string(redirected_) + (redirected_ == 1 ? " call" : " calls") + " on a constant `this` redirected, " +
         std::to_string(cloned_) + (cloned_ == 1 ? " function" : " functions") + " cloned";
}

}  // namespace sluice
