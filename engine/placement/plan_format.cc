#include "engine/placement/plan_format.hh"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <map>
#include <set>

#include "engine/base/json_text.hh"

namespace sluice {

std::string format_args(const std::vector<ResolvedArg> &args, bool mark_defaults) {
  std::string out;
  for (const ResolvedArg &a : args) {
    if (!a.spec) continue;
    if (!out.empty()) out += ", ";
    std::string v = a.value.to_string();
    if (a.spec->type == ArgType::String && !a.value.is_symbol) v = "\"" + v + "\"";
    out += a.spec->name + " " + v;
    if (mark_defaults && a.from_default) out += " (default)";
  }
  return out;
}

namespace {

std::string port_text(const ElementSpec &spec, int port, bool output) {
  const PortSpec *p = output ? spec.output_port(port) : spec.input_port(port);
  std::string s = std::to_string(port);
  if (p && !p->name.empty() && !p->variadic) s += ":" + p->name;
  return s;
}

std::string segment_title(const LaneGraph &lg, const Segment &s) {
  return "segment " + std::to_string(s.id) + " (" + segment_role_name(s.role) + ")";
}

// Instances of one element can differ only by $queue; show what differs from lane 0.
std::string lane_specific_args(const LaneGraph &lg, const Node &n, const std::map<int, const Node *> &first) {
  const Node *f = first.at(n.element);
  if (f == &n) return {};
  std::vector<ResolvedArg> diff;
  for (size_t i = 0; i < n.args.size() && i < f->args.size(); ++i)
    if (n.args[i].value.to_string() != f->args[i].value.to_string()) diff.push_back(n.args[i]);
  return diff.empty() ? std::string() : " (" + format_args(diff, false) + ")";
}

std::string segment_short(const LaneGraph &lg, int id, const char *note = "") {
  const Segment &s = lg.segments[size_t(id)];
  return "segment " + std::to_string(id) + " (" +
         (s.lane < 0 ? std::string("shared") : "lane " + std::to_string(s.lane) + " " + segment_role_name(s.role)) +
         note + ")";
}

// Usable cpus of a node that no segment runs on.
std::vector<int> free_cpus(const Placement &p, int node) {
  std::vector<int> out;
  for (int c : p.usable_cpus)
    if (p.topology.cpu(c)->node == node && p.segments_on(c).empty()) out.push_back(c);
  return out;
}

// What memory a node holds: the packet pools of the sources whose lanes run
// there, the lanes' rings and flow state, the shared elements' state.
std::string node_memory(const LaneGraph &lg, const Placement &p, int node) {
  std::set<std::string> pools;
  std::vector<int> lanes;
  for (const LanePlacement &l : p.lanes)
    if (l.node == node) {
      lanes.push_back(l.lane);
      pools.insert("'" + lg.graph->elements[size_t(lg.lanes[size_t(l.lane)].source)].name + "'");
    }
  std::string out;
  if (!lanes.empty()) {
    std::string names;
    for (const std::string &n : pools) names += (names.empty() ? "" : ", ") + n;
    out = "packet pool of " + names + "; rings and flow tables of lane" + (lanes.size() == 1 ? " " : "s ") +
          format_cpu_list(lanes);
  }
  bool shared = false;
  for (const SegmentPlacement &s : p.segments) shared |= s.lane < 0 && s.node == node;
  if (shared) out += (out.empty() ? "" : "; ") + std::string("the shared elements' state and input rings");
  return out;
}

void print_placement_text(std::ostream &os, const LaneGraph &lg, const Placement &p) {
  os << "\nplacement on host " << p.host << ": " << p.topology.node_count << " NUMA node"
     << (p.topology.node_count == 1 ? "" : "s") << ", " << p.topology.cpus.size() << " cpus, usable "
     << format_cpu_list(p.usable_cpus) << (p.reserved_cpus.empty() ? "" : ", reserved " + format_cpu_list(p.reserved_cpus))
     << "\n";
  for (int node = 0; node < p.topology.node_count; ++node) {
    os << "  node " << node << " (cpus " << format_cpu_list(p.topology.node_cpus(node)) << ")\n";
    for (int c : p.topology.node_cpus(node)) {
      std::vector<std::string> here;  // pinned there, then those free to run there too
      for (int s : p.segments_on(c))
        if (p.segments[size_t(s)].floats_over.empty()) here.push_back(segment_short(lg, s));
      for (const SegmentPlacement &sp : p.segments)
        if (std::find(sp.floats_over.begin(), sp.floats_over.end(), c) != sp.floats_over.end())
          here.push_back(segment_short(lg, sp.segment, ", not pinned"));
      if (here.empty()) continue;
      os << "    cpu " << c << ":";
      for (size_t k = 0; k < here.size(); ++k) os << (k ? ", " : " ") << here[k];
      os << "\n";
    }
    if (std::vector<int> idle = free_cpus(p, node); !idle.empty())
      os << "    free: " << format_cpu_list(idle) << "\n";
    if (std::string mem = node_memory(lg, p, node); !mem.empty()) os << "    memory: " << mem << "\n";
  }
  for (const std::string &n : p.notes) os << "  note: " << n << "\n";
}


std::string json_ints(const std::vector<int> &v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + std::to_string(v[i]);
  return o + "]";
}

}  // namespace

void print_plan_text(std::ostream &os, const std::string &config_name, const LaneGraph &lg,
                     const Placement *placement) {
  const ElementGraph &g = *lg.graph;
  os << "plan for " << config_name << ": " << g.elements.size() << " elements, " << lg.lanes.size() << " lane"
     << (lg.lanes.size() == 1 ? "" : "s") << ", " << lg.segments.size() << " segment"
     << (lg.segments.size() == 1 ? "" : "s") << ", " << lg.nodes.size() << " instances\n";

  std::map<int, const Node *> first;  // element -> its first instance
  for (const Node &n : lg.nodes) first.emplace(n.element, &n);

  os << "\nelements\n";
  size_t w = 4;
  for (const Element &e : g.elements) w = std::max(w, e.name.size());
  for (size_t i = 0; i < g.elements.size(); ++i) {
    const Element &e = g.elements[i];
    os << "  " << std::left << std::setw(static_cast<int>(w)) << e.name << "  " << std::setw(22)
       << ((e.shared ? "shared " : "") + e.spec->name);
    auto it = first.find(static_cast<int>(i));
    if (it != first.end()) os << "  " << format_args(it->second->args, true);
    os << "\n";
  }

  os << "\nconnections\n";
  for (const Connection &c : g.connections) {
    const Element &a = g.elements[c.from], &b = g.elements[c.to];
    os << "  " << a.name << "[" << port_text(*a.spec, c.from_port, true) << "] -> [" << port_text(*b.spec, c.to_port, false)
       << "]" << b.name << "  (" << stream_type_name(a.spec->output_port(c.from_port)->type) << ")\n";
  }

  auto print_segment = [&](const Segment &s) {
    os << "    " << segment_title(lg, s) << ": ";
    for (size_t k = 0; k < s.nodes.size(); ++k) {
      const Node &n = lg.nodes[s.nodes[k]];
      os << (k ? ", " : "") << n.name << lane_specific_args(lg, n, first);
    }
    if (placement) {
      const SegmentPlacement &sp = placement->segments[size_t(s.id)];
      os << "\n      " << segment_cpus_text(sp) << " (node " << sp.node << "): " << sp.reason;
    }
    if (!s.feeds.empty()) {
      os << "\n      feeds";
      for (int f : s.feeds) {
        // name what the boundary is: a Ring, or a merge into shared elements
        std::string via;
        for (const Edge &e : lg.edges)
          if (e.crosses_segments && lg.nodes[e.from].segment == s.id && lg.nodes[e.to].segment == f) {
            const Node &from = lg.nodes[e.from];
            via = g.elements[from.element].spec->is_thread_boundary() ? "through " + from.name
                                                                     : "merge into " + lg.nodes[e.to].name;
            break;
          }
        os << " segment " << f << " (" << via << ")";
      }
    }
    os << "\n";
  };

  os << "\nlanes\n";
  for (const Lane &lane : lg.lanes) {
    os << "  lane " << lane.id << ": " << g.elements[lane.source].name << " queue " << lane.queue << "\n";
    if (placement) {
      const LanePlacement &lp = placement->lanes[size_t(lane.id)];
      os << "    node " << lp.node << ": " << lp.reason << "\n";
    }
    if (lane.rings_folded) os << "    " << kRingsFolded << "\n";
    for (int s : lane.segments) print_segment(lg.segments[s]);
  }
  bool any_shared = false;
  for (const Segment &s : lg.segments)
    if (s.lane < 0) {
      if (!any_shared) os << "\nshared (one instance, fed by every lane)\n";
      any_shared = true;
      print_segment(s);
    }
  if (placement) print_placement_text(os, lg, *placement);
}

void print_plan_dot(std::ostream &os, const std::string &config_name, const LaneGraph &lg, const Placement *placement) {
  const ElementGraph &g = *lg.graph;
  auto q = [](const std::string &s) {
    std::string out = "\"";
    for (char c : s) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return out + "\"";
  };
  // Lanes told apart by colour; shared segments stay white.
  static const char *lane_colors[] = {"#dbe9f6", "#fde0c5", "#d9f0d3", "#f2d7ee", "#fff5b1", "#d6f5f5", "#eadcf8", "#f6d8d8"};
  os << "digraph sluice {\n  label="
     << q("sluice plan " + config_name + (placement ? " on host " + placement->host : "")) << ";\n  labelloc=t;\n"
     << "  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
     << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  auto segment_cluster = [&](const Segment &s, const std::string &indent) {
    os << indent << "subgraph cluster_segment_" << s.id << " {\n" << indent << "  label="
       << q((s.lane < 0 ? std::string("shared") : "lane " + std::to_string(s.lane)) + ": " + segment_title(lg, s))
       << ";\n" << indent << "  style=\"rounded,filled\";\n" << indent << "  fillcolor="
       << q(s.lane < 0 ? "white" : lane_colors[size_t(s.lane) % std::size(lane_colors)]) << ";\n";
    for (int n : s.nodes) {
      const Node &node = lg.nodes[n];
      os << indent << "  n" << n << " [label=" << q(node.name + "\n" + g.elements[node.element].spec->name)
         << ", style=filled, fillcolor=white];\n";
    }
    os << indent << "}\n";
  };
  if (!placement) {
    for (const Segment &s : lg.segments) segment_cluster(s, "  ");
  } else {
    // NUMA nodes hold their cpus, cpus hold the segments placed on them.
    const Placement &p = *placement;
    for (int node = 0; node < p.topology.node_count; ++node) {
      std::string label = "node " + std::to_string(node) + ": cpus " + format_cpu_list(p.topology.node_cpus(node));
      if (std::vector<int> idle = free_cpus(p, node); !idle.empty()) label += "\nfree: " + format_cpu_list(idle);
      std::vector<int> reserved;
      for (int c : p.reserved_cpus)
        if (p.topology.cpu(c)->node == node) reserved.push_back(c);
      if (!reserved.empty()) label += "\nreserved: " + format_cpu_list(reserved);
      os << "  subgraph cluster_node_" << node << " {\n    label=" << q(label)
         << ";\n    style=filled;\n    fillcolor=\"#f2f2f2\";\n";
      bool any = false;
      for (int c : p.topology.node_cpus(node)) {
        std::vector<int> segs = p.segments_on(c);
        if (segs.empty()) continue;
        any = true;
        std::vector<int> sib = p.topology.siblings(c);
        std::string title = "cpu " + std::to_string(c) + (sib.empty() ? "" : " (SMT sibling " + format_cpu_list(sib) + ")");
        os << "    subgraph cluster_cpu_" << c << " {\n      label=" << q(title)
           << ";\n      style=filled;\n      fillcolor=\"#ffffff\";\n";
        for (int sid : segs) segment_cluster(lg.segments[size_t(sid)], "      ");
        os << "    }\n";
      }
      // an empty cluster is not drawn: keep idle nodes visible
      if (!any) os << "    idle_node_" << node << " [label=\"no segment\", shape=plaintext];\n";
      os << "  }\n";
    }
  }
  for (const Edge &e : lg.edges) {
    const Node &from = lg.nodes[e.from];
    const PortSpec *p = g.elements[from.element].spec->output_port(e.from_port);
    // label only the edges that leave or enter a port other than 0
    std::vector<std::string> attrs;
    if (e.from_port || e.to_port)
      attrs.push_back("label=" + q(port_text(*g.elements[from.element].spec, e.from_port, true) + " -> " +
                                   std::to_string(e.to_port)));
    if (e.crosses_segments) attrs.push_back("style=dashed");
    if (p && p->type == StreamType::Flows) attrs.push_back("color=blue");
    os << "  n" << e.from << " -> n" << e.to;
    for (size_t i = 0; i < attrs.size(); ++i) os << (i ? ", " : " [") << attrs[i];
    os << (attrs.empty() ? ";\n" : "];\n");
  }
  os << "}\n";
}

void print_plan_json(std::ostream &os, const std::string &config_name, const LaneGraph &lg, const Placement &p) {
  const ElementGraph &g = *lg.graph;
  os << "{\n  \"config\": " << json_string(config_name) << ",\n  \"host\": " << json_string(p.host)
     << ",\n  \"this_machine\": " << (p.this_machine ? "true" : "false") << ",\n  \"nodes\": [";
  for (int node = 0; node < p.topology.node_count; ++node) {
    std::vector<int> usable, reserved;
    for (int c : p.usable_cpus)
      if (p.topology.cpu(c)->node == node) usable.push_back(c);
    for (int c : p.reserved_cpus)
      if (p.topology.cpu(c)->node == node) reserved.push_back(c);
    os << (node ? ",\n    " : "\n    ") << "{\"node\": " << node << ", \"cpus\": " << json_ints(p.topology.node_cpus(node))
       << ", \"usable\": " << json_ints(usable) << ", \"reserved\": " << json_ints(reserved) << "}";
  }
  os << "\n  ],\n  \"lanes\": [";
  for (const LanePlacement &l : p.lanes) {
    const Lane &lane = lg.lanes[size_t(l.lane)];
    os << (l.lane ? ",\n    " : "\n    ") << "{\"lane\": " << l.lane << ", \"source\": "
       << json_string(g.elements[size_t(lane.source)].name) << ", \"queue\": " << lane.queue
       << ", \"device\": " << json_string(l.device) << ", \"node\": " << l.node << ", \"reason\": " << json_string(l.reason)
       << ", \"rings_folded\": " << (lane.rings_folded ? "true" : "false") << "}";
  }
  os << "\n  ],\n  \"segments\": [";
  for (const SegmentPlacement &sp : p.segments) {
    const Segment &s = lg.segments[size_t(sp.segment)];
    os << (sp.segment ? ",\n    " : "\n    ") << "{\"segment\": " << sp.segment
       << ", \"lane\": " << (s.lane < 0 ? std::string("null") : std::to_string(s.lane)) << ", \"role\": \""
       << segment_role_name(s.role) << "\", \"elements\": [";
    for (size_t k = 0; k < s.nodes.size(); ++k) os << (k ? ", " : "") << json_string(lg.nodes[size_t(s.nodes[k])].name);
    os << "], \"node\": " << sp.node << ", \"cpu\": " << sp.cpu
       << ", \"cpus\": " << json_ints(sp.floats_over.empty() ? std::vector<int>{sp.cpu} : sp.floats_over)
       << ", \"pinned\": " << (sp.floats_over.empty() ? "true" : "false")
       << ", \"shares_cpu\": " << (sp.shares_cpu ? "true" : "false")
       << ", \"feeds\": " << json_ints(s.feeds) << ", \"reason\": " << json_string(sp.reason) << "}";
  }
  os << "\n  ],\n  \"housekeeping_cpu\": " << p.housekeeping_cpu << ",\n  \"acquisition\": ";
  if (p.acquisition.mode == AcquisitionPolicy::Mode::Periodic)
    os << "{\"mode\": \"periodic\", \"period_ns\": " << p.acquisition.period_ns << ", \"runtime_ns\": "
       << p.acquisition.runtime_ns << "}";
  else
    os << "{\"mode\": \"poll\"}";
  os << ",\n  \"notes\": [";
  for (size_t i = 0; i < p.notes.size(); ++i) os << (i ? ",\n    " : "\n    ") << json_string(p.notes[i]);
  os << "\n  ]\n}\n";
}

}  // namespace sluice
