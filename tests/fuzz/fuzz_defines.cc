// libFuzzer target: `-D NAME=VALUE` values. Whatever the values, the front
// end gives diagnostics or a graph, never a crash, hang or sanitizer report.
// Input: the first byte picks one of a fixed set of small configurations,
// the rest is the values of $V and $W, separated by a newline. The
// configurations put $V and $W in arguments of every type: counts, bytes,
// durations, rates, fractions, booleans, symbols, strings, element names,
// host:port, lists, compound parameters, string interpolation, and (through
// FuzzArgs below, since no element of the library takes them) addresses and
// prefixes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "dsl/frontend.hh"
#include "engine/core/element_spec.hh"
#include "engine/driver/lanes.hh"
#include "engine/packet/pcap_filter.hh"

namespace {

using sluice::ArgSpec;

const sluice::ElementSpec &fuzz_args_spec() {
  static const sluice::ElementSpec spec = sluice::ElementSpec("FuzzArgs")
                                              .in_group("packet")
                                              .brief("Arguments of the types no library element takes")
                                              .input(sluice::PortSpec::packets("in"))
                                              .output(sluice::PortSpec::packets("out"))
                                              .arg(ArgSpec::address("address"))
                                              .arg(ArgSpec::prefix("prefix"))
                                              .arg(ArgSpec::address("addresses").lists())
                                              .arg(ArgSpec::prefix("prefixes").lists())
                                              .arg(ArgSpec::host_port("peer"))
                                              .arg(ArgSpec::count("counts").lists().or_words({"none"}));
  return spec;
}
SLUICE_ELEMENT_SPEC(fuzz_args_spec);

// Each uses $V and $W in arguments of one type each (so that a seed can make
// it valid); tests/fuzz/defines.seeds has values for each.
const char *const kConfigs[] = {
    // 0: counts
    "TrafficGen(flows $V, new_flows_per_s $W) -> Ring(capacity $V) -> Discard;\n",
    // 1: bytes (a list, or a word), durations
    "TrafficGen(sizes $V, duration $W) -> Discard;\n",
    // 2: rates, fractions
    "TrafficGen(rate $V, ipv6 $W, udp $W) -> Discard;\n",
    // 3: a string, a boolean
    "RSSSource(device $V, queues 2, symmetric $W) -> Discard;\n",
    // 4: a symbol, a fraction
    "TrafficGen -> Timestamp(clock $V) -> Sample(rate $W) -> Discard;\n",
    // 5: durations, a symbol
    "TrafficGen -> ft :: FlowTable(capacity 1K, idle $V, active $V, direction $W) -> GCSlicer(table ft, period $V)\n"
    "  -> FlowLog(\"/dev/null\");\n",
    // 6: a list of symbols, a symbol
    "TrafficGen -> ft :: FlowTable(key $V, on_full $W) -> GCSlicer(table ft) -> FlowLog(\"-\");\n",
    // 7: an element name, host:port
    "TrafficGen -> ft :: FlowTable -> GCSlicer(table $V) -> IPFIXExporter(collector $W, transport udp);\n",
    // 8: a pcap-filter expression, a file name
    "TrafficGen -> f :: Filter($V) -> Counter -> Discard;\nf[1] -> PcapSink($W);\n",
    // 9: addresses, prefixes, in lists too
    "TrafficGen -> FuzzArgs(address $V, addresses [$V, $V], prefix $W, prefixes [$W, 10.0.0.0/8]) -> Discard;\n",
    // 10: host:port, a list of counts or a word
    "TrafficGen -> FuzzArgs(peer $V, counts $W) -> Discard;\n",
    // 11: compound parameters
    "elementclass M { $a, $b | input -> Ring(capacity $a) -> ft :: FlowTable(idle $b) -> GCSlicer(table ft) -> output; }\n"
    "TrafficGen -> M($V, $W) -> FlowLog(\"/dev/null\");\n",
    // 12: interpolation into strings
    "define $D \"port ${V}\";\nTrafficGen(duration \"${W}s\") -> Filter(\"$D\") -> Discard;\n",
    // 13: a define the command line overrides, lanes per queue
    "define $V 1K;\nTrafficGen(queues $W) -> Ring(capacity $V) -> Discard;\n",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace sluice;
  if (size == 0) return 0;
  set_filter_checks_use_libpcap(false);  // no DNS lookups for `host name` while fuzzing
  const char *config = kConfigs[data[0] % std::size(kConfigs)];
  std::string values(reinterpret_cast<const char *>(data + 1), size - 1);
  size_t newline = values.find('\n');
  FrontendOptions opts;
  opts.allow_require = false;
  opts.defines = {{"V", values.substr(0, newline)},
                  {"W", newline == std::string::npos ? std::string("1") : values.substr(newline + 1)}};
  SourceManager sm;
  Diagnostics diags(sm);
  ElementGraph graph;
  std::ostringstream sink;
  if (load_pipe_text("fuzz.pipe", config, opts, sm, diags, graph)) {
    LaneGraph lanes;
    build_lanes(graph, diags, lanes);
  }
  diags.print(sink);
  static const bool print = std::getenv("FUZZ_PRINT");  // to see what an input does: FUZZ_PRINT=1 fuzz_defines FILE
  if (print) std::fputs(sink.str().c_str(), stderr);
  return 0;
}
