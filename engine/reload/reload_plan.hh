// The plan of a hot reload: what happens to each element of the running
// graph when a new graph replaces it. Elements are matched by name and class:
//
//   keep         same arguments: the instance and its state stay as they are
//   reconfigure  only arguments marked live() changed (e.g. a flow table's
//                timeouts, a filter's expression): same instance, state kept
//   migrate      other arguments changed (a table's capacity or key) or the
//                element became shared or not: a new instance, and the old
//                one's state (flows) moves into it
//   remove       not in the new graph: a flow table exports its flows with
//                reason "forced end"
//   add          new in the new graph
//
// Sources stay: a running probe keeps its devices and lanes, so a new graph
// that changes a source or the number of lanes is refused, with the
// location of the change. A pure function of the two graphs: `sluice ctl
// reload --dry-run` prints it, the runtime carries it out.
#pragma once
#include <string>
#include <vector>

#include "engine/base/diagnostics.hh"
#include "engine/core/graph.hh"

namespace sluice {

enum class ReloadAction { Keep, Reconfigure, Migrate, Remove, Add };
const char *reload_action_name(ReloadAction a);

struct ReloadStep {
  ReloadAction action = ReloadAction::Keep;
  std::string element;     // fully qualified name
  std::string class_name;
  int old_element = -1;    // index in the running ElementGraph (-1: added)
  int new_element = -1;    // index in the new ElementGraph (-1: removed)
  std::string reason;      // one line: what changed and what it means
};

struct ReloadPlan {
  std::vector<ReloadStep> steps;      // the running graph's order, then the added elements
  std::vector<std::string> connected;     // connections only the new graph has ("a[0] -> [0]b")
  std::vector<std::string> disconnected;  // connections only the running graph has

  unsigned count(ReloadAction a) const;
  bool changes_nothing() const;
  const ReloadStep *find(const std::string &element) const;
  // The plan as `sluice ctl reload --dry-run` prints it.
  std::string text() const;
};

// Compares the running graph with the new one. A change a running probe
// cannot make (sources, lanes) is an error in `diags`, at its place in the
// new file; returns false then.
bool plan_reload(const LaneGraph &running, const LaneGraph &next, Diagnostics &diags, ReloadPlan &out);

}  // namespace sluice
