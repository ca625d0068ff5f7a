// SpecializeConstantThis: a call of the loop's own code (a function of the
// module with local linkage: the elements', the flow cache's) on an object
// at a constant address, e.g. FlowCache::account_batch on a table's cache,
// gets a copy of the callee with that address as a constant (NAME.at), so
// that the loads of the object's configuration fold there too
// (FoldConstantLoads, next round), whether O3 inlines the copy or not.
// One copy per callee and address, over all runs; copies are not copied
// again.
// LLVM's headers: include only from engine/jit.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include <llvm/IR/PassManager.h>

namespace sluice {

class SpecializeConstantThisPass : public llvm::PassInfoMixin<SpecializeConstantThisPass> {
 public:
  llvm::PreservedAnalyses run(llvm::Module &m, llvm::ModuleAnalysisManager &am);
  static llvm::StringRef name() { return "SpecializeConstantThis"; }
  // What its last run did: "3 calls on a constant `this` redirected, 2 functions cloned".
  std::string report() const;

 private:
  std::map<std::pair<llvm::Function *, uint64_t>, llvm::Function *> specializations_;
  std::set<llvm::Function *> specialized_;
  size_t redirected_ = 0, cloned_ = 0;
};

}  // namespace sluice
