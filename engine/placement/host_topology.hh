// The machine a plan is made for: its NUMA nodes, their cpus, and which cpus
// are hardware threads (SMT siblings) of one physical core. Read from sysfs
// for this machine (the root directory is a parameter, so that tests can use
// a fake tree), or generated from a profile's description of another one.
#pragma once
#include <string>
#include <vector>

namespace sluice {

struct HostCpu {
  int id = -1;
  int node = 0;
  int core = -1;  // physical core, numbered machine-wide; SMT siblings share it
};

struct HostTopology {
  std::vector<HostCpu> cpus;  // by increasing id
  int node_count = 1;

  const HostCpu *cpu(int id) const;
  std::vector<int> node_cpus(int node) const;
  // The other hardware threads of the cpu's core (empty without SMT).
  std::vector<int> siblings(int cpu) const;
  bool has_smt() const;
};

// Nodes from <root>/devices/system/node/node*/cpulist (one node when the
// kernel has no NUMA), online cpus, cores from each cpu's
// topology/thread_siblings_list. False with *error when the tree is unusable.
bool discover_topology(const std::string &sysfs_root, HostTopology &out, std::string *error);

// `nodes` x `cores_per_node` x `threads_per_core`, numbered as Linux does on
// such servers: the first thread of every core node by node, then the second
// threads in the same order (node 0 of a 4x20x2 machine: cpus 0-19, 80-99).
HostTopology generated_topology(int nodes, int cores_per_node, int threads_per_core);

// A device's NUMA node as sysfs says: a PCI address
// (<root>/bus/pci/devices/ADDR/numa_node) or a network interface named in the
// device string (af_packet:IFACE, af_xdp:IFACE, or a bare name:
// <root>/class/net/IFACE/device/numa_node). -1 when sysfs does not know it
// (no such device, a virtual one, a machine without NUMA); *source says which
// file was read, for the plan's reasons.
int device_numa_node(const std::string &sysfs_root, const std::string &device, std::string *source);

// What a device string names: a PCI address in its long form, an interface,
// or "" for devices without hardware (pcap files, null).
std::string device_pci_address(const std::string &device);
std::string device_interface(const std::string &device);

// The most cpus Sluice can pin: cpu numbers are below this.
inline constexpr int kMaxCpus = 4096;

// Kernel cpu lists: "0-3,8,10-11", cpus below kMaxCpus; sorted, without
// repeats. False when the text is not one.
bool parse_cpu_list(const std::string &text, std::vector<int> &out);
std::string format_cpu_list(std::vector<int> cpus);

}  // namespace sluice
