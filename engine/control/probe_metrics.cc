#include "engine/control/probe_metrics.hh"


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
// the counts of the instances of the same element that reloads replaced,
// added so that a counter never goes back.
void element_counters(const RuntimeElement &e, const CounterValues *before, MetricsWriter &out) {
  const ElementSpec &spec = *e.node().spec;
  CounterValues all(e.counters);
  if (before) all.add(*before);
  const auto *source = dynamic_cast<const SourceElement *>(&e);
  if (source || has_port(spec, StreamType::Packets)) {
    out.counter("element_received_packets_total", "Packets an element received (a source: took in).", double(all.in));
    out.counter("element_sent_packets_total", "Packets an element sent on; every copy counts.", double(all.out));
    out.counter("element_absorbed_packets_total", "Packets that ended in an element by design (sinks, flow tables).",
                double(all.absorbed));
    out.counter("element_copied_packets_total", "Extra packets an element made by fan-out.", double(all.copies));
    if (e.counts_bytes())
      out.counter("element_received_bytes_total", "Bytes (frames) an element received.", double(all.in_bytes));
  }
  if (has_port(spec, StreamType::Flows)) {
    out.counter("element_received_records_total", "Flow records an element received.", double(all.records_in));
    out.counter("element_sent_records_total", "Flow records an element sent on.", double(all.records_out));
    out.counter("element_absorbed_records_total", "Flow records that ended in an element: written or exported.",
                double(all.records_absorbed));
  }
  for (const CounterValues::Drop &d : all.drops) {
    if (d.of_records)
      out.counter("element_dropped_records_total", "Flow records an element lost, by reason.", double(d.count),
                  {{"reason", d.reason}});
    else
      out.counter("element_dropped_packets_total", "Packets an element dropped, by reason.", double(d.count),
                  {{"reason", d.reason}});
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
  const std::vector<RetiredTotal> replaced = rt.replaced();
  for (const auto &e : elements) {
    context(*e);
    const CounterValues *before = nullptr;
    for (const RetiredTotal &r : replaced)
      if (r.name == e->name()) before = &r.counters;
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
          ElementMetrics own(*e->node().spec, out);
          e->report_metrics(own);
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
