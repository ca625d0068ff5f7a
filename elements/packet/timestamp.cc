#include <rte_cycles.h>

#include <stdexcept>

#include "engine/runtime/clock.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/run_context.hh"

using namespace sluice;

namespace sluice::elements {

const ElementSpec &timestamp_spec() {
  static const ElementSpec spec =
      ElementSpec("Timestamp")
          .in_group("packet")
          .with_flags(kGivesTime)
          .brief("Stamp packets with their arrival time")
          .describe(
              "Sets each packet's timestamp, in nanoseconds, from the chosen clock. All flow logic "
              "(FlowTable, GCSlicer, the exporters' start and end times) runs on these timestamps, not on "
              "the wall clock, so replaying a trace with `clock pcap` gives the same flows every time.\n\n"
              "Put it right after the source, before any Ring, so that the time is taken as close to "
              "reception as possible.\n\n"
              "Trace sources (`pcap:` files, TrafficGen, paced or not) put their capture times on the packets "
              "themselves and the default clock (`auto`) keeps them; on a live device it stamps the device's "
              "receive times, or the CPU's time-stamp counter when the device gives none. Live devices put no "
              "time on packets themselves, so a FlowTable that their packets reach without a Timestamp is an "
              "error (`sluice check`). Times are passed on as the "
              "clock gives them, backwards steps and leaps included: the FlowTable dates each packet on a "
              "clock of its own that never goes back and never leaps on one packet's word, and counts the "
              "packets it dated otherwise (see FlowTable).")
          .arg(ArgSpec::symbol("clock", {"auto", "pcap", "tsc", "hw"})
                   .def("auto")
                   .pos()
                   .describe("Where the time comes from: `auto` (the default), the times the source gives "
                             "(capture times of a trace, the device's receive timestamps) and the CPU's "
                             "time-stamp counter where it gives none (a live port without timestamps); "
                             "`pcap`, the capture times recorded in a trace (for `pcap:` devices and "
                             "TrafficGen); `tsc`, the CPU's time-stamp counter, read once per batch and "
                             "interpolated over the batch's packets, set to the system clock once a second "
                             "(so records follow NTP; packet times never go back); `hw`, the NIC's receive "
                             "timestamps, where the device provides them."))
          .input(PortSpec::packets("in").describe("Packets to stamp."))
          .output(PortSpec::packets("out").describe("The same packets, stamped."));
  return spec;
}

// pcap: the capture time the source put in the annotations (trace files,
// TrafficGen). hw: the device's receive timestamp, which the source put
// there too. tsc: the CPU's time-stamp counter, read once per batch; the
// packets of a batch get times spread evenly since the previous batch. auto:
// pcap or hw when the lane's source gives times, tsc otherwise.
class TimestampRuntime final : public RuntimeElement {
 public:
  TimestampRuntime(const Node &n, RunContext &c) : RuntimeElement(n, c) {
    const std::string &clock = arg("clock").text;
    mode_ = clock == "tsc" ? Mode::Tsc : clock == "hw" ? Mode::Hw : clock == "pcap" ? Mode::Pcap : Mode::Auto;
  }

  void prepare() override {
    // The sources whose packets come here: the lane's, or every lane's for
    // a shared Timestamp.
    std::vector<SourceElement *> sources;
    if (SourceElement *src = ctx_.lane_source(lane())) sources.push_back(src);
    else
      for (SourceElement *s : ctx_.lane_sources)
        if (s) sources.push_back(s);
    for (SourceElement *src : sources) {
      if (mode_ == Mode::Pcap && !src->has_capture_time())
        throw std::runtime_error("'" + name() + "': clock pcap needs capture times, and '" + src->name() +
                                 "' gives none (live input); use clock tsc or hw, or leave the clock out (auto)");
      if (mode_ == Mode::Hw && !src->has_hw_timestamps() && !src->has_capture_time())
        throw std::runtime_error("'" + name() + "': clock hw: the device of '" + src->name() +
                                 "' gives no receive timestamps; use clock tsc, or leave the clock out (auto)");
    }
    if (mode_ == Mode::Auto) {
      bool all_timed = !sources.empty();
      for (SourceElement *src : sources) all_timed &= src->has_capture_time() || src->has_hw_timestamps();
      mode_ = all_timed ? Mode::Pcap : Mode::Tsc;
    }
    ns_per_tsc_ = 1e9 / double(rte_get_tsc_hz());
    resync_tsc_ = rte_get_tsc_hz();  // once a second
    resync(rte_rdtsc());
    last_ = wall0_;
  }

  // Only the clock is fixed while the segment runs: the TSC's base moves at
  // every resync.
  void jit_constants(std::vector<ConstantBytes> &out) const override {
    out.push_back({&mode_, sizeof mode_});
    out.push_back({&ns_per_tsc_, sizeof ns_per_tsc_});
    out.push_back({&resync_tsc_, sizeof resync_tsc_});
  }

  void push(int, PacketBatch &batch) override {
    if (mode_ == Mode::Tsc && batch.count) {
      uint64_t tsc = rte_rdtsc();
      if (tsc - tsc0_ >= resync_tsc_) resync(tsc);
      uint64_t now = wall0_ + uint64_t(double(tsc - tsc0_) * ns_per_tsc_);
      // Never back: after a resync that set the clock back, packets keep the
      // last time given until the system clock catches up.
      uint64_t step = now > last_ ? (now - last_) / uint64_t(batch.count) : 0;
      for (int i = 0; i < batch.count; ++i) anno(batch.pkts[i]).time_ns = last_ + step * uint64_t(i + 1);
      last_ += step * uint64_t(batch.count);
    }
    emit(0, batch);
  }

 private:
  // The TSC's rate is an estimate and NTP slews the system clock: set the
  // TSC's base to the system clock again, so packet times never drift
  // from it by more than a second's worth of the rate's error.
  void resync(uint64_t tsc) {
    wall0_ = wall_ns();
    tsc0_ = tsc;
  }

  enum class Mode { Auto, Pcap, Tsc, Hw } mode_;
  uint64_t wall0_ = 0, tsc0_ = 0, last_ = 0, resync_tsc_ = 1;
  double ns_per_tsc_ = 1;
};
SLUICE_ELEMENT(TimestampRuntime, timestamp_spec);

}  // namespace sluice::elements
