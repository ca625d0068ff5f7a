#include <rte_cycles.h>

#include <algorithm>
#include <stdexcept>

#include "elements/flow/flow_table.hh"
#include "engine/base/clock.hh"
#include "engine/runtime/run_context.hh"

#include "elements/units.hh"

using namespace sluice;
using namespace sluice::units;

namespace sluice::elements {

namespace {

// Slice durations in power-of-two buckets of nanoseconds, for the summary.
struct SliceHistogram {
  static constexpr int kBuckets = 40;
  uint64_t count[kBuckets] = {};
  uint64_t total = 0, max_ns = 0, sum_ns = 0;
  // n slices scanned together in `ns`: each counts with the average.
  void add(uint64_t ns, uint64_t n = 1) {
    uint64_t each = ns / n;
    int b = each ? 64 - __builtin_clzll(each) : 0;
    count[b < kBuckets ? b : kBuckets - 1] += n;
    total += n;
    sum_ns += ns;
    if (each > max_ns) max_ns = each;
  }
  // Bucket b holds durations below 2^b ns: cumulative counts at 2^b ns for
  // b in [first, last], 1 us to 134 ms, as seconds.
  std::vector<std::pair<double, uint64_t>> cumulative(int first = 10, int last = 27) const {
    std::vector<std::pair<double, uint64_t>> out;
    uint64_t seen = 0;
    for (int b = 0; b <= last; ++b) {
      seen += count[b];
      if (b >= first) out.emplace_back(double(1ull << b) * 1e-9, seen);
    }
    return out;
  }
  // Upper bound of the bucket holding quantile q.
  uint64_t quantile(double q) const {
    uint64_t want = uint64_t(double(total) * q), seen = 0;
    for (int b = 0; b < kBuckets; ++b)
      if ((seen += count[b]) > want) return b ? (1ull << b) : 1;
    return max_ns;
  }
};

// Every period/slices of packet time, the next 1/slices of the table's slots
// are checked for timeouts. The table is the FlowTable instance of the same
// lane, in the same segment (one thread: no locking).
class GCSlicerRuntime final : public RuntimeElement {
 public:
  GCSlicerRuntime(const Node &n, RunContext &c) : RuntimeElement(n, c) {
    period_ = uint64_t(arg("period").integer);
    slices_ = uint64_t(arg("slices").integer);
  }

  bool wants_tick() const override { return true; }

  void prepare() override {
    find_table();
    ns_per_tsc_ = 1e9 / double(rte_get_tsc_hz());
  }

  // A reload: the table may be a new instance (another capacity), or the
  // period and slices changed; the scan goes on where it was.
  Change prepare_relink() override {
    FlowTableRuntime *t = lane_table();
    return [this, t] {
      table_ = t;
      cut_slices();
    };
  }
  Change prepare_reconfigure(const Node &next) override {
    uint64_t period = uint64_t(next.arg("period")->value.integer), slices = uint64_t(next.arg("slices")->value.integer);
    return [this, period, slices] {
      period_ = period;
      slices_ = slices;
      cut_slices();
    };
  }

  // Packet time drives the slices. On a live lane with no packet for a
  // while, wall time stands in for it, so flows still expire.
  void tick() override {
    uint64_t now = table_->now_ns();
    if (now == 0) return;  // no packet yet
    if (table_->live()) {
      uint64_t idle = mono_ns() - table_->last_batch_wall_ns();
      if (idle > step_) now += idle;
    }
    if (next_ == 0) next_ = now + step_;
    if (now < next_) return;
    // The slices due, at most one full scan: far behind (a jump in packet
    // time) one scan is enough.
    uint64_t due = std::min<uint64_t>(slices_, (now - next_) / step_ + 1);
    run_slices(now, due);
    next_ += due * step_;
    if (now >= next_) next_ = now + step_;
  }

  // Handlers (gc_slicer_spec).
  uint64_t slices_run() const { return hist_.total; }
  uint64_t scans() const { return scans_; }
  std::string slice_time() const {
    return "p50 <= " + std::to_string(hist_.quantile(0.5)) + " ns, p99 <= " + std::to_string(hist_.quantile(0.99)) +
           " ns, max " + std::to_string(hist_.max_ns) + " ns";
  }

  void report_metrics(ElementMetrics &out) const override {
    out.histogram("gc_slice_duration_seconds", hist_.cumulative(),
                  double(hist_.sum_ns) * 1e-9, hist_.total);
  }

  void report(std::vector<std::string> &lines) const override {
    if (!hist_.total) return lines.push_back("slices: none ran");
    lines.push_back("slices: " + std::to_string(hist_.total) + " of " + std::to_string(slice_len_) +
                    " slots each, in " + std::to_string(scans_) + " scans; time per slice p50 <= " + std::to_string(hist_.quantile(0.5)) + " ns, p99 <= " +
                    std::to_string(hist_.quantile(0.99)) + " ns, max " + std::to_string(hist_.max_ns) + " ns");
  }

 public:
  void push(int, PacketBatch &) override {}
  void push_flows(int, FlowBatch &batch) override { emit_flows(0, batch); }

 private:
  // `due` slices from the cursor on. Consecutive slices up to the end of
  // the table are one scan: the same slots in the same order at the same
  // time as slice by slice, without a call, a clock read and a histogram
  // entry for each (a trace with gaps in packet time has a full scan due at
  // nearly every batch). The histogram times the scan only, not what
  // downstream does with the records.
  void run_slices(uint64_t now, uint64_t due) {
    while (due > 0) {
      uint64_t to_wrap = (slots_ - cursor_ + slice_len_ - 1) / slice_len_;  // slices left before slot 0
      uint64_t n = std::min(due, to_wrap);
      size_t begin = cursor_, end = size_t(std::min<uint64_t>(slots_, cursor_ + n * slice_len_));
      uint64_t cycles = 0;
      while (begin < end) {
        size_t got = 0;
        uint64_t t0 = rte_rdtsc();
        begin = table_->cache().expire(now, begin, end, out_.recs + out_.count, kMaxFlowBatch - out_.count, &got);
        cycles += rte_rdtsc() - t0;
        out_.count = uint16_t(out_.count + got);
        if (out_.full() || begin < end) emit_made_flows(0, out_);
      }
      cursor_ = end >= slots_ ? 0 : end;
      hist_.add(uint64_t(double(cycles) * ns_per_tsc_), n);
      ++scans_;
      due -= n;
    }
    emit_made_flows(0, out_);
  }

  void find_table() {
    table_ = lane_table();
    cut_slices();
  }

  // The FlowTable named `table` in this lane of the context's graph (during
  // a reload: the new graph, whose node this instance is about to take).
  FlowTableRuntime *lane_table() const {
    const Node &me = *ctx_.node_of(this);
    const std::string &table = me.arg("table")->value.text;
    int e = ctx_.graph().graph->find(table);
    auto *t = dynamic_cast<FlowTableRuntime *>(ctx_.instance(e, lane()));
    if (!t) throw std::runtime_error("'" + name() + "': no FlowTable '" + table + "' in its lane");
    if (ctx_.node_of(t)->segment != me.segment)
      throw std::runtime_error("'" + name() + "': its table '" + t->name() +
                               "' runs on another thread (a Ring between them); put the GCSlicer right after it");
    return t;
  }

  void cut_slices() {
    slots_ = table_->cache().slots();
    slice_len_ = (slots_ + slices_ - 1) / slices_;
    step_ = std::max<uint64_t>(1, period_ / slices_);
    if (cursor_ >= slots_) cursor_ = 0;
  }

  uint64_t period_, slices_, step_ = 1, next_ = 0, scans_ = 0;
  size_t slots_ = 0, slice_len_ = 1, cursor_ = 0;
  double ns_per_tsc_ = 1;
  FlowTableRuntime *table_ = nullptr;
  FlowBatch out_;
  SliceHistogram hist_;
};

}  // namespace


const ElementSpec &gc_slicer_spec() {
  static const ElementSpec spec =
      ElementSpec("GCSlicer")
          .in_group("flow")
          .brief("Expire a FlowTable's flows, a slice at a time")
          .describe(
              "Applies the idle and active timeouts of the FlowTable named by `table`. Rather than scanning "
              "the whole table at once, it scans 1/`slices` of it every `period`/`slices` of packet time, so "
              "the work is spread evenly and no batch pays for a full scan. With `period 1s, slices 1000` a "
              "thousandth of the table is scanned every millisecond and each flow is looked at once a "
              "second; a flow therefore ends at most `period` after its timeout.\n\n"
              "The expired flows leave on `out` together with the records arriving on `in`, so connecting "
              "the table's `flows` output here gives one stream with every ended flow.\n\n"
              "Time is packet time; on live input an idle lane still advances it, so flows expire even when "
              "no packet arrives. When packet time jumps (a gap in a trace, an idle lane), the slices due are "
              "scanned at once, at most one full scan, and consecutive ones as one scan (`scans`).")
          .arg(ArgSpec::element("table", "FlowTable")
                   .needed()
                   .describe("The FlowTable to expire: the name of a FlowTable in the same scope, usually "
                             "the element just before."))
          .arg(ArgSpec::duration("period")
                   .live()
                   .def("1s")
                   .range(1 * kMs, 1 * kHour)
                   .describe("Time in which the whole table is scanned once: how late, at most, a flow is "
                             "expired."))
          .arg(ArgSpec::count("slices")
                   .live()
                   .def("1000")
                   .range(1, 1 * kM)
                   .describe("Pieces the table is scanned in per period. More slices make each scan shorter "
                             "and more frequent."))
          .handler("slices_run", "Expiry slices scanned so far.", &GCSlicerRuntime::slices_run)
          .handler("slice_time", "Time per slice: median, 99th percentile and maximum (slices scanned together "
                                 "count with their average).", &GCSlicerRuntime::slice_time)
          .handler("scans", "Scans of the table so far: the slices due at one time, up to the table's end, are one "
                            "scan.", &GCSlicerRuntime::scans)
          .metric(MetricSpec::histogram("gc_slice_duration_seconds", "Time one expiry slice of a flow table took."))
          .input(PortSpec::flows("in").many().describe("Flow records to pass on: the table's `flows` output."))
          .output(PortSpec::flows("out").many().describe(
              "Records of ended flows: those arriving on `in` and those expired here."));
  return spec;
}

SLUICE_ELEMENT(GCSlicerRuntime, gc_slicer_spec);

}  // namespace sluice::elements
