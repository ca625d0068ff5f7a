// InlineFilterPrograms: a call of PcapFilter::matches on a filter at a
// constant address (a Filter of the segment, once its loads are folded)
// becomes a call of that filter's BPF program turned into IR
// (engine/packet/bpf_ir.hh), one function per filter, which the next
// simplifications and O3 inline into the loop: `tcp port 8443` is then an
// immediate compared with the packet's bytes.
// LLVM's headers: include only from engine/jit.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <llvm/IR/PassManager.h>

namespace sluice {

class PcapFilter;

class InlineFilterProgramsPass : public llvm::PassInfoMixin<InlineFilterProgramsPass> {
 public:
  // `filters` by their host address; `match_name`: PcapFilter::matches's
  // symbol (LinkedBitcode::filter_match_name).
  InlineFilterProgramsPass(std::map<uint64_t, const PcapFilter *> filters, std::string match_name)
      : filters_(std::move(filters)), match_name_(std::move(match_name)) {}
  llvm::PreservedAnalyses run(llvm::Module &m, llvm::ModuleAnalysisManager &am);
  static llvm::StringRef name() { return "InlineFilterPrograms"; }
  // What its last run did: "1 call of PcapFilter::matches replaced; the
  // program of 'tcp port 443' emitted as IR".
  std::string report() const;

 private:
  std::map<uint64_t, const PcapFilter *> filters_;
  std::string match_name_;
  std::map<const PcapFilter *, llvm::Function *> programs_;  // emitted so far, over all runs
  size_t replaced_ = 0;
  std::vector<std::string> emitted_;  // by the last run: the filters' expressions
};

}  // namespace sluice
