// Putting the calling thread where the plan says: pinned to its cpu (or,
// for a segment the plan lets float, free to run on any of its cpus), its
// memory preferred on its node, and for acquisition, when the profile asks,
// scheduled periodically with SCHED_DEADLINE. What the system refuses is
// reported, never fatal: the thread then runs as close to the plan as it can.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice {

struct ThreadSite {
  int cpu = -1;   // -1: unplaced (any of the process's cpus)
  int node = -1;  // -1: memory wherever the kernel likes
  uint64_t deadline_runtime_ns = 0;  // with a period: SCHED_DEADLINE wanted
  uint64_t deadline_period_ns = 0;
  std::vector<int> floats_over;  // not empty: not pinned to `cpu`, runs on any of these
};

struct ThreadSettlement {
  bool pinned = false;    // affinity is the planned cpu alone
  bool deadline = false;  // SCHED_DEADLINE in force: give the rest of the period back when idle
  std::string note;       // what differs from the plan, and why; empty when nothing does
};

// Applies `site` to the calling thread. Call before rte_thread_register, so
// that EAL sees the pinned cpu (and its socket) for the thread's lcore.
ThreadSettlement settle_current_thread(const ThreadSite &site);

}  // namespace sluice
