#include "engine/core/graph.hh"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sluice {

const char *segment_role_name(Segment::Role r) {
  switch (r) {
    case Segment::Role::Acquisition: return "acquisition";
    case Segment::Role::Processing: return "processing";
    case Segment::Role::Shared: return "shared";
  }
  return "?";
}

int ElementGraph::find(std::string_view name) const {
  for (size_t i = 0; i < elements.size(); ++i)
    if (elements[i].name == name) return static_cast<int>(i);
  return -1;
}

const ResolvedArg *Node::arg(std::string_view n) const {
  for (const auto &a : args)
    if (a.spec && a.spec->name == n) return &a;
  return nullptr;
}

int untimed_source(const ElementGraph &g, int to, const std::function<bool(int element)> &gives_time) {
  std::vector<std::vector<int>> from(g.elements.size());
  for (const Connection &c : g.connections) from[c.to].push_back(c.from);
  // breadth first, upstream, not past an element that gives a time
  std::vector<bool> seen(g.elements.size());
  std::vector<int> queue{to};
  seen[to] = true;
  for (size_t i = 0; i < queue.size(); ++i) {
    int e = queue[i];
    if (e != to && gives_time(e)) continue;
    if (g.elements[e].spec->is_source()) return e;
    for (int f : from[e])
      if (!seen[f]) seen[f] = true, queue.push_back(f);
  }
  return -1;
}

std::vector<double> upstream_sampling(const ElementGraph &g, int to,
                                      const std::function<double(int element, int port)> &passes) {
  std::vector<std::vector<const Connection *>> from(g.elements.size());
  for (const Connection &c : g.connections) from[c.to].push_back(&c);
  // The shares reaching each element, computed once (the graph is acyclic).
  std::vector<std::vector<double>> memo(g.elements.size());
  std::vector<bool> done(g.elements.size());
  std::function<const std::vector<double> &(int)> shares = [&](int e) -> const std::vector<double> & {
    if (done[e]) return memo[e];
    done[e] = true;  // (a cycle, reported elsewhere, ends here)
    std::vector<double> out;
    for (const Connection *c : from[e]) {
      double p = passes(c->from, c->from_port);
      for (double s : shares(c->from)) out.push_back(s * p);
    }
    if (from[e].empty()) out.push_back(1.0);
    std::sort(out.begin(), out.end());
    // the same share reached by two paths is one share
    out.erase(std::unique(out.begin(), out.end(), [](double a, double b) { return std::fabs(a - b) <= 1e-12 * b; }),
              out.end());
    memo[e] = std::move(out);
    return memo[e];
  };
  return shares(to);
}

}  // namespace sluice
