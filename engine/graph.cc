#include "engine/graph.hh"

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

}  // namespace sluice
