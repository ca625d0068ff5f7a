// Placement: where every segment of every lane runs and where its memory
// lives, decided from a lane graph and a host profile, with one line of
// reason per decision. Pure: nothing here touches DPDK or the threads; the
// runtime applies the result, `sluice plan` prints it.
//
// The rules (DESIGN.md §5, docs/placement.md): a lane stays on the NUMA node
// of its device (cpus and memory); acquisition segments get dedicated cpus;
// a lane's processing segment goes on the SMT sibling of its acquisition cpu,
// or another cpu of the node; shared elements are packed onto one
// housekeeping cpu; reserved cpus are never used and cpu 0 only when nothing
// else is left. When a node cannot hold its lanes, placement fails with what
// is missing and what could change, unless the profile allows segments to
// share cpus (oversubscribe).
#pragma once
#include <string>
#include <vector>

#include "engine/core/graph.hh"
#include "engine/placement/host_profile.hh"

namespace sluice {

struct LanePlacement {
  int lane = -1;
  int node = 0;        // cpus and memory (packet pool, rings, flow tables)
  std::string device;  // the source's device argument; "" for generators
  std::string reason;
};

struct SegmentPlacement {
  int segment = -1;
  int lane = -1;  // -1: shared
  int node = 0;
  int cpu = -1;
  bool shares_cpu = false;  // another segment runs on the same cpu
  std::string reason;
  // Empty: the thread is pinned to `cpu`. Else it is not pinned: it runs
  // on any of these cpus, in the time their other segments leave (shared
  // segments without a cpu of its own; `cpu` is then the least loaded).
  std::vector<int> floats_over;
};

// "cpu 3", or for a segment not pinned "cpus 0-1".
std::string segment_cpus_text(const SegmentPlacement &sp);

struct Placement {
  std::string host;           // the profile's name
  bool this_machine = true;   // the profile describes the machine it was made on
  HostTopology topology;
  std::vector<int> usable_cpus, reserved_cpus;
  AcquisitionPolicy acquisition;
  bool hugepages = false;
  std::vector<LanePlacement> lanes;        // by lane id
  std::vector<SegmentPlacement> segments;  // by segment id
  int housekeeping_cpu = -1;               // -1: no shared segment
  std::vector<std::string> notes;          // plan-wide remarks (oversubscription, SMT, memory)

  // Segments on a cpu, in segment order.
  std::vector<int> segments_on(int cpu) const;
};

// Places every segment of `lg` on the host. False with *error (several lines:
// what is missing, what could change) when the profile forbids what the graph
// needs.
bool place_lanes(const LaneGraph &lg, const HostProfile &host, Placement &out, std::string *error);

}  // namespace sluice
