// FoldConstantLoads: a load from bytes of an element instance that do not
// change while its segment runs (RuntimeElement::jit_constant_bytes: a
// Sample's threshold, a FlowTable's configuration, the output wiring)
// becomes the constant it reads, now, from the host's memory. Loads of up
// to 8 bytes of an integer, pointer or floating-point type, at a constant
// address (an instance's `inttoptr` plus constant offsets).
// LLVM's headers: include only from engine/jit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <llvm/IR/PassManager.h>

namespace sluice {

struct ConstantSpan {
  uint64_t begin, end;  // host addresses, [begin, end)
};

class FoldConstantLoadsPass : public llvm::PassInfoMixin<FoldConstantLoadsPass> {
 public:
  explicit FoldConstantLoadsPass(std::vector<ConstantSpan> spans) : spans_(std::move(spans)) {}
  llvm::PreservedAnalyses run(llvm::Module &m, llvm::ModuleAnalysisManager &am);
  static llvm::StringRef name() { return "FoldConstantLoads"; }
  // What its last run did: "37 loads folded".
  std::string report() const;

 private:
  bool constant(uint64_t address, uint64_t size) const;
  std::vector<ConstantSpan> spans_;
  size_t folded_ = 0;
};

}  // namespace sluice
