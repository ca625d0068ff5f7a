// libFuzzer target: any byte string as a .pipe file must give diagnostics or
// a graph, never a crash, hang or sanitizer report. Through the compile
// driver, as the CLI compiles.
#include <cstdint>
#include <sstream>
#include <string>

#include "engine/driver/compile_pipe.hh"
#include "engine/packet/pcap_filter.hh"
#include "engine/placement/plan_format.hh"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace sluice;
  set_filter_checks_use_libpcap(false);  // no DNS lookups for `host name` while fuzzing
  CompileOptions opts;
  opts.allow_require = false;
  auto pipe = compile_pipe_text("fuzz.pipe", std::string(reinterpret_cast<const char *>(data), size), opts);
  std::ostringstream sink;
  if (pipe->ok) {
    print_plan_text(sink, "fuzz.pipe", pipe->lanes);
    print_plan_dot(sink, "fuzz.pipe", pipe->lanes);
  }
  sink << pipe->printed() << pipe->count_line();
  return 0;
}
