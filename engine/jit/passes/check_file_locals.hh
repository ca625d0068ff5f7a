// CheckFileLocals: after optimization, the loop may use no variable local
// to an element's source file (a `static` of the file, internal linkage):
// the module's copy of it would be a second one, apart from the host's.
// Changes nothing.
// LLVM's headers: include only from engine/jit.
#pragma once
#include <string>

#include <llvm/IR/PassManager.h>

namespace sluice {

class CheckFileLocalsPass : public llvm::PassInfoMixin<CheckFileLocalsPass> {
 public:
  llvm::PreservedAnalyses run(llvm::Module &m, llvm::ModuleAnalysisManager &am);
  static llvm::StringRef name() { return "CheckFileLocals"; }
  // The first such variable, as the JIT's error; empty: none.
  const std::string &error() const { return error_; }
  std::string report() const;

 private:
  std::string error_;
};

}  // namespace sluice
