#include "dsl/check.hh"

#include <cstdio>
#include <map>

#include "dsl/literals.hh"

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

// Depth-first search with an explicit stack: a configuration may chain
// thousands of elements, more than the call stack should hold.
void check_cycles(const ElementGraph &g, Diagnostics &diags) {
  std::vector<std::vector<int>> adj(g.elements.size());  // connection indices out of each element
  for (size_t i = 0; i < g.connections.size(); ++i) adj[g.connections[i].from].push_back(static_cast<int>(i));
  enum { White, Grey, Black };
  std::vector<int> color(g.elements.size(), White);
  struct Frame {
    int element;
    size_t next;  // next outgoing connection to follow
    int via;      // connection that led here, -1 for a root
  };
  std::vector<Frame> stack;
  for (size_t root = 0; root < g.elements.size(); ++root) {
    if (color[root] != White) continue;
    stack.push_back({static_cast<int>(root), 0, -1});
    color[root] = Grey;
    while (!stack.empty()) {
      Frame &f = stack.back();
      if (f.next == adj[f.element].size()) {
        color[f.element] = Black;
        stack.pop_back();
        continue;
      }
      int ci = adj[f.element][f.next++];
      int w = g.connections[ci].to;
      if (color[w] == White) {
        color[w] = Grey;
        stack.push_back({w, 0, ci});
      } else if (color[w] == Grey) {
        // the cycle runs from w along the stack to here, then back to w
        size_t k = stack.size() - 1;
        while (stack[k].element != w) --k;
        std::vector<const std::string *> names;
        for (size_t j = k; j < stack.size(); ++j) names.push_back(&g.elements[stack[j].element].name);
        names.push_back(&g.elements[w].name);
        std::string text;
        for (size_t j = 0; j < names.size(); ++j) {
          if (names.size() > 10 && j == 4) {  // a long cycle: its ends say enough
            text += " -> ... (" + std::to_string(names.size() - 8) + " more)";
            j = names.size() - 4;
          }
          text += (j ? " -> " : "") + *names[j];
        }
        diags.error(g.connections[ci].range, "this connection closes a cycle: " + text,
                    "packets must flow one way; a pipeline is a directed acyclic graph");
      }
    }
  }
}

// A FlowTable fed by a live source without a Timestamp would meter every
// packet at time 0: flows dated 1970 that never expire.
void check_packet_time(const ElementGraph &g, Diagnostics &diags) {
  auto gives_time = [&](int e) { return g.elements[e].spec->gives_time(g.elements[e]); };
  for (size_t i = 0; i < g.elements.size(); ++i) {
    const Element &e = g.elements[i];
    if (!(e.spec->flags & kNeedsTime)) continue;
    int s = untimed_source(g, static_cast<int>(i), gives_time);
    if (s < 0) continue;
    const Element &src = g.elements[s];
    auto &d = diags.error(e.range,
                          "'" + e.name + "' (" + e.spec->name + ") meters packets by their time, but packets from '" +
                              src.name + "' (" + src.spec->name +
                              ") reach it without one: that source gives no capture times (live input) and no "
                              "Timestamp is on the way",
                          "put a Timestamp right after the source: `" + src.name + " -> Timestamp -> ...`");
    d.notes = context_notes(e);
    d.notes.push_back(Diagnostic{Severity::Note, src.range, "the packets come from here", {}, {}});
  }
}

// An exporter tells its collector one sampling interval (options records,
// engine/export/options_records.hh): the flows reaching it must all come
// from packets sampled alike.
void check_sampling(const ElementGraph &g, Diagnostics &diags) {
  auto passes = [&](int e, int port) {
    const Element &el = g.elements[e];
    if (!(el.spec->flags & kSamples)) return 1.0;
    for (const BoundArg &a : el.args) {
      Value v;
      LiteralProblem problem;
      if (a.spec && a.spec->name == "rate" && convert_literal(a.literal, *a.spec, v, problem))
        return port == 0 ? v.real : 1.0 - v.real;
    }
    return 1.0;  // an unconvertible rate is reported where it is written
  };
  for (size_t i = 0; i < g.elements.size(); ++i) {
    const Element &e = g.elements[i];
    if (!(e.spec->flags & kExportsSampling)) continue;
    std::vector<double> shares = upstream_sampling(g, static_cast<int>(i), passes);
    if (shares.size() < 2) continue;
    std::string list;
    for (double s : shares) {
      char buf[32];
      snprintf(buf, sizeof buf, "%.6g", s);
      list += (list.empty() ? "" : ", ") + std::string(buf);
    }
    auto &d = diags.error(e.range,
                          "'" + e.name + "' (" + e.spec->name + ") receives flows of packets sampled at different "
                              "rates (" + list + "), but tells its collector one sampling interval",
                          "sample every path to it alike (a Sample before the FlowTables, or none), or give each "
                          "rate its own exporter");
    d.notes = context_notes(e);
  }
}

}  // namespace

void check_graph(const ElementGraph &g, Diagnostics &diags, const std::set<int> &incomplete, bool syntax_ok) {
  check_ports(g, diags, incomplete, syntax_ok);
  check_cycles(g, diags);
  check_packet_time(g, diags);
  check_sampling(g, diags);
}

}  // namespace sluice
