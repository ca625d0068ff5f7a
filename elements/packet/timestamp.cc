#include <rte_cycles.h>

#include <stdexcept>

#include "engine/base/clock.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/run_context.hh"
#include "engine/runtime/tsc_clock.hh"

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
    clock_.start(1e9 / double(rte_get_tsc_hz()), rte_get_tsc_hz() /* once a second */, rte_rdtsc(), wall_ns());
  }

  void jit_constants(std::vector<ConstantBytes> &out) const override { out.push_back({&mode_, sizeof mode_}); }

  void push(int, PacketBatch &batch) override {
    if (mode_ == Mode::Tsc && batch.count) {
      uint64_t tsc = rte_rdtsc();
      if (clock_.due(tsc)) clock_.resync(tsc, wall_ns());
      TscWallClock::Spread t = clock_.stamp(tsc, unsigned(batch.count));
      for (int i = 0; i < batch.count; ++i) anno(batch.pkts[i]).time_ns = t.first + t.step * uint64_t(i + 1);
    }
    emit(0, batch);
  }

 private:
  enum class Mode { Auto, Pcap, Tsc, Hw } mode_;
  TscWallClock clock_;
};

SLUICE_ELEMENT(TimestampRuntime, timestamp_spec);

}  // namespace sluice::elements
