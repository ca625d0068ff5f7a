// Host profiles (YAML): where a graph runs. DPDK EAL options and memory, the
// machine (discovered from sysfs, or described: another machine can be
// planned for anywhere), the cpus that may be used and those left to the
// system, devices and their NUMA nodes, how acquisition threads are
// scheduled, whether SMT siblings share a lane and whether segments may
// share cpus. Unknown keys, wrong types and impossible values are errors with
// file:line:column. The keys are documented in docs/placement.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/placement/host_topology.hh"

namespace sluice {

struct AcquisitionPolicy {
  enum class Mode { Poll, Periodic } mode = Mode::Poll;
  uint64_t period_ns = 0;   // periodic: SCHED_DEADLINE period (= deadline)
  uint64_t runtime_ns = 0;  // periodic: cpu time granted per period
};

struct ProfileDevice {
  std::string name;  // as RSSSource names it, a PCI address or an interface
  int node = -1;     // -1: no NUMA node known
  std::string node_source;  // "the profile" or the sysfs file it came from
};

struct HostProfile {
  std::string name;
  std::string path;  // the file it was read from

  // DPDK
  std::vector<std::string> eal_args;   // passed to rte_eal_init, memory options included
  bool hugepages = false;              // false: --no-huge (no root, no setup)
  unsigned memory_mb = 0;              // total (-m); 0: what the run's pools need
  std::vector<unsigned> node_memory_mb;  // hugepages per node (--socket-mem); empty: what each node's lanes need

  // The machine and what may be used of it.
  bool this_machine = true;  // `topology: auto`: cpus can be pinned, sysfs asked
  std::string sysfs_root;    // where `auto` looked
  HostTopology topology;
  std::vector<int> usable_cpus;    // cpus.use without cpus.reserve
  std::vector<int> reserved_cpus;  // cpus.reserve: never planned
  int housekeeping_cpu = -1;       // cpus.housekeeping; -1: the planner picks one
  bool smt_share = true;           // cpus.smt: share (a lane's processing on its acquisition's sibling)
  bool oversubscribe = false;      // cpus.oversubscribe: segments may share cpus when they run out
  std::vector<ProfileDevice> devices;
  AcquisitionPolicy acquisition;

  // The NUMA node of a device string from a .pipe file: the profile's
  // devices first, then sysfs on this machine. -1 when unknown; *why says
  // where the answer came from.
  int device_node(const std::string &device, std::string *why) const;
};

// Where `auto` looks: the sysfs tree and the cpus this process may use.
struct HostEnvironment {
  std::string sysfs_root = "/sys";
  std::vector<int> affinity;  // empty: every online cpu
  // This process on this machine: /sys and sched_getaffinity.
  static HostEnvironment this_process();
};

// The profile used without --host, never looked up from the working
// directory: the source tree's configs/laptop.yaml when this executable is
// the build tree's, else the installed one (<prefix>/share/sluice/configs/);
// both paths are fixed at build time. Empty when that file does not exist:
// the built-in profile is then used.
std::string default_host_profile_path();

// A host profile is read whole: far more than any real one, and a wrong file
// (a trace, /dev/zero) is refused at once.
inline constexpr size_t kMaxHostProfileBytes = 1u << 20;

// Reads a profile file. When this process runs as root, a file that other
// users could have written is refused (untrusted_as_root in engine/base/source.hh):
// its EAL options can load code.
bool load_host_profile(const std::string &path, const HostEnvironment &env, HostProfile &out, std::string *error);
// The same from text; `label` stands for the file name in messages.
bool parse_host_profile(const std::string &label, const std::string &yaml, const HostEnvironment &env,
                        HostProfile &out, std::string *error);
// The laptop profile's settings, for when no profile file can be found.
bool builtin_host_profile(const HostEnvironment &env, HostProfile &out, std::string *error);

}  // namespace sluice
