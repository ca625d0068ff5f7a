// Whole-graph checks after expansion, and helpers for lane-bound values.
#pragma once
#include <functional>
#include <set>

#include "dsl/ast.hh"
#include "engine/base/diagnostics.hh"
#include "engine/core/graph.hh"

namespace sluice {

// Required ports left unconnected, ports connected more often than they
// allow, cycles, and elements that meter packets by their time (kNeedsTime)
// fed by a source without one. Elements in `incomplete` lost a connection to
// an error already reported: their unconnected ports are not reported again.
// After a syntax error (statements dropped) no unconnected port is reported.
void check_graph(const ElementGraph &g, Diagnostics &diags, const std::set<int> &incomplete, bool syntax_ok);

// `$queue` (and "${queue}" inside strings) replaced by the lane's queue number.
ast::Literal bind_queue(const ast::Literal &lit, int queue);
bool uses_queue(const ast::Literal &lit);

}  // namespace sluice
