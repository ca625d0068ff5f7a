// The graph IR. The front end produces an ElementGraph: compounds expanded,
// classes and arguments resolved, ports checked. Lane replication and
// segmentation (engine/driver/lanes) turn it into a LaneGraph: one instance of each
// element per lane, shared elements once, split into segments at thread
// boundaries. Later passes (placement, JIT) work on the LaneGraph.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/core/literal.hh"
#include "engine/core/element_spec.hh"

namespace sluice {

// An argument as bound at expansion: the literal after variable substitution
// (only $queue may remain, bound per lane) and, for element references, the
// element it names.
struct BoundArg {
  const ArgSpec *spec = nullptr;
  ast::Literal literal;
  bool from_default = false;
  int element_ref = -1;  // Element arguments: index into ElementGraph::elements
};

struct Element {
  std::string name;  // fully qualified: "src", "Meter@1/ft", "Meter@1/GCSlicer@1"
  const ElementSpec *spec = nullptr;
  bool shared = false;
  SourceRange range;  // where it was declared or written
  std::vector<SourceRange> context;  // compound instantiations it came from, outermost first
  std::vector<BoundArg> args;  // in the spec's order; defaults filled in
};

struct Connection {
  int from = -1, from_port = 0;
  int to = -1, to_port = 0;
  SourceRange range;  // the '->' that made it
};

struct ElementGraph {
  std::vector<Element> elements;
  std::vector<Connection> connections;
  int find(std::string_view name) const;
};

// ---- after lane replication ----

struct ResolvedArg {
  const ArgSpec *spec = nullptr;
  Value value;
  bool from_default = false;
  SourceRange range;
};

struct Node {
  int element = -1;  // index into ElementGraph::elements
  const ElementSpec *spec = nullptr;  // that element's class
  int lane = -1;     // -1: a shared element (one instance fed by all lanes)
  int segment = -1;
  std::string name;  // "Meter@1/ft#0" (lane 0), "exp" (shared)
  std::vector<ResolvedArg> args;  // in the spec's order
  const ResolvedArg *arg(std::string_view name) const;
};

struct Edge {
  int from = -1, from_port = 0;
  int to = -1, to_port = 0;
  bool crosses_segments = false;  // through a Ring, or a merge into a shared element
};

struct Segment {
  enum class Role { Acquisition, Processing, Shared };
  int id = -1;
  int lane = -1;  // -1: the shared segment fed by all lanes
  Role role = Role::Processing;
  std::vector<int> nodes;  // in topological order
  std::vector<int> feeds;  // segments this one hands packets or flows to
};
const char *segment_role_name(Segment::Role r);

struct Lane {
  int id = -1;
  int source = -1;  // element index of the source that starts it
  int queue = 0;    // the queue of that source ($queue)
  std::vector<int> segments;
  bool rings_folded = false;  // its Rings run inside its segments (build_lanes' fold_rings)
};

struct LaneGraph {
  const ElementGraph *graph = nullptr;
  std::vector<Node> nodes;
  std::vector<Edge> edges;
  std::vector<Lane> lanes;
  std::vector<Segment> segments;  // lanes' segments first, then shared ones
};

// A source whose packets reach element `to` without passing an element that
// gives them a time (gives_time(e): a Timestamp, a source of capture times);
// -1 when there is none. The check uses what the arguments tell; the
// runtime, what the opened sources say.
int untimed_source(const ElementGraph &g, int to, const std::function<bool(int element)> &gives_time);

// The share of the packets that reach element `to` on each path from a
// source: the product of `passes(element, output port)` along it (a Sample
// keeps `rate` on its first output, 1 - rate on its second; everything else
// passes 1). Flows count as the packets they were metered from: a FlowTable's
// records carry the share of the packets that reached the table. The
// distinct shares, ascending; {1} when nothing on the way samples.
std::vector<double> upstream_sampling(const ElementGraph &g, int to,
                                      const std::function<double(int element, int port)> &passes);

}  // namespace sluice
