#include "engine/driver/lanes.hh"

#include <algorithm>
#include <numeric>
#include <set>

#include "dsl/check.hh"
#include "dsl/literals.hh"

namespace sluice {

namespace {

struct Membership {
  std::set<int> sources;       // sources whose lanes reach the element without passing a shared one
  bool after_shared = false;   // fed (directly or not) by a shared element
};

class LaneBuilder {
public:
  LaneBuilder(const ElementGraph &g, Diagnostics &diags, LaneGraph &out, const std::set<int> &fold_rings)
      : g_(g), diags_(diags), out_(out), fold_rings_(fold_rings) {}

  bool run() {
    int errors = diags_.error_count();
    out_.graph = &g_;
    outgoing_.assign(g_.elements.size(), {});
    incoming_.assign(g_.elements.size(), {});
    for (size_t i = 0; i < g_.connections.size(); ++i) {
      outgoing_[g_.connections[i].from].push_back(static_cast<int>(i));
      incoming_[g_.connections[i].to].push_back(static_cast<int>(i));
    }
    order_ = topological_order();
    compute_membership();
    warn_if_no_source();
    replicate();  // also when membership failed: it reports $queue misuse
    if (diags_.error_count() != errors) return false;
    segment();
    return diags_.error_count() == errors;
  }

private:
  std::vector<int> topological_order() {
    std::vector<int> indeg(g_.elements.size(), 0), order;
    for (auto &c : g_.connections) ++indeg[c.to];
    for (size_t i = 0; i < g_.elements.size(); ++i)
      if (!indeg[i]) order.push_back(static_cast<int>(i));
    for (size_t next = 0; next < order.size(); ++next)
      for (int ci : outgoing_[order[next]])
        if (--indeg[g_.connections[ci].to] == 0) order.push_back(g_.connections[ci].to);
    return order;  // cycles were reported by the front end; their elements are left out
  }

  void warn_if_no_source() {
    for (const Element &e : g_.elements)
      if (e.spec->is_source()) return;
    SourceRange start = g_.elements.empty() ? SourceRange{} : g_.elements.front().range;
    if (start.valid()) start.begin.offset = start.end.offset = 0;
    diags_.warning(start, "the configuration has no source (RSSSource, TrafficGen): nothing will run");
  }

  void compute_membership() {
    member_.assign(g_.elements.size(), {});
    for (int v : order_) {
      const Element &e = g_.elements[v];
      if (e.spec->is_source()) {
        if (e.shared) diags_.error(e.range, "a source cannot be shared: each of its queues starts a lane");
        member_[v].sources.insert(v);
      }
      for (int ci : incoming_[v]) {
        const Connection &c = g_.connections[ci];
        const Element &from = g_.elements[c.from];
        if (from.shared || member_[c.from].after_shared) member_[v].after_shared = true;
        if (!from.shared) member_[v].sources.insert(member_[c.from].sources.begin(), member_[c.from].sources.end());
      }
      if (e.shared) continue;
      auto &m = member_[v];
      bool upstream_reported = false;  // report where lanes meet, not everything after
      for (int ci : incoming_[v])
        if (reported_.count(g_.connections[ci].from)) upstream_reported = true;
      if (upstream_reported) {
        reported_.insert(v);
        continue;
      }
      if (m.sources.size() > 1 || (!m.sources.empty() && m.after_shared)) reported_.insert(v);
      if (m.sources.size() > 1) {
        std::string names;
        for (int s : m.sources) names += (names.empty() ? "'" : ", '") + g_.elements[s].name + "'";
        diags_.error(e.range, "'" + e.name + "' is fed by the lanes of several sources (" + names + ")",
                     "declare it shared (`name :: shared " + e.spec->name + "(...)`) or give each source its own chain");
      } else if (!m.sources.empty() && m.after_shared) {
        diags_.error(e.range, "'" + e.name + "' is fed both by lanes and by a shared element",
                     "declare it shared, so that one instance takes both");
      } else if (m.sources.empty() && !m.after_shared) {
        diags_.warning(e.range, "'" + e.name + "' is not reached by any source; it will never run");
      }
    }
  }

  // Arguments typed for a lane: $queue bound. Errors depending on $queue are
  // reported at the literal (deduplicated across lanes when printed).
  std::vector<ResolvedArg> resolve_args(const Element &e, int queue, bool in_lane) {
    std::vector<ResolvedArg> out;
    for (const BoundArg &b : e.args) {
      ResolvedArg r;
      r.spec = b.spec;
      r.from_default = b.from_default;
      r.range = b.literal.range;
      bool present = b.from_default || b.literal.range.valid();
      if (present) {
        if (!in_lane && uses_queue(b.literal)) {
          diags_.error(b.literal.range, "'$queue' has no value in '" + e.name + "': it is not in a lane",
                       e.shared ? "a shared element has one instance for all lanes" : "");
          continue;
        }
        LiteralProblem p;
        if (!convert_literal(bind_queue(b.literal, queue), *b.spec, r.value, p)) {
          if (uses_queue(b.literal)) diags_.error(b.literal.range, p.message + " (in lane with $queue = " + std::to_string(queue) + ")", p.hint);
          continue;  // other conversion problems were reported by the front end
        }
        if (b.element_ref >= 0) r.value.text = g_.elements[b.element_ref].name;
      }
      out.push_back(std::move(r));
    }
    return out;
  }

  void replicate() {
    // lanes: one per queue of each source, in source order
    for (int v : order_) {
      const Element &e = g_.elements[v];
      if (!e.spec->is_source() || e.shared) continue;
      int64_t queues = 1;
      for (const BoundArg &b : e.args) {
        if (!b.spec->gives_lanes) continue;
        Value val;
        LiteralProblem p;
        if (convert_literal(bind_queue(b.literal, 0), *b.spec, val, p)) queues = val.integer;
      }
      for (int q = 0; q < queues; ++q) out_.lanes.push_back(Lane{static_cast<int>(out_.lanes.size()), v, q, {}});
    }
    node_of_.assign(g_.elements.size(), std::vector<int>(out_.lanes.size() + 1, -1));
    for (const Lane &lane : out_.lanes)
      for (int v : order_) {
        const Element &e = g_.elements[v];
        if (e.shared || !member_[v].sources.count(lane.source)) continue;
        add_node(v, lane.id, e.name + "#" + std::to_string(lane.id), resolve_args(e, lane.queue, true));
      }
    for (int v : order_) {
      const Element &e = g_.elements[v];
      if (!e.shared && !member_[v].after_shared) continue;
      add_node(v, -1, e.name, resolve_args(e, 0, false));
    }
    // edges between instances: within a lane, or from a lane into the shared part
    for (const Connection &c : g_.connections)
      for (size_t l = 0; l <= out_.lanes.size(); ++l) {
        int from = node_of_[c.from][l];
        if (from < 0) continue;
        int to = node_of_[c.to][l] >= 0 ? node_of_[c.to][l] : node_of_[c.to][out_.lanes.size()];
        if (to < 0) continue;
        out_.edges.push_back(Edge{from, c.from_port, to, c.to_port, false});
      }
  }

  void add_node(int element, int lane, std::string name, std::vector<ResolvedArg> args) {
    Node n;
    n.element = element;
    n.spec = g_.elements[element].spec;
    n.lane = lane;
    n.name = std::move(name);
    n.args = std::move(args);
    node_of_[element][lane < 0 ? out_.lanes.size() : static_cast<size_t>(lane)] = static_cast<int>(out_.nodes.size());
    out_.nodes.push_back(std::move(n));
  }

  // Segments are the connected parts of the instance graph once the edges out
  // of a Ring (but in the lanes of fold_rings_) and the merges into shared
  // elements are cut.
  void segment() {
    for (Lane &l : out_.lanes) l.rings_folded = fold_rings_.count(l.id) > 0;
    std::vector<int> parent(out_.nodes.size());
    std::iota(parent.begin(), parent.end(), 0);
    auto find = [&](int x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    for (Edge &e : out_.edges) {
      const Node &from = out_.nodes[e.from], &to = out_.nodes[e.to];
      bool ring = g_.elements[from.element].spec->is_thread_boundary() && !fold_rings_.count(from.lane);
      e.crosses_segments = ring || from.lane != to.lane;
      if (!e.crosses_segments) parent[find(e.from)] = find(e.to);
    }
    // number segments lane by lane, in topological order of their first node
    std::vector<int> seg_of_root(out_.nodes.size(), -1);
    auto ordered = nodes_in_order();
    for (int n : ordered) {
      int root = find(n);
      if (seg_of_root[root] < 0) {
        Segment s;
        s.id = static_cast<int>(out_.segments.size());
        s.lane = out_.nodes[n].lane;
        seg_of_root[root] = s.id;
        out_.segments.push_back(s);
      }
      Segment &s = out_.segments[seg_of_root[root]];
      s.nodes.push_back(n);
      out_.nodes[n].segment = s.id;
      if (g_.elements[out_.nodes[n].element].spec->is_source()) s.role = Segment::Role::Acquisition;
    }
    for (Segment &s : out_.segments) {
      if (s.lane < 0) s.role = Segment::Role::Shared;
      else out_.lanes[s.lane].segments.push_back(s.id);
    }
    for (const Edge &e : out_.edges) {
      if (!e.crosses_segments) continue;
      auto &feeds = out_.segments[out_.nodes[e.from].segment].feeds;
      int to = out_.nodes[e.to].segment;
      if (std::find(feeds.begin(), feeds.end(), to) == feeds.end()) feeds.push_back(to);
    }
  }

  // Lanes first (lane by lane), then the shared part; topological within each.
  std::vector<int> nodes_in_order() {
    std::vector<int> rank(g_.elements.size());
    for (size_t i = 0; i < order_.size(); ++i) rank[order_[i]] = static_cast<int>(i);
    std::vector<int> ns(out_.nodes.size());
    std::iota(ns.begin(), ns.end(), 0);
    size_t shared_lane = out_.lanes.size();
    std::stable_sort(ns.begin(), ns.end(), [&](int a, int b) {
      const Node &x = out_.nodes[a], &y = out_.nodes[b];
      size_t lx = x.lane < 0 ? shared_lane : x.lane, ly = y.lane < 0 ? shared_lane : y.lane;
      if (lx != ly) return lx < ly;
      return rank[x.element] < rank[y.element];
    });
    return ns;
  }

  const ElementGraph &g_;
  Diagnostics &diags_;
  LaneGraph &out_;
  std::vector<int> order_;
  std::vector<std::vector<int>> outgoing_, incoming_;  // connection indices per element
  std::vector<Membership> member_;
  std::set<int> reported_;  // elements with a membership error
  std::vector<std::vector<int>> node_of_;  // [element][lane, or lanes.size() for shared] -> node
  const std::set<int> &fold_rings_;
};

}  // namespace

bool build_lanes(const ElementGraph &g, Diagnostics &diags, LaneGraph &out, const std::set<int> &fold_rings) {
  return LaneBuilder(g, diags, out, fold_rings).run();
}

}  // namespace sluice
