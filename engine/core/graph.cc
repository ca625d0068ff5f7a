#include "engine/core/graph.hh"

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

}  // namespace sluice
