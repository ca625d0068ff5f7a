// The JIT as a module of its own (sluice-jit.so), loaded when a run first
// compiles, not with the executable.
//
// Why: the JIT links LLVM (libLLVM, 130 MB mapped, 376K relocations), and a
// process that links it pays for loading and relocating it before main():
// 15 of the 25 ms every `sluice` command took to start, --no-jit runs,
// `sluice check` and `sluice ctl` included. The executable instead carries
// a loader (jit_loader.cc) that defines the segment_jit.hh functions it
// calls by forwarding to the module, which it opens on first use (a --jit
// run: at its first compilation, in the background; --jit-wait: on the
// thread that warms the JIT up while DPDK starts). The tests and the
// fuzzers link the JIT in (sluice_fusion, sluice_bpf_jit).
//
// The module resolves the runtime's symbols against the executable
// (ENABLE_EXPORTS) and binds its own functions to itself (-Bsymbolic-
// functions): the executable's forwarding definitions of the same names
// never interpose.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/jit/segment_jit.hh"

namespace sluice {

struct JitModuleApi {
  // A module built for another sluice is refused: the two share the
  // runtime's classes, which must be laid out alike.
  const char *version;  // SLUICE_VERSION
  size_t api_size;      // sizeof(JitModuleApi)
  std::unique_ptr<ProgramCompiler> (*make_segment_jit)(const JitSettings &settings, std::string *error);
  void (*warm_up_jit)(bool bitcode);
};

// The module's one exported entry point: extern "C" const JitModuleApi *sluice_jit_module().
inline constexpr const char *kJitModuleEntry = "sluice_jit_module";
// Its file: beside the executable in the build tree, under the library
// directory where installed (SLUICE_JIT_MODULE_FROM_BIN, CMakeLists.txt).
inline constexpr const char *kJitModuleFile = "sluice-jit.so";

// The JIT's passes by name, as JitPipeline::pass_names() lists them, for
// the command line's help without loading the module (a test keeps the two
// equal).
inline const std::vector<std::string> &jit_pass_names_listed() {
  static const std::vector<std::string> names = {
      "CheckThreadLocals", "InlineLoop", "FoldConstantLoads", "InlineFilterPrograms",
      "SpecializeConstantThis", "Simplify", "O3", "CheckFileLocals"};
  return names;
}

}  // namespace sluice
