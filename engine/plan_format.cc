#include "engine/plan_format.hh"

#include <iomanip>
#include <map>

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

}  // namespace

void print_plan_text(std::ostream &os, const std::string &config_name, const LaneGraph &lg) {
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
    for (int s : lane.segments) print_segment(lg.segments[s]);
  }
  bool any_shared = false;
  for (const Segment &s : lg.segments)
    if (s.lane < 0) {
      if (!any_shared) os << "\nshared (one instance, fed by every lane)\n";
      any_shared = true;
      print_segment(s);
    }
}

void print_plan_dot(std::ostream &os, const std::string &config_name, const LaneGraph &lg) {
  const ElementGraph &g = *lg.graph;
  auto q = [](const std::string &s) {
    std::string out = "\"";
    for (char c : s) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return out + "\"";
  };
  os << "digraph sluice {\n  label=" << q("sluice plan " + config_name) << ";\n  labelloc=t;\n"
     << "  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
     << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  for (const Segment &s : lg.segments) {
    os << "  subgraph cluster_segment_" << s.id << " {\n    label=" << q(
        (s.lane < 0 ? std::string("shared") : "lane " + std::to_string(s.lane)) + ": " + segment_title(lg, s))
       << ";\n    style=rounded;\n";
    for (int n : s.nodes) {
      const Node &node = lg.nodes[n];
      os << "    n" << n << " [label=" << q(node.name + "\n" + g.elements[node.element].spec->name) << "];\n";
    }
    os << "  }\n";
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

}  // namespace sluice
