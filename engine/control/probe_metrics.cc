#include "engine/control/probe_metrics.hh"

#include <map>

#include "engine/control/metrics_writer.hh"
#include "engine/control/probe_control.hh"
#include "engine/runtime/channel.hh"

namespace sluice {

namespace {

bool has_port(const ElementSpec &spec, StreamType type) {
  for (const auto *ports : {&spec.inputs, &spec.outputs})
    for (const PortSpec &p : *ports)
      if (p.type == type) return true;
  return false;
}

// The counters every element keeps, by what its ports carry; `before` are
// the instances of the same element that reloads replaced, whose counts are
// added so that a counter never goes back.
void element_counters(const RuntimeElement &e, const std::vector<const RuntimeElement *> &before, MetricsWriter &out) {
  const ElementSpec &spec = *e.node().spec;
  std::vector<const RuntimeElement *> all = before;
  all.push_back(&e);
  auto total = [&](auto counter) {
    double t = 0;
    for (const RuntimeElement *x : all) t += double((x->counters.*counter).get());
    return t;
  };
  const auto *source = dynamic_cast<const SourceElement *>(&e);
  if (source || has_port(spec, StreamType::Packets)) {
    out.counter("element_received_packets_total", "Packets an element received (a source: took in).",
                total(&ElementCounters::in));
    out.counter("element_sent_packets_total", "Packets an element sent on; every copy counts.", total(&ElementCounters::out));
    out.counter("element_absorbed_packets_total", "Packets that ended in an element by design (sinks, flow tables).",
                total(&ElementCounters::absorbed));
    out.counter("element_copied_packets_total", "Extra packets an element made by fan-out.", total(&ElementCounters::copies));
    if (e.counts_bytes())
      out.counter("element_received_bytes_total", "Bytes (frames) an element received.", total(&ElementCounters::in_bytes));
  }
  if (has_port(spec, StreamType::Flows)) {
    out.counter("element_received_records_total", "Flow records an element received.", total(&ElementCounters::records_in));
    out.counter("element_sent_records_total", "Flow records an element sent on.", total(&ElementCounters::records_out));
    out.counter("element_absorbed_records_total", "Flow records that ended in an element: written or exported.",
                total(&ElementCounters::records_absorbed));
  }
  std::map<std::pair<std::string, bool>, double> drops;  // by reason, over the instances
  for (const RuntimeElement *x : all)
    for (size_t r = 0; r < x->counters.reasons.size(); ++r)
      drops[{x->counters.reasons[r], x->counters.of_records[r]}] += double(x->counters.drops[r].get());
  for (const auto &[reason, n] : drops) {
    if (reason.second)
      out.counter("element_dropped_records_total", "Flow records an element lost, by reason.", n, {{"reason", reason.first}});
    else
      out.counter("element_dropped_packets_total", "Packets an element dropped, by reason.", n, {{"reason", reason.first}});
  }
  if (source) {  // what the device lost counts as received and dropped, as in the run summary
    std::vector<std::pair<std::string, uint64_t>> dd;
    source->device_drops(dd);
    for (auto &[reason, n] : dd)
      out.counter("element_dropped_packets_total", "Packets an element dropped, by reason.", double(n), {{"reason", reason}});
  }
}

void reload_metrics(const ReloadStats &r, MetricsWriter &out) {
  out.counter("reloads_total", "Hot reloads: applied, or failed (the old graph kept running).",
              double(r.applied.load(std::memory_order_relaxed)), {{"result", "applied"}});
  out.counter("reloads_total", "Hot reloads: applied, or failed (the old graph kept running).",
              double(r.failed.load(std::memory_order_relaxed)), {{"result", "failed"}});
  std::vector<std::pair<double, uint64_t>> buckets;
  for (size_t i = 0; i < ReloadStats::kPauseBounds.size(); ++i)
    buckets.emplace_back(ReloadStats::kPauseBounds[i], r.pause_le[i].load(std::memory_order_relaxed));
  out.histogram("reload_pause_seconds", "How long a lane stood still while a reload switched it.", buckets,
                double(r.pause_sum_ns.load(std::memory_order_relaxed)) * 1e-9, r.pauses.load(std::memory_order_relaxed));
}

}  // namespace

void collect_probe_metrics(const Runtime &rt, MetricsWriter &out) {
  const RunContext &ctx = rt.context();
  for (const Lane &l : ctx.graph().lanes) {
    const SourceElement *s = ctx.lane_source(l.id);
    MetricSink::Labels lane = {{"lane", lane_label(l.id)}};
    out.counter("lane_received_packets_total", "Packets a lane's source took in.", double(s->counters.in.get()), lane);
    out.counter("lane_received_bytes_total", "Bytes (frames) a lane's source took in.", double(s->received_bytes()), lane);
  }
  const auto &elements = rt.elements();
  auto context = [&](const RuntimeElement &e) {
    out.set_context({{"lane", lane_label(e.lane())}, {"element", element_base_name(rt, e)}});
  };
  const std::vector<const RuntimeElement *> replaced = rt.replaced_instances();
  for (const auto &e : elements) {
    context(*e);
    std::vector<const RuntimeElement *> before;
    for (const RuntimeElement *r : replaced)
      if (r->name() == e->name()) before.push_back(r);
    element_counters(*e, before, out);
    // A lane's merge into a shared element is a queue too (a Ring reports its own).
    if (e->node().spec->is_thread_boundary()) continue;
    for (size_t port = 0; port < e->output_count(); ++port)
      for (const OutputTarget &t : e->targets(int(port)))
        if (t.channel)
          out.gauge("merge_queue_occupancy_items",
                    "Packets or flow records waiting in a lane's queue into a shared element.",
                    double(t.channel->occupancy()), {{"to", element_base_name(rt, *t.channel->target().element)}});
  }
  for (size_t s = 0; s < rt.segments().size(); ++s) {
    bool ok = run_on_segment(rt, int(s), [&] {
      for (const auto &e : elements)
        if (e->node().segment == int(s)) {
          context(*e);
          e->report_metrics(out);
        }
    });
    if (!ok)
      out.comment("segment " + std::to_string(s) + " did not reach a batch boundary in time: the state of its "
                  "elements is missing from this scrape");
  }
  out.set_context({});
  reload_metrics(rt.reload_stats(), out);
}

std::string probe_metrics_text(const Runtime &rt) {
  MetricsWriter w;
  collect_probe_metrics(rt, w);
  return w.text();
}

}  // namespace sluice
