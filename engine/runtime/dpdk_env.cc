#include "engine/runtime/dpdk_env.hh"

#include <fcntl.h>
#include <pthread.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_memory.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>

#include "engine/placement/host_topology.hh"
#include "engine/runtime/packet.hh"

namespace sluice {

namespace {
std::vector<int> g_cpus;
bool g_initialized = false;
// Set on the thread in rte_eal_init: see nanosleep, access and memfd_create below.
thread_local bool t_in_eal_init = false;
// Whether EAL's memory without hugepages is to be anonymous (memfd_create below).
bool g_anonymous_nohuge_memory = false;

// The cpus and NUMA nodes this machine can ever have: the kernel's
// "possible" masks, which hot-plugging stays within.
struct PossibleIds {
  std::vector<int> cpus, nodes;
  bool known = false;  // both masks read
};

const PossibleIds &possible_ids() {
  static const PossibleIds ids = [] {
    auto read_list = [](const char *path, std::vector<int> &out) {
      std::ifstream f(path);
      std::string text;
      return std::getline(f, text) && parse_cpu_list(text, out) && !out.empty();
    };
    PossibleIds p;
    p.known = read_list("/sys/devices/system/cpu/possible", p.cpus) &&
              read_list("/sys/devices/system/node/possible", p.nodes);
    return p;
  }();
  return ids;
}

// Without hugepages, EAL's memory is one mapping of 4 KiB pages (the
// "nohugemem" list): anonymous here (memfd_create below), it can have
// transparent huge pages, which EAL does not ask for.
void advise_huge_pages() {
  rte_memseg_list_walk(
      [](const rte_memseg_list *msl, void *) {
        if (msl->page_sz == 4096 && msl->base_va && msl->len >= (2u << 20))
          madvise(msl->base_va, msl->len, MADV_HUGEPAGE);
        return 0;
      },
      nullptr);
}

std::vector<int> current_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}
}  // namespace

const std::vector<int> &process_cpus() {
  if (g_cpus.empty()) g_cpus = current_cpus();
  return g_cpus;
}

void unpin_current_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : process_cpus()) CPU_SET(c, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

int dpdk_socket_for_node(int node) {
  rte_malloc_socket_stats stats{};
  if (node < 0 || rte_malloc_get_socket_stats(node, &stats) != 0 || stats.heap_totalsz_bytes == 0)
    return SOCKET_ID_ANY;
  return node;
}

rte_mempool *create_packet_pool(const std::string &name, unsigned n, uint16_t data_room, int socket, bool lifo,
                                unsigned cache) {
  uint16_t room = uint16_t(RTE_PKTMBUF_HEADROOM + data_room);
  if (lifo) {
    if (rte_mempool *p = rte_pktmbuf_pool_create_by_ops(name.c_str(), n, cache, kMbufPrivSize, room, socket, "stack"))
      return p;
    if (rte_errno != EINVAL) return nullptr;  // out of memory: the default would fail alike
  }
  return rte_pktmbuf_pool_create(name.c_str(), n, cache, kMbufPrivSize, room, socket);
}

bool init_eal(const EalRequest &req, std::string *error) {
  static std::mutex m;
  std::lock_guard lock(m);
  if (g_initialized) return true;
  process_cpus();  // before EAL pins this thread

  std::vector<std::string> args = {"sluice"};
  args.insert(args.end(), req.args.begin(), req.args.end());
  auto has = [&](const std::string &a) { return std::find(args.begin(), args.end(), a) != args.end(); };
  bool sets_memory = std::any_of(args.begin(), args.end(), [](const std::string &a) {
    return a == "-m" || a.rfind("--socket-mem", 0) == 0;
  });
  if (!sets_memory && !has("--no-huge") && !req.node_memory_mb.empty()) {
    std::string per_node;
    for (unsigned mb : req.node_memory_mb) per_node += (per_node.empty() ? "" : ",") + std::to_string(mb);
    args.insert(args.end(), {"--socket-mem", per_node});
  } else if (!sets_memory) {
    args.push_back("-m");
    args.push_back(std::to_string(req.memory_mb));
  }
  // One EAL lcore, on the first usable CPU: the data-plane threads are the
  // runtime's own (registered with EAL for mempool caches) and placed by it.
  if (!has("-l") && !has("--lcores") && !has("-c")) {
    args.push_back("-l");
    args.push_back(std::to_string(process_cpus().empty() ? 0 : process_cpus().front()));
  }
  // Processes run side by side (tests, several probes): no shared config files.
  if (!has("--no-shconf") && !has("--file-prefix")) args.push_back("--no-shconf");
  if (!has("--no-telemetry")) args.push_back("--no-telemetry");
  if (req.pci) {
    for (const std::string &a : req.allow) args.insert(args.end(), {"-a", a});
  } else if (!has("--no-pci")) {
    args.push_back("--no-pci");
  }
  if (!has("--log-level")) args.push_back("--log-level=*:warning");
#if SLUICE_STATIC_DPDK
  // DPDK is linked in, with its drivers (CMakeLists.txt): a driver loaded
  // from a file links DPDK's shared libraries, a second DPDK in the process.
  for (const std::string &a : args)
    if (a.starts_with("-d") && !a.starts_with("--")) {
      *error = "EAL option -d: this sluice has DPDK linked in with its drivers (docs/deployment.md), and a driver "
               "loaded from a file would bring a second DPDK into the process; build sluice with the driver "
               "(SLUICE_DPDK_DRIVERS) or with -DSLUICE_STATIC_DPDK=OFF";
      return false;
    }
#endif

  std::vector<char *> argv;
  for (std::string &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  possible_ids();  // read before EAL asks (access below)
  g_anonymous_nohuge_memory = eal_memory_can_be_anonymous(args);
  t_in_eal_init = true;
  int rc = rte_eal_init(int(argv.size()) - 1, argv.data());
  t_in_eal_init = false;
  if (rc < 0) {
    std::string cmd;
    for (size_t i = 1; i < args.size(); ++i) cmd += (i > 1 ? " " : "") + args[i];
    *error = std::string("DPDK initialization failed: ") + rte_strerror(rte_errno) + " (EAL options: " + cmd + ")";
    return false;
  }
  g_initialized = true;
  if (g_anonymous_nohuge_memory) advise_huge_pages();
  unpin_current_thread();
  return true;
}

}  // namespace sluice

// EAL measures the TSC's frequency, where the CPU does not state it (CPUID
// leaf 0x15: absent on the VMs of docs/performance.md), by counting cycles
// across a nanosleep() of 100 ms in rte_eal_init: a tenth of a second of
// every run's start, idle. This definition of nanosleep, which EAL's calls
// reach before libc's (an executable's symbols come first), shortens that
// one sleep to 5 ms. EAL reads the clock (CLOCK_MONOTONIC_RAW), then the
// counter, on each side of the sleep and divides the cycles by the time
// between the two clock readings: what the length of the sleep buys is only
// tolerance to the thread being interrupted between a clock reading and
// its counter reading. EAL rounds the frequency to 10 MHz (0.3% of 3 GHz);
// over 5 ms, an interruption there shorter than 8 us cannot change the
// result (the test below checks it against 200 ms of counting). It was 20
// ms: 15 ms more of each start (a third of a short run's start-up).
// Every other nanosleep is libc's, unchanged.
extern "C" int nanosleep(const struct timespec *request, struct timespec *remaining) {
  constexpr long kEalTscSleepNs = 100'000'000, kShorterNs = 5'000'000;
  struct timespec shorter = {0, kShorterNs};
  if (sluice::t_in_eal_init && request && request->tv_sec == 0 && request->tv_nsec == kEalTscSleepNs)
    request = &shorter;
  // libc's nanosleep is clock_nanosleep on CLOCK_REALTIME, which returns
  // the error where nanosleep sets errno.
  if (int e = clock_nanosleep(CLOCK_REALTIME, 0, request, remaining)) {
    errno = e;
    return -1;
  }
  return 0;
}

// Without hugepages EAL maps its memory from a memfd ("nohuge"), shared:
// for vhost-user back ends, which map the same pages from the fd (the
// virtio_user and vhost drivers). Shared memory of a memfd has no
// transparent huge pages (shmem_enabled is "never" on Debian), so each 4
// KiB page of a packet pool was a page fault when the pool was made (10 ms
// of a trace run's start for 3,072 buffers) and a TLB entry of its own when
// packets go through it. Where neither driver is asked for, EAL's memfd
// fails here, in rte_eal_init only, and EAL maps anonymous memory instead,
// as it does where memfd_create is missing; init_eal then advises huge
// pages on it (advise_huge_pages above).
extern "C" int memfd_create(const char *name, unsigned int flags) {
  if (sluice::t_in_eal_init && sluice::g_anonymous_nohuge_memory && name && std::string_view(name) == "nohuge") {
    errno = ENOSYS;
    return -1;
  }
  return int(syscall(SYS_memfd_create, name, flags));
}

namespace sluice {

bool eal_memory_can_be_anonymous(const std::vector<std::string> &eal_args) {
  return std::none_of(eal_args.begin(), eal_args.end(), [](const std::string &a) {
    return a.find("virtio_user") != std::string::npos || a.find("vhost") != std::string::npos;
  });
}

bool sysfs_cpu_path_cannot_exist(const char *path) {
  const PossibleIds &ids = possible_ids();
  if (!ids.known || !path) return false;
  auto possible = [](const std::vector<int> &list, unsigned id) {
    return std::binary_search(list.begin(), list.end(), int(id));
  };
  unsigned node, cpu;
  int n = 0;
  if (std::sscanf(path, "/sys/devices/system/node/node%u/cpu%u%n", &node, &cpu, &n) == 2 && path[n] == 0)
    return !possible(ids.nodes, node) || !possible(ids.cpus, cpu);
  n = 0;
  if (std::sscanf(path, "/sys/devices/system/cpu/cpu%u/topology/core_id%n", &cpu, &n) == 1 && path[n] == 0)
    return !possible(ids.cpus, cpu);
  return false;
}

}  // namespace sluice

// EAL looks for each of its lcore ids (RTE_MAX_LCORE, 1024 in Debian's
// DPDK) in sysfs: whether the cpu exists (.../cpuN/topology/core_id), and
// for each NUMA node id (RTE_MAX_NUMA_NODES) whether the cpu is on it: 5,000
// failing access() calls on a 2-cpu machine, a path lookup in the kernel
// each, 10 ms of every run's start. This definition, reached before libc's
// like nanosleep above, answers "no such file" at once, in rte_eal_init
// only, for the cpus and nodes the kernel says can never exist (its
// "possible" masks); every other path, and every call outside EAL's
// start, goes to the kernel as libc's access() does.
extern "C" int access(const char *path, int mode) {
  if (sluice::t_in_eal_init && sluice::sysfs_cpu_path_cannot_exist(path)) {
    errno = ENOENT;
    return -1;
  }
  return faccessat(AT_FDCWD, path, mode, 0);
}
