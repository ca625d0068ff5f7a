#include "engine/runtime/graph_builder.hh"

#include <algorithm>
#include <stdexcept>

#include <rte_memory.h>

#include "engine/runtime/dpdk_env.hh"

namespace sluice {

std::unique_ptr<RuntimeElement> make_instance(const Node &n, RunContext &ctx) {
  const RuntimeFactory *make = RuntimeRegistry::global().find(n.spec->name);
  if (!make)
    throw std::runtime_error("element '" + n.name + "' (" + n.spec->name +
                             ") has no run-time implementation yet; it can be checked and planned, not run");
  return (*make)(n, ctx);
}

namespace {

unsigned channel_capacity(const Node &from, const ElementSpec &spec) {
  if (spec.is_thread_boundary() && spec.needs.channel_capacity) return spec.needs.channel_capacity(from);
  return kMergeCapacity;
}

const std::string &target_name(const LaneGraph &lg, const Edge &ed) {
  return lg.graph->elements[lg.nodes[ed.to].element].name;
}

}  // namespace

SegmentSet make_segments(const LaneGraph &lg, const std::vector<RuntimeElement *> &inst, const Placement *plan,
                         const KeptChannels *kept) {
  SegmentSet set;
  for (const Segment &s : lg.segments) {
    set.segments.push_back(std::make_unique<SegmentRunner>(s));
    if (!plan) continue;
    const SegmentPlacement &sp = plan->segments[size_t(s.id)];
    ThreadSite site{sp.cpu, sp.node, 0, 0, sp.floats_over};
    if (s.role == Segment::Role::Acquisition && plan->acquisition.mode == AcquisitionPolicy::Mode::Periodic)
      site.deadline_runtime_ns = plan->acquisition.runtime_ns, site.deadline_period_ns = plan->acquisition.period_ns;
    set.segments.back()->set_site(site);
  }
  set.edge_channel.assign(lg.edges.size(), nullptr);
  for (size_t i = 0; i < lg.edges.size(); ++i) {
    const Edge &ed = lg.edges[i];
    if (!ed.crosses_segments) continue;
    const Node &fn = lg.nodes[ed.from];
    if (kept)
      if (auto k = kept->find({inst[ed.from], ed.from_port, target_name(lg, ed)}); k != kept->end()) {
        set.edge_channel[i] = k->second;
        set.taken_over.push_back(k->second);
        continue;
      }
    const ElementSpec &fspec = *fn.spec;
    StreamType type = fspec.output_port(ed.from_port)->type;
    int socket = plan ? dpdk_socket_for_node(plan->segments[size_t(fn.segment)].node) : SOCKET_ID_ANY;
    set.channels.push_back(std::make_unique<Channel>(inst[ed.from]->name(), type, channel_capacity(fn, fspec), socket));
    set.edge_channel[i] = set.channels.back().get();
  }
  return set;
}

std::vector<std::function<void()>> wire_segments(SegmentSet &set, const LaneGraph &lg,
                                                 const std::vector<RuntimeElement *> &inst,
                                                 const std::vector<bool> &running, RunContext &ctx) {
  std::vector<std::function<void()>> at_switch;
  auto connect = [&](int node, int port, OutputTarget t) {
    if (running[size_t(node)]) inst[size_t(node)]->stage_connect(port, t);
    else inst[size_t(node)]->connect(port, t);
  };
  for (size_t i = 0; i < lg.edges.size(); ++i) {
    const Edge &ed = lg.edges[i];
    RuntimeElement *from = inst[ed.from], *to = inst[ed.to];
    if (!ed.crosses_segments) {
      connect(ed.from, ed.from_port, {to, ed.to_port, nullptr});
      continue;
    }
    const Node &fn = lg.nodes[ed.from];
    bool ring = fn.spec->is_thread_boundary();
    Channel *ch = set.edge_channel[i];
    StreamType type = ch->type();
    SourceElement *src = fn.lane >= 0 ? ctx.lane_source(fn.lane) : nullptr;
    bool live = src && src->live();
    const char *full = ring ? "ring full" : type == StreamType::Flows ? "export queue full" : "shared input full";
    int reason = from->counters.reason(full, type == StreamType::Flows);
    SegmentRunner &producer = *set.segments[size_t(fn.segment)], &consumer = *set.segments[size_t(lg.nodes[ed.to].segment)];
    auto settle = [ch, from, reason, live, to, port = ed.to_port, from_port = ed.from_port] {
      ch->set_source_port(from_port);
      ch->set_overflow(from, reason, !live);
      ch->set_target({to, port, nullptr});
    };
    // A channel taken over is still in use by the running graph: it changes at the switch.
    bool taken = std::find(set.taken_over.begin(), set.taken_over.end(), ch) != set.taken_over.end();
    if (taken) at_switch.push_back(settle);
    else settle();
    connect(ed.from, ed.from_port, {nullptr, 0, ch});
    producer.add_output(ch);
    consumer.add_input(ch, /*bind_doorbell=*/!taken);
    if (taken) at_switch.push_back([ch, &consumer] { consumer.bind_input_doorbell(ch); });
  }
  for (const Segment &s : lg.segments) {
    SegmentRunner &r = *set.segments[size_t(s.id)];
    for (int v : s.nodes) {
      RuntimeElement *e = inst[size_t(v)];
      r.add_element(e);
      if (auto *src = dynamic_cast<SourceElement *>(e)) {
        r.add_source(src);
        if (const Node &n = lg.nodes[size_t(v)]; n.spec->needs.burst) r.set_burst(n.spec->needs.burst(n));
      }
    }
  }
  return at_switch;
}

}  // namespace sluice
