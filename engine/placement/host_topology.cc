#include "engine/placement/host_topology.hh"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cctype>
#include <map>
#include <regex>

namespace sluice {

namespace fs = std::filesystem;

const HostCpu *HostTopology::cpu(int id) const {
  auto it = std::lower_bound(cpus.begin(), cpus.end(), id, [](const HostCpu &c, int v) { return c.id < v; });
  return it != cpus.end() && it->id == id ? &*it : nullptr;
}

std::vector<int> HostTopology::node_cpus(int node) const {
  std::vector<int> out;
  for (const HostCpu &c : cpus)
    if (c.node == node) out.push_back(c.id);
  return out;
}

std::vector<int> HostTopology::siblings(int id) const {
  std::vector<int> out;
  const HostCpu *me = cpu(id);
  if (!me) return out;
  for (const HostCpu &c : cpus)
    if (c.core == me->core && c.id != id) out.push_back(c.id);
  return out;
}

bool HostTopology::has_smt() const {
  for (const HostCpu &c : cpus)
    if (!siblings(c.id).empty()) return true;
  return false;
}

// By hand rather than with std::regex, whose matcher recurses once per
// character (a long list overflowed the stack), and into a bitmap of cpus,
// so that repeated ranges cost no memory.
bool parse_cpu_list(const std::string &text, std::vector<int> &out) {
  out.clear();
  std::vector<bool> listed(kMaxCpus);
  size_t i = 0, end = text.size();
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == ' ')) --end;
  if (end == 0) return true;
  auto spaces = [&] { while (i < end && (text[i] == ' ' || text[i] == '\t')) ++i; };
  auto cpu = [&](int &c) {
    spaces();
    if (i == end || !std::isdigit(static_cast<unsigned char>(text[i]))) return false;
    for (c = 0; i < end && std::isdigit(static_cast<unsigned char>(text[i])); ++i)
      if ((c = c * 10 + (text[i] - '0')) >= kMaxCpus) return false;
    spaces();
    return true;
  };
  for (;;) {
    int first, last;
    if (!cpu(first)) return false;
    last = first;
    if (i < end && text[i] == '-' && (++i, !cpu(last))) return false;
    if (last < first) return false;
    for (int c = first; c <= last; ++c) listed[size_t(c)] = true;
    if (i == end) break;
    if (text[i++] != ',') return false;
  }
  for (int c = 0; c < kMaxCpus; ++c)
    if (listed[size_t(c)]) out.push_back(c);
  return true;
}

std::string format_cpu_list(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

namespace {

bool read_line(const fs::path &p, std::string &out) {
  std::ifstream f(p);
  return bool(std::getline(f, out));
}

}  // namespace

bool discover_topology(const std::string &sysfs_root, HostTopology &out, std::string *error) {
  out = HostTopology{};
  fs::path cpu_dir = fs::path(sysfs_root) / "devices/system/cpu";
  std::string text;
  std::vector<int> online;
  if (!read_line(cpu_dir / "online", text) || !parse_cpu_list(text, online) || online.empty()) {
    *error = "cannot read the online cpus from " + (cpu_dir / "online").string();
    return false;
  }
  std::map<int, int> node_of;  // cpu -> node
  fs::path node_dir = fs::path(sysfs_root) / "devices/system/node";
  std::error_code ec;
  int max_node = 0;
  for (const auto &entry : fs::directory_iterator(node_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4 || !std::all_of(name.begin() + 4, name.end(), ::isdigit))
      continue;
    if (name.size() > 8) continue;  // node numbers are small; stoi would throw past int
    int node = std::stoi(name.substr(4));
    std::vector<int> cpus;
    if (read_line(entry.path() / "cpulist", text) && parse_cpu_list(text, cpus))
      for (int c : cpus) node_of[c] = node;
    max_node = std::max(max_node, node);
  }
  out.node_count = max_node + 1;  // a kernel without NUMA has no node directories: one node
  std::map<std::string, int> core_of_siblings;  // a thread_siblings_list names one core
  for (int c : online) {
    HostCpu cpu{c, node_of.count(c) ? node_of[c] : 0, -1};
    fs::path list = cpu_dir / ("cpu" + std::to_string(c)) / "topology/thread_siblings_list";
    std::vector<int> siblings;
    if (!read_line(list, text) || !parse_cpu_list(text, siblings) || siblings.empty()) siblings = {c};
    auto [it, fresh] = core_of_siblings.emplace(format_cpu_list(siblings), int(core_of_siblings.size()));
    cpu.core = it->second;
    out.cpus.push_back(cpu);
  }
  return true;
}

HostTopology generated_topology(int nodes, int cores_per_node, int threads_per_core) {
  HostTopology t;
  t.node_count = nodes;
  int cores = nodes * cores_per_node;
  for (int thread = 0; thread < threads_per_core; ++thread)
    for (int core = 0; core < cores; ++core)
      t.cpus.push_back(HostCpu{thread * cores + core, core / cores_per_node, core});
  return t;
}

std::string device_pci_address(const std::string &device) {
  if (device.size() > 12) return "";  // longer than 0000:00:00.0
  static const std::regex pci("^(([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7])$");
  std::smatch m;
  if (!std::regex_match(device, m, pci)) return "";
  std::string addr = (m[2].matched ? m[2].str() : "0000") + ":" + m[3].str();
  std::transform(addr.begin(), addr.end(), addr.begin(), ::tolower);
  return addr;
}

std::string device_interface(const std::string &device) {
  for (const char *prefix : {"af_packet:", "af_xdp:"})
    if (device.rfind(prefix, 0) == 0) return device.substr(std::string(prefix).size());
  return "";
}

int device_numa_node(const std::string &sysfs_root, const std::string &device, std::string *source) {
  fs::path file;
  if (std::string pci = device_pci_address(device); !pci.empty())
    file = fs::path(sysfs_root) / "bus/pci/devices" / pci / "numa_node";
  else if (std::string iface = device_interface(device); !iface.empty())
    file = fs::path(sysfs_root) / "class/net" / iface / "device/numa_node";
  else
    return -1;
  *source = file.string();
  std::string text;
  if (!read_line(file, text)) return -1;
  try {
    return std::stoi(text);
  } catch (const std::exception &) {
    return -1;
  }
}

}  // namespace sluice
