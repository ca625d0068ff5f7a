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
              "themselves and `clock pcap` keeps them; live devices give none, so a FlowTable that their "
              "packets reach without a Timestamp is an error (`sluice check`). Times are passed on as the "
              "clock gives them, backwards steps and leaps included: the FlowTable dates each packet on a "
              "clock of its own that never goes back and never leaps on one packet's word, and counts the "
              "packets it dated otherwise (see FlowTable).")
          .arg(ArgSpec::symbol("clock", {"pcap", "tsc", "hw"})
                   .def("tsc")
                   .pos()
                   .describe("Where the time comes from: `pcap`, the capture times recorded in a trace (for "
                             "`pcap:` devices and TrafficGen); `tsc`, the CPU's time-stamp counter, read once "
                             "per batch and interpolated over the batch's packets; `hw`, the NIC's receive "
                             "timestamps, where the device provides them."))
          .input(PortSpec::packets("in").describe("Packets to stamp."))
          .output(PortSpec::packets("out").describe("The same packets, stamped."));
  return spec;
}

// pcap: the capture time the source put in the annotations (trace files,
// TrafficGen). hw: the device's receive timestamp, which the source put
// there too. tsc: the CPU's time-stamp counter, read once per batch; the
// packets of a batch get times spread evenly since the previous batch.
class TimestampRuntime final : public RuntimeElement {
 public:
  TimestampRuntime(const Node &n, RunContext &c) : RuntimeElement(n, c) {
    const std::string &clock = arg("clock").text;
    mode_ = clock == "tsc" ? Mode::Tsc : clock == "hw" ? Mode::Hw : Mode::Pcap;
  }

  void prepare() override {
    SourceElement *src = ctx_.lane_source(lane());
    if (mode_ == Mode::Pcap && src && !src->has_capture_time())
      throw std::runtime_error("'" + name() + "': clock pcap needs capture times, and '" + src->name() +
                               "' gives none (live input); use clock tsc or hw");
    if (mode_ == Mode::Hw && src && !src->has_hw_timestamps() && !src->has_capture_time())
      throw std::runtime_error("'" + name() + "': clock hw: the device of '" + src->name() +
                               "' gives no receive timestamps; use clock tsc");
    wall0_ = wall_ns();
    tsc0_ = rte_rdtsc();
    ns_per_tsc_ = 1e9 / double(rte_get_tsc_hz());
    last_ = wall0_;
  }

 public:
  void jit_constants(std::vector<ConstantBytes> &out) const override {
    out.push_back({&mode_, sizeof mode_});
    out.push_back({&wall0_, sizeof wall0_});
    out.push_back({&tsc0_, sizeof tsc0_});
    out.push_back({&ns_per_tsc_, sizeof ns_per_tsc_});
  }

  void push(int, PacketBatch &batch) override {
    if (mode_ == Mode::Tsc && batch.count) {
      uint64_t now = wall0_ + uint64_t(double(rte_rdtsc() - tsc0_) * ns_per_tsc_);
      uint64_t step = now > last_ ? (now - last_) / batch.count : 0;
      for (int i = 0; i < batch.count; ++i) anno(batch.pkts[i]).time_ns = last_ + step * uint64_t(i + 1);
      last_ = now;
    }
    emit(0, batch);
  }

 private:
  enum class Mode { Pcap, Tsc, Hw } mode_;
  uint64_t wall0_ = 0, tsc0_ = 0, last_ = 0;
  double ns_per_tsc_ = 1;
};
SLUICE_ELEMENT(TimestampRuntime, timestamp_spec);

}  // namespace sluice::elements
