#include "engine/jit/passes/check_file_locals.hh"

#include <llvm/IR/Module.h>

namespace sluice {

llvm::PreservedAnalyses CheckFileLocalsPass::run(llvm::Module &m, llvm::ModuleAnalysisManager &) {
  error_.clear();
  for (llvm::GlobalVariable &g : m.globals())
    if (g.hasLocalLinkage() && !g.isConstant() && !g.use_empty()) {
      error_ = "JIT: the fused loop uses '" + g.getName().str() +
               "', a variable local to an element's source file, which it would duplicate; make it a "
               "member of the element, or run with --no-jit";
      break;
    }
  return llvm::PreservedAnalyses::all();
}

std::string CheckFileLocalsPass::report() const {
  return error_.empty() ? "no variable local to an element's file is used" : error_;
}

}  // namespace sluice
