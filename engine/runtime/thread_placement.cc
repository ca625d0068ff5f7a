#include "engine/runtime/thread_placement.hh"

#include <linux/mempolicy.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/placement/host_topology.hh"
#include "engine/runtime/dpdk_env.hh"

namespace sluice {

namespace {

// The kernel's struct sched_attr, version 0 (glibc 2.36 has no wrapper, and
// <linux/sched/types.h> clashes with <sched.h>).
struct DeadlineAttr {
  uint32_t size = sizeof(DeadlineAttr);
  uint32_t policy = 6;  // SCHED_DEADLINE
  uint64_t flags = 0;
  int32_t nice = 0;
  uint32_t priority = 0;
  uint64_t runtime_ns = 0, deadline_ns = 0, period_ns = 0;
};
static_assert(sizeof(DeadlineAttr) == 48, "SCHED_ATTR_SIZE_VER0");

bool run_on(const std::vector<int> &cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

bool pin_to(int cpu) { return run_on({cpu}); }

int try_deadline(const ThreadSite &site) {
  DeadlineAttr attr;
  attr.runtime_ns = site.deadline_runtime_ns;
  attr.deadline_ns = attr.period_ns = site.deadline_period_ns;
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0 ? 0 : errno;
}

std::string cpu_text(int cpu) { return "cpu " + std::to_string(cpu); }

}  // namespace

ThreadSettlement settle_current_thread(const ThreadSite &site) {
  ThreadSettlement out;
  unpin_current_thread();  // EAL's pinning of the main thread is inherited otherwise
  if (!site.floats_over.empty()) {
    if (!run_on(site.floats_over)) out.note = "cannot run on " + format_cpu_list(site.floats_over) + " (" + std::strerror(errno) + ")";
  } else if (site.cpu >= 0) {
    out.pinned = pin_to(site.cpu);
    if (!out.pinned) out.note = "cannot pin to " + cpu_text(site.cpu) + " (" + std::strerror(errno) + ")";
  }
  if (site.node >= 0) {
    // Preferred, not bound: a node short of memory lends from another
    // rather than failing the run.
    unsigned long mask = 1ul << site.node;
    if (site.node < int(8 * sizeof mask) && syscall(SYS_set_mempolicy, MPOL_PREFERRED, &mask, 8 * sizeof mask) != 0)
      out.note += std::string(out.note.empty() ? "" : "; ") + "memory not steered to node " +
                  std::to_string(site.node) + " (" + std::strerror(errno) + ")";
  }
  if (!site.deadline_period_ns) return out;

  // The kernel admits a SCHED_DEADLINE thread only if its affinity spans its
  // root domain: a thread pinned to one cpu gets it inside an exclusive
  // cpuset only. Pinned first, then unpinned: the deadline matters more
  // than the cpu (the summary shows where the thread ran).
  int pinned_err = out.pinned ? try_deadline(site) : -1;
  if (pinned_err == 0) {
    out.deadline = true;
    return out;
  }
  if (out.pinned) unpin_current_thread();
  int err = try_deadline(site);
  if (err == 0) {
    out.deadline = true;
    if (out.pinned)
      out.note = "SCHED_DEADLINE in force, not pinned to " + cpu_text(site.cpu) +
                 ": the kernel keeps a deadline thread on its whole root domain (" + std::strerror(pinned_err) +
                 " when pinned; an exclusive cpuset allows both)";
    out.pinned = false;
    return out;
  }
  if (out.pinned) pin_to(site.cpu);
  out.note = std::string("periodic acquisition refused by the kernel (SCHED_DEADLINE: ") + std::strerror(err) +
             "): busy polling instead";
  return out;
}

}  // namespace sluice
