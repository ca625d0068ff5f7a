// The entry point of the JIT module (sluice-jit.so, jit_module.hh): the
// JIT's functions, as the executable's loader calls them.
#include "engine/jit/jit_module.hh"

extern "C" __attribute__((visibility("default"))) const sluice::JitModuleApi *sluice_jit_module() {
  static const sluice::JitModuleApi api = {
      SLUICE_VERSION,
      sizeof(sluice::JitModuleApi),
      &sluice::make_segment_jit,
      &sluice::warm_up_jit,
  };
  return &api;
}
