// Links into a segment's module the bitcode of exactly the element classes
// the segment uses: each class's entry (sluice_jit_push_<Class>, and a
// packet stage's classify and batch_done), the loop's support functions
// (bitcode/support.cc), and whatever they reach that some bitcode file
// defines (LLVM's linker, only what is needed). Then checks each class's
// stamp, and gives the linked code the linkage the loop needs (below).
// LLVM's headers: include only from engine/jit.
#pragma once
#include <map>
#include <string>

#include <llvm/IR/Module.h>

namespace sluice {

class RuntimeElement;
class SegmentRunner;
struct Diagnostics;
struct JitEntry;

struct LinkedBitcode {
  std::map<RuntimeElement *, const JitEntry *> entries;  // the class entry of each element
  llvm::Function *host_emit = nullptr;                   // what sluice_jit_emit calls: RuntimeElement::emit
  // What sluice_jit_filter_match calls, PcapFilter::matches, by name: with
  // no Filter in the segment its declaration goes away with the support
  // function that names it.
  std::string filter_match_name;
};

// Throws JitError. `diagnostics` is the module's context's handler (the
// linker reports there).
// `cancel` (may be null): checked before each bitcode file (check_cancelled).
LinkedBitcode link_segment_bitcode(llvm::Module &m, const SegmentRunner &seg, const Diagnostics &diagnostics,
                                   const std::atomic<bool> *cancel = nullptr);

}  // namespace sluice
