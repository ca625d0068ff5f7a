// Compiler passes after the front end: lane replication (one copy of the
// graph per source queue, shared elements once, $queue bound) and
// segmentation (a lane splits into segments at Rings and at merges into
// shared elements; each segment becomes one thread's loop).
#pragma once
#include <set>

#include "engine/base/diagnostics.hh"
#include "engine/core/graph.hh"

namespace sluice {

// Builds `out` from a checked graph. Problems (an element fed by two sources
// that is not shared, $queue outside a lane, ...) go to `diags`; returns false
// when there were errors. The lanes of `fold_rings` keep their Rings inside
// one segment: each passes its batches on in the lane's thread
// (place_pipe in compile_pipe.hh says when).
bool build_lanes(const ElementGraph &g, Diagnostics &diags, LaneGraph &out, const std::set<int> &fold_rings = {});

}  // namespace sluice
