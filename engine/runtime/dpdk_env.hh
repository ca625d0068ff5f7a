// DPDK's environment abstraction layer, initialized once per process
// (rte_eal_init cannot run twice, PLATFORM.md), with the options a host
// profile gives, and the memory a run needs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

struct rte_mempool;

namespace sluice {

struct EalRequest {
  std::vector<std::string> args;  // from the host profile, e.g. --no-huge
  unsigned memory_mb = 256;       // what the run's pools need, with headroom
  // With hugepages: what each NUMA node's lanes need (--socket-mem); empty: memory_mb anywhere
  std::vector<unsigned> node_memory_mb;
  bool pci = false;               // a device given by PCI address: scan the PCI bus
  std::vector<std::string> allow; // PCI addresses to use (-a)
};

// Initializes EAL on the first call; later calls check nothing and return
// true. On failure returns false with *error saying why.
bool init_eal(const EalRequest &req, std::string *error);

// The CPUs this process may run on, as they were before EAL pinned the main
// thread to one of them. Threads started by the runtime get this set back
// (EAL's pinning would otherwise be inherited by every thread).
const std::vector<int> &process_cpus();
void unpin_current_thread();

// The DPDK socket id to allocate on for a NUMA node: the node itself when
// DPDK has memory there, else SOCKET_ID_ANY (without hugepages all of
// DPDK's memory is one heap, on socket 0).
int dpdk_socket_for_node(int node);

// Whether EAL's memory without hugepages may be anonymous memory, with
// transparent huge pages (dpdk_env.cc, memfd_create()): yes unless the EAL
// options name a virtio_user or vhost device, whose back end maps the
// memory from EAL's memfd.
bool eal_memory_can_be_anonymous(const std::vector<std::string> &eal_args);

// Whether `path` is EAL's sysfs question about a cpu (or a cpu on a NUMA
// node) that the kernel says this machine can never have: answered without
// the kernel while EAL starts (dpdk_env.cc, access()).
bool sysfs_cpu_path_cannot_exist(const char *path);

// A pool of n packet buffers (mbufs with the runtime's annotations in their
// private area and data_room bytes of data), on `socket`. It hands buffers
// back last in, first out (DPDK's "stack" mempool driver): the buffer a
// segment freed last is the next one a source fills, its lines still in the
// caches. DPDK's default (a ring) hands out the buffer freed longest ago:
// with a pool of tens of thousands every packet's mbuf, annotations and
// data missed the caches when the source wrote them. Falls back to the
// default where the driver is missing, or when `lifo` is false (a device
// that lays its own structures over the pool: af_xdp's UMEM received nothing
// from a stack pool). `cache`: buffers each thread keeps of its own (0: a
// small pool every thread must reach all of). nullptr with rte_errno on failure.
rte_mempool *create_packet_pool(const std::string &name, unsigned n, uint16_t data_room, int socket,
                                bool lifo = true, unsigned cache = 256);

}  // namespace sluice
