// A plugin that holds the compilation that loads it: its constructor writes
// "$SLUICE_TEST_GATE.loading" and waits (at most 60 s) until the file
// $SLUICE_TEST_GATE exists. Tests use it to keep a reload's compile under
// way for as long as they need (what answers meanwhile, what waits).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/core/element_spec.hh"

namespace {

struct Gate {
  Gate() {
    const char *gate = std::getenv("SLUICE_TEST_GATE");
    if (!gate) return;
    std::string loading = std::string(gate) + ".loading";
    if (FILE *f = std::fopen(loading.c_str(), "w")) std::fclose(f);
    for (int i = 0; i < 6000 && access(gate, F_OK) != 0; ++i) usleep(10 * 1000);
  }
} gate;

}  // namespace

extern "C" int sluice_plugin_abi() { return sluice::kPluginAbi; }
