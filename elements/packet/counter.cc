#include <rte_cycles.h>

#include <cstdio>

#include "engine/runtime/element_runtime.hh"

using namespace sluice;

namespace sluice::elements {

// Counting is what every element does (RuntimeElement::receive counts in);
// a Counter also counts bytes, keeps a rate and passes the packets on.
class CounterRuntime final : public PacketStage<CounterRuntime> {
 public:
  CounterRuntime(const Node &n, RunContext &c) : PacketStage(n, c) {
    window_.tsc = prev_.tsc = rte_rdtsc();
  }

  bool counts_bytes() const override { return true; }

  // Handlers (counter_spec).
  uint64_t count() const { return counters.in.get(); }
  std::string packet_rate() const { return rate(false); }
  std::string bit_rate() const { return rate(true); }

  // A packet stage: every packet passes; the bytes and the rate's snapshot
  // are kept per batch.
  int classify(rte_mbuf *) { return 0; }
  void batch_done(uint64_t, uint64_t wire_bytes) {
    counters.in_bytes.add(wire_bytes);
    if (uint64_t now = rte_rdtsc(); now - window_.tsc >= rte_get_tsc_hz()) {
      prev_ = window_;
      window_ = {now, counters.in.get(), counters.in_bytes.get()};
    }
  }
  void report(std::vector<std::string> &lines) const override {
    lines.push_back("bytes: " + std::to_string(counters.in_bytes.get()));
  }

 private:
  // The rate is measured from a snapshot taken by the data path at most once a
  // second: the one before the latest, so over 1 to 2 s; when no batch has
  // come for a second, the latest, so an idle counter's rate falls to zero.
  std::string rate(bool bits) const {
    uint64_t now = rte_rdtsc();
    const Snapshot &from = now - window_.tsc >= rte_get_tsc_hz() ? window_ : prev_;
    double seconds = double(now - from.tsc) / double(rte_get_tsc_hz());
    double v = bits ? double(counters.in_bytes.get() - from.bytes) * 8 : double(counters.in.get() - from.packets);
    char buf[32];
    snprintf(buf, sizeof buf, "%.1f", seconds > 0 ? v / seconds : 0);
    return std::string(buf);
  }

  struct Snapshot {
    uint64_t tsc = 0, packets = 0, bytes = 0;
  };
  Snapshot window_, prev_;
};

const ElementSpec &counter_spec() {
  static const ElementSpec spec =
      ElementSpec("Counter")
          .in_group("packet")
          .brief("Count the packets and bytes passing through")
          .describe(
              "Counts the packets and bytes (frame length) that pass and hands them on unchanged. There is "
              "one count per lane; `sluice ctl stats` and the metrics endpoint show them. Counting survives "
              "JIT fusion, so it costs almost nothing in a fused loop.")
          // several streams may be merged into one count (`f[match], f[reject] -> Counter`)
          .handler("count", "Packets counted.", &CounterRuntime::count)
          .handler("rate", "Packets per second over the last one to two seconds.", &CounterRuntime::packet_rate)
          .handler("bit_rate", "Bits per second (frames) over the same time.", &CounterRuntime::bit_rate)
          .input(PortSpec::packets("in").many().describe("Packets to count; may be connected several times, "
                                                         "the streams are merged."))
          .output(PortSpec::packets("out").describe("The same packets."));
  return spec;
}

SLUICE_ELEMENT(CounterRuntime, counter_spec);

}  // namespace sluice::elements
