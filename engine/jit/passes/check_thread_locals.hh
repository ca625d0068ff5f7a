// CheckThreadLocals: no element's code in the loop may use a thread-local
// variable. DPDK keeps an lcore id and per-lcore mempool caches in
// thread-local storage, which code run through ORC here either fails to
// link or reads at the wrong address (PLATFORM.md); the elements route such
// operations through host functions. Runs on the loop as generated, before
// anything is inlined, so that the error can name the element, the
// variable and the function that uses it. Changes nothing.
// LLVM's headers: include only from engine/jit.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <llvm/IR/PassManager.h>

namespace sluice {

class CheckThreadLocalsPass : public llvm::PassInfoMixin<CheckThreadLocalsPass> {
 public:
  // Each element's code: how errors name the element, and a function of it
  // (LoopBuilder::element_code()).
  explicit CheckThreadLocalsPass(std::vector<std::pair<std::string, llvm::Function *>> code) : code_(std::move(code)) {}
  llvm::PreservedAnalyses run(llvm::Module &m, llvm::ModuleAnalysisManager &am);
  static llvm::StringRef name() { return "CheckThreadLocals"; }
  // The first use found, as the JIT's error; empty: none.
  const std::string &error() const { return error_; }
  std::string report() const;

 private:
  std::vector<std::pair<std::string, llvm::Function *>> code_;
  std::string error_;
};

// The error for the first thread-local variable that `root`, or a function
// it reaches (not through the loop's own functions: other elements' code,
// checked on its own), uses; empty: none.
std::string thread_local_error(const llvm::Function &root, const std::string &element);

}  // namespace sluice
