// Host profiles (YAML): where a graph runs. This reads the part the runtime
// applies today: DPDK EAL options and memory. Unknown keys and wrong types
// are errors with file:line:column.
#pragma once
#include <string>
#include <vector>

namespace sluice {

struct HostProfile {
  std::string name;
  std::vector<std::string> eal_args;  // passed to rte_eal_init
  bool hugepages = false;             // false: --no-huge (no root, no setup)
  unsigned memory_mb = 0;             // 0: what the run's pools need
};

// configs/laptop.yaml next to the working directory or the installed share
// directory; empty when none is found (built-in defaults then apply).
std::string default_host_profile_path();
bool load_host_profile(const std::string &path, HostProfile &out, std::string *error);

}  // namespace sluice
