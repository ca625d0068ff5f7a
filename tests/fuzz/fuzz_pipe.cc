// libFuzzer target: any byte string as a .pipe file must give diagnostics or
// a graph, never a crash, hang or sanitizer report.
#include <cstdint>
#include <sstream>
#include <string>

#include "dsl/frontend.hh"
#include "engine/packet/pcap_filter.hh"
#include "engine/lanes.hh"
#include "engine/plan_format.hh"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace sluice;
  set_filter_checks_use_libpcap(false);  // no DNS lookups for `host name` while fuzzing
  SourceManager sm;
  Diagnostics diags(sm);
  ElementGraph graph;
  std::string text(reinterpret_cast<const char *>(data), size);
  std::ostringstream sink;
  FrontendOptions opts;
  opts.allow_require = false;
  if (load_pipe_text("fuzz.pipe", text, opts, sm, diags, graph)) {
    LaneGraph lanes;
    if (build_lanes(graph, diags, lanes)) {
      print_plan_text(sink, "fuzz.pipe", lanes);
      print_plan_dot(sink, "fuzz.pipe", lanes);
    }
  }
  diags.print(sink);
  return 0;
}
