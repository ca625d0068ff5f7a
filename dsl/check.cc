#include "dsl/check.hh"

#include <functional>
#include <map>

namespace sluice {

namespace {

std::vector<Diagnostic> context_notes(const Element &e) {
  std::vector<Diagnostic> notes;
  for (auto it = e.context.rbegin(); it != e.context.rend(); ++it)
    notes.push_back(Diagnostic{Severity::Note, *it, "in instantiation here", {}, {}});
  return notes;
}

std::string port_label(const PortSpec &p, int index, bool output) {
  return std::string(output ? "output " : "input ") + std::to_string(index) + " ('" + p.name + "')";
}

void check_ports(const ElementGraph &g, Diagnostics &diags, const std::set<int> &incomplete, bool report_unconnected) {
  // connection indices per (element, port), for each direction
  std::vector<std::map<int, std::vector<int>>> outs(g.elements.size()), ins(g.elements.size());
  for (size_t i = 0; i < g.connections.size(); ++i) {
    const Connection &c = g.connections[i];
    outs[c.from][c.from_port].push_back(static_cast<int>(i));
    ins[c.to][c.to_port].push_back(static_cast<int>(i));
  }
  for (size_t ei = 0; ei < g.elements.size(); ++ei) {
    const Element &e = g.elements[ei];
    auto check_side = [&](const std::vector<PortSpec> &ports, std::map<int, std::vector<int>> &used, bool output) {
      for (size_t p = 0; p < ports.size(); ++p) {
        const PortSpec &ps = ports[p];
        if (report_unconnected && !incomplete.count(static_cast<int>(ei)) && ps.required && !used.count(static_cast<int>(p))) {
          std::string hint = output ? (ps.type == StreamType::Packets ? "connect it, e.g. `-> Discard`" : "connect it to an exporter or FlowLog")
                                    : "connect something to it";
          auto &d = diags.error(e.range, port_label(ps, static_cast<int>(p), output) + " of '" + e.name + "' (" +
                                             e.spec->name + ") is not connected", hint);
          d.notes = context_notes(e);
        }
      }
      for (auto &[port, conns] : used) {
        const PortSpec *ps = output ? e.spec->output_port(port) : e.spec->input_port(port);
        if (!ps || ps->multi || conns.size() < 2) continue;
        auto &d = diags.error(g.connections[conns[1]].range,
                              port_label(*ps, port, output) + " of '" + e.name + "' (" + e.spec->name + ") is connected " +
                                  std::to_string(conns.size()) + " times, but takes one connection",
                              output ? (ps->type == StreamType::Packets ? "use a Tee to send packets to several elements" : "")
                                     : "");
        d.notes.push_back(Diagnostic{Severity::Note, g.connections[conns[0]].range, "first connected here", {}, {}});
      }
    };
    check_side(e.spec->inputs, ins[ei], false);
    check_side(e.spec->outputs, outs[ei], true);
  }
}

void check_cycles(const ElementGraph &g, Diagnostics &diags) {
  std::vector<std::vector<int>> adj(g.elements.size());  // connection indices out of each element
  for (size_t i = 0; i < g.connections.size(); ++i) adj[g.connections[i].from].push_back(static_cast<int>(i));
  enum { White, Grey, Black };
  std::vector<int> color(g.elements.size(), White);
  std::vector<int> path;  // connection indices on the DFS stack
  std::function<void(int)> dfs = [&](int v) {
    color[v] = Grey;
    for (int ci : adj[v]) {
      int w = g.connections[ci].to;
      if (color[w] == Grey) {
        // the cycle runs from w along the DFS path to v, then back to w
        size_t k = 0;
        for (size_t j = 0; j < path.size(); ++j)
          if (g.connections[path[j]].to == w) k = j + 1;
        std::string text = g.elements[w].name;
        for (size_t j = k; j < path.size(); ++j) text += " -> " + g.elements[g.connections[path[j]].to].name;
        text += " -> " + g.elements[w].name;
        diags.error(g.connections[ci].range, "this connection closes a cycle: " + text,
                    "packets must flow one way; a pipeline is a directed acyclic graph");
      } else if (color[w] == White) {
        path.push_back(ci);
        dfs(w);
        path.pop_back();
      }
    }
    color[v] = Black;
  };
  for (size_t v = 0; v < g.elements.size(); ++v)
    if (color[v] == White) dfs(static_cast<int>(v));
}

}  // namespace

void check_graph(const ElementGraph &g, Diagnostics &diags, const std::set<int> &incomplete, bool syntax_ok) {
  check_ports(g, diags, incomplete, syntax_ok);
  check_cycles(g, diags);
}

}  // namespace sluice
