// The passes a segment's module goes through once its loop is generated
// (loop_builder.hh), in this order:
//
//   CheckThreadLocals       no element's code uses thread-local storage
//   InlineLoop              the generated functions inlined into the loop
//                           (AlwaysInliner, GlobalDCE), then SROA, EarlyCSE,
//                           InstCombine, SimplifyCFG
//   then rounds, at most 8, until a round changes nothing:
//     FoldConstantLoads       loads of the elements' constant bytes become constants
//     InlineFilterPrograms    PcapFilter::matches calls become the filter's program as IR
//     SpecializeConstantThis  calls on an object at a constant address get a copy of the callee
//     Simplify                EarlyCSE, InstCombine, SimplifyCFG (when the round changed something)
//   O3                      LLVM's O3 pipeline, for the target machine
//   CheckFileLocals         the loop uses no variable local to an element's file
//
// The specializations are LLVM (new pass manager) passes of their own
// (passes/); `sluice plan --emit-ir-after PASS` prints the module after each
// run of a pass, with what the pass did (docs/jit.md).
// LLVM's headers: include only from engine/jit.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include "engine/jit/passes/fold_constant_loads.hh"

namespace sluice {

class PcapFilter;
class SegmentRunner;

// What the passes are given of a segment.
struct PipelineInputs {
  std::vector<std::pair<std::string, llvm::Function *>> element_code;  // for CheckThreadLocals
  std::vector<llvm::Function *> generated;                              // the loop builder's, verified first
  std::vector<ConstantSpan> constant_bytes;                            // for FoldConstantLoads
  std::map<uint64_t, const PcapFilter *> filters;                      // for InlineFilterPrograms
  std::string filter_match_name;                                       // PcapFilter::matches
};

// The constant bytes and filters of the segment's elements.
void read_segment_constants(const SegmentRunner &seg, PipelineInputs &in);

class JitPipeline {
 public:
  // The names of the passes, in the order they first run.
  static const std::vector<std::string> &pass_names();
  // `print_after`: a pass name, "all", or empty (print nothing); checked
  // with pass_names() by the caller. `segment` labels what is printed.
  // `cancel` (may be null): when it reads true the run stops at its next
  // step, and LLVM's optional passes are skipped from then on.
  JitPipeline(llvm::TargetMachine &tm, PipelineInputs inputs, std::string print_after, int segment,
              const std::atomic<bool> *cancel = nullptr);
  // Throws JitError ("cancelled" when cancelled).
  void run(llvm::Module &m);
  // The module after each run of the pass asked for, each headed by
  // "; segment S, after PASS (round N)" and "; PASS: what it did".
  const std::string &printed() const { return printed_; }

 private:
  bool printing(const std::string &pass) const { return print_after_ == "all" || print_after_ == pass; }
  // Prints the module after a run of `pass` when asked to; `report`: what it did.
  void after(const llvm::Module &m, const std::string &pass, int round, llvm::function_ref<std::string()> report);

  llvm::TargetMachine &tm_;
  PipelineInputs in_;
  std::string print_after_;
  int segment_;
  const std::atomic<bool> *cancel_;
  std::string printed_;
};

}  // namespace sluice
