// The JIT (DESIGN §8): each segment's loop fused into one function.
//
// For a segment it generates the driver loop the interpreter runs
// (InterpretedProgram: poll the sources, take from the input channels, hand
// each batch on, tick the timers), links the bitcode of exactly the elements
// the segment uses (embedded in the binary, engine/jit/element_bitcode.hh),
// turns every element instance's push into a copy of its own with the
// instance's address and input port as constants, and every emit() between
// two elements of the segment into a direct call, counted as the
// interpreter counts it. Each element's configuration (its jit_constants())
// and its Filter program become constants and IR of the loop; LLVM's O3
// pipeline then inlines it all into one function, which ORC (LLJIT) runs.
//
// What the loop cannot do itself it calls in the host: a source's poll (DPDK
// keeps per-thread mempool caches in thread-local storage, which JIT code
// cannot reach), channels, drops, flow records between elements, timers.
//
// The parts, in engine/jit: bitcode_index (the bitcode files and what they
// define), bitcode_linker (what a segment's classes need, linked),
// loop_builder (the loop), jit_pipeline with passes/ (checks and
// specializations as LLVM passes, then O3), and here the compiler that runs
// them and hands the module to ORC.
//
// LLVM's headers stay in engine/jit: none in this header.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/segment.hh"

namespace sluice {

struct JitSettings {
  std::string cpu;  // the code generation target; empty: default_jit_cpu()
  // When compile() is asked for IR: the module after each run of this pass
  // (jit_pass_names(), or "all") instead of the optimized module.
  std::string print_after;
  // --jit-perf: each loop's code and name written for perf (a jitdump, see
  // docs/jit.md), so that perf report and perf annotate see inside it.
  bool perf = false;
};

// Nullptr, with *error, when LLVM has no target for this machine, the
// CPU name is unknown or print_after names no pass. In the executable
// (engine/jit/module/jit_loader.cc), with the default settings, the JIT
// module is only looked for here (its absence is the error) and loaded by
// the first compile(): a run that compiles nothing never loads LLVM.
std::unique_ptr<ProgramCompiler> make_segment_jit(const JitSettings &settings, std::string *error);

// What every compilation needs first, done once per process: LLVM's target
// set up and, with `bitcode`, the embedded bitcode indexed (30 ms, the
// first compilation's otherwise). A run whose loops are compiled before it
// starts (--jit-wait) calls it with `bitcode` on a thread of its own while
// DPDK starts; a run that may not compile them (--jit, a short input)
// leaves it all to the first compilation, off the start (loading LLVM and
// its exit made a short --jit run 20 ms longer than --no-jit). Thread-safe.
void warm_up_jit(bool bitcode);

// x86-64-v3 where the host has its features (measured faster here than
// tuning for the host's own CPU, PLATFORM.md), else the host's CPU.
std::string default_jit_cpu();

// The passes each segment's module goes through, in the order they first
// run (engine/jit/jit_pipeline.hh).
const std::vector<std::string> &jit_pass_names();

// The thread-local storage check on element bitcode, on a module given as
// LLVM IR text whose function `entry` stands for the element's push: the
// error the JIT gives (naming `element`), or empty. For tests.
// The stale-bitcode check of the embedded bitcode of an element class
// against a given stamp (JitStamp): the JIT's error, or empty. For tests.
std::string check_bitcode_stamp_for_tests(const std::string &class_name, const JitStamp &host);

std::string check_thread_locals_for_tests(const std::string &ir_text, const std::string &entry,
                                          const std::string &element);

}  // namespace sluice
