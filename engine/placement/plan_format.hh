// `sluice plan` output: the checked graph after expansion, its lanes and
// segments and, with a placement, the node and cpu of each and why: as text
// for people, Graphviz dot for pictures (NUMA nodes as boxes holding their
// cpus and the segments placed on them), JSON for tools.
#pragma once
#include <ostream>
#include <string>

#include "engine/core/graph.hh"
#include "engine/placement/placement.hh"

namespace sluice {

void print_plan_text(std::ostream &os, const std::string &config_name, const LaneGraph &lg,
                     const Placement *placement = nullptr);
void print_plan_dot(std::ostream &os, const std::string &config_name, const LaneGraph &lg,
                    const Placement *placement = nullptr);
// What `sluice plan` says of the Rings of a lane with Lane::rings_folded.
inline constexpr const char *kRingsFolded =
    "Rings in the lane's thread: its input waits for room (a trace, unpaced TrafficGen), so they have no burst "
    "to absorb, and the plan had one cpu for all of its segments";

// {"config", "host", "nodes": [...], "lanes": [{..., "rings_folded"}], "segments": [{"lane",
// "segment", "role", "elements", "node", "cpu", "cpus" (where its thread
// runs: [cpu], or the cpus it floats over), "pinned", "shares_cpu", "feeds",
// "reason"}], "housekeeping_cpu", "acquisition", "notes"}; a shared segment's
// lane is null.
void print_plan_json(std::ostream &os, const std::string &config_name, const LaneGraph &lg,
                     const Placement &placement);

// `clock pcap, capacity 64K` (defaults marked), for listings.
std::string format_args(const std::vector<ResolvedArg> &args, bool mark_defaults);

}  // namespace sluice
