#include "engine/placement/host_profile.hh"

#include <sched.h>
#include <yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "dsl/literals.hh"
#include "engine/base/source.hh"

namespace sluice {

namespace {

// The kernel's SCHED_DEADLINE limits: runtime at least 1024 ns, periods up
// to kernel.sched_deadline_period_max_us (4 s by default).
constexpr uint64_t kMinDeadlineRuntimeNs = 1024;
constexpr uint64_t kMaxDeadlinePeriodNs = 4'000'000'000ull;

// A value quoted in a message: a long one is cut (the position says where it is).
std::string shown(const std::string &text) { return text.size() > 40 ? text.substr(0, 40) + "..." : text; }

// Walks a libyaml document. Keys may come in any order, so values that
// depend on others (cpus on the topology) are kept as nodes and checked
// once everything is read. Every error names file:line:column.
class ProfileReader {
 public:
  ProfileReader(const std::string &label, yaml_document_t &doc, const HostEnvironment &env, HostProfile &out)
      : label_(label), doc_(doc), env_(env), out_(out) {}

  bool read(std::string *error) {
    bool ok = read_document() && resolve();
    if (!ok) *error = msg_;
    return ok;
  }

 private:
  using Node = yaml_node_t;

  bool read_document() {
    Node *root = yaml_document_get_root_node(&doc_);
    if (!root) return true;  // an empty file: the defaults
    if (!expect(root, YAML_MAPPING_NODE, "a mapping of settings")) return false;
    return for_each_key(root, "the profile", {"name", "topology", "memory", "eal", "cpus", "devices", "acquisition"},
                        [&](const std::string &key, Node *v) {
                          if (key == "name") return read_name(v);
                          if (key == "topology") return topology_ = v, true;
                          if (key == "memory") return read_memory(v);
                          if (key == "eal") return read_eal(v);
                          if (key == "cpus") return read_cpus(v);
                          if (key == "devices") return read_devices(v);
                          return read_acquisition(v);
                        });
  }

  // ---- helpers ----
  Node *node(int id) { return yaml_document_get_node(&doc_, id); }
  static std::string scalar(Node *n) {
    return n && n->type == YAML_SCALAR_NODE
               ? std::string(reinterpret_cast<char *>(n->data.scalar.value), n->data.scalar.length)
               : std::string();
  }
  bool problem(Node *n, const std::string &msg) {
    msg_ = label_ + ":" + std::to_string(n->start_mark.line + 1) + ":" + std::to_string(n->start_mark.column + 1) +
           ": error: " + msg;
    return false;
  }
  bool expect(Node *n, yaml_node_type_t t, const std::string &what) {
    return n->type == t || problem(n, "expected " + what);
  }
  template <typename F>
  bool for_each_key(Node *m, const std::string &where, std::initializer_list<const char *> known, F &&f) {
    std::string names;
    for (const char *k : known) names += (names.empty() ? "" : ", ") + std::string(k);
    for (auto *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; ++p) {
      Node *k = node(p->key), *v = node(p->value);
      std::string key = scalar(k);
      if (std::find_if(known.begin(), known.end(), [&](const char *n) { return key == n; }) == known.end())
        return problem(k, "unknown key '" + shown(key) + "'" + (where == "the profile" ? "" : " in " + where) +
                              " (known: " + names + ")");
      if (!f(key, v)) return false;
    }
    return true;
  }
  bool boolean(Node *v, const std::string &key, bool &out) {
    std::string val = scalar(v);
    if (v->type == YAML_SCALAR_NODE && (val == "true" || val == "yes")) return out = true, true;
    if (v->type == YAML_SCALAR_NODE && (val == "false" || val == "no")) return out = false, true;
    return problem(v, key + ": expected true or false, not '" + shown(val) + "'");
  }
  bool integer(Node *v, const std::string &key, long lo, long hi, long &out) {
    std::string val = scalar(v);
    char *end = nullptr;
    errno = 0;
    out = v->type == YAML_SCALAR_NODE && !val.empty() ? std::strtol(val.c_str(), &end, 10) : 0;
    if (v->type != YAML_SCALAR_NODE || val.empty() || *end || (errno && errno != ERANGE))
      return problem(v, key + ": expected a number, not '" + shown(val) + "'");
    if (errno == ERANGE || out < lo || out > hi)
      return problem(v, key + ": " + shown(val) + " is out of range (" + std::to_string(lo) + ".." + std::to_string(hi) + ")");
    return true;
  }
  bool duration(Node *v, const std::string &key, uint64_t &out) {
    std::string err;
    auto value = v->type == YAML_SCALAR_NODE ? parse_value_text(scalar(v), ArgSpec::duration(key), &err) : std::nullopt;
    if (!value) return problem(v, key + ": expected a duration (e.g. 100us, 1ms), not '" + shown(scalar(v)) + "'");
    out = uint64_t(value->integer);
    return true;
  }
  // A cpu list: "0-3,8", a single number, or a YAML list of numbers.
  bool cpu_list(Node *v, const std::string &key, std::vector<int> &out) {
    out.clear();
    if (v->type == YAML_SEQUENCE_NODE) {
      for (auto *i = v->data.sequence.items.start; i < v->data.sequence.items.top; ++i) {
        long c;
        if (!integer(node(*i), key, 0, kMaxCpus - 1, c)) return false;
        out.push_back(int(c));
      }
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
      return true;
    }
    if (v->type == YAML_SCALAR_NODE && parse_cpu_list(scalar(v), out)) return true;
    return problem(v, key + ": expected a cpu list like \"2-19,22\" or [2, 3] (cpus below " +
                          std::to_string(kMaxCpus) + "), not '" + shown(scalar(v)) + "'");
  }
  bool is_auto(Node *v) { return v && v->type == YAML_SCALAR_NODE && scalar(v) == "auto"; }

  // ---- sections ----
  bool read_name(Node *v) {
    if (!expect(v, YAML_SCALAR_NODE, "a name")) return false;
    out_.name = scalar(v);
    return true;
  }

  bool read_memory(Node *m) {
    if (!expect(m, YAML_MAPPING_NODE, "a mapping (hugepages, mb)")) return false;
    return for_each_key(m, "memory", {"hugepages", "mb"}, [&](const std::string &key, Node *v) {
      if (key == "hugepages") return boolean(v, "hugepages", out_.hugepages);
      return memory_mb_ = v, true;
    });
  }

  bool read_eal(Node *m) {
    if (!expect(m, YAML_MAPPING_NODE, "a mapping (args)")) return false;
    return for_each_key(m, "eal", {"args"}, [&](const std::string &, Node *v) {
      if (!expect(v, YAML_SEQUENCE_NODE, "a list of EAL options")) return false;
      for (auto *i = v->data.sequence.items.start; i < v->data.sequence.items.top; ++i) {
        Node *a = node(*i);
        if (!expect(a, YAML_SCALAR_NODE, "an EAL option")) return false;
        eal_extra_.push_back(scalar(a));
      }
      return true;
    });
  }

  bool read_cpus(Node *m) {
    if (!expect(m, YAML_MAPPING_NODE, "a mapping (use, reserve, housekeeping, smt, oversubscribe)")) return false;
    return for_each_key(m, "cpus", {"use", "reserve", "housekeeping", "smt", "oversubscribe"},
                        [&](const std::string &key, Node *v) {
                          if (key == "use") return use_ = v, true;
                          if (key == "reserve") return reserve_ = v, true;
                          if (key == "housekeeping") return housekeeping_ = v, true;
                          if (key == "oversubscribe") return boolean(v, "oversubscribe", out_.oversubscribe);
                          std::string s = scalar(v);
                          if (v->type == YAML_SCALAR_NODE && (s == "share" || s == "separate"))
                            return out_.smt_share = s == "share", true;
                          return problem(v, "smt: expected share or separate, not '" + shown(s) + "'");
                        });
  }

  bool read_devices(Node *m) {
    if (!expect(m, YAML_SEQUENCE_NODE, "a list of devices (- name: ..., node: ...)")) return false;
    for (auto *i = m->data.sequence.items.start; i < m->data.sequence.items.top; ++i) {
      Node *d = node(*i);
      if (!expect(d, YAML_MAPPING_NODE, "a device (name, node)")) return false;
      DeviceNodes dn{d, nullptr, nullptr};
      if (!for_each_key(d, "a device", {"name", "node"}, [&](const std::string &key, Node *v) {
            if (key == "name") return expect(v, YAML_SCALAR_NODE, "a device name") && (dn.name = v, true);
            return dn.node = v, true;
          }))
        return false;
      if (!dn.name) return problem(d, "a device needs a name (as RSSSource's device argument gives it)");
      if (!dn.node) return problem(d, "device '" + shown(scalar(dn.name)) + "' needs a node (a number, or auto)");
      devices_.push_back(dn);
    }
    return true;
  }

  bool read_acquisition(Node *m) {
    if (!expect(m, YAML_MAPPING_NODE, "a mapping (mode, period, runtime)")) return false;
    return for_each_key(m, "acquisition", {"mode", "period", "runtime"}, [&](const std::string &key, Node *v) {
      if (key == "period") return period_ = v, duration(v, "period", out_.acquisition.period_ns);
      if (key == "runtime") return runtime_ = v, duration(v, "runtime", out_.acquisition.runtime_ns);
      std::string s = scalar(v);
      if (v->type == YAML_SCALAR_NODE && (s == "poll" || s == "periodic")) {
        out_.acquisition.mode = s == "poll" ? AcquisitionPolicy::Mode::Poll : AcquisitionPolicy::Mode::Periodic;
        return mode_ = v, true;
      }
      return problem(v, "mode: expected poll or periodic, not '" + shown(s) + "'");
    });
  }

  // ---- checks once everything is read, in dependency order ----
  bool resolve() {
    return resolve_topology() && resolve_memory() && resolve_cpus() && resolve_devices() && resolve_acquisition();
  }

  bool resolve_topology() {
    out_.sysfs_root = env_.sysfs_root;
    if (!topology_ || is_auto(topology_)) {
      out_.this_machine = true;
      std::string err;
      if (!discover_topology(env_.sysfs_root, out_.topology, &err))
        return topology_ ? problem(topology_, "topology: auto: " + err) : (msg_ = label_ + ": error: " + err, false);
      available_ = {};
      for (const HostCpu &c : out_.topology.cpus)
        if (env_.affinity.empty() || std::binary_search(env_.affinity.begin(), env_.affinity.end(), c.id))
          available_.push_back(c.id);
      if (available_.empty()) return problem_or_file(topology_, "this process may not run on any online cpu");
      return true;
    }
    out_.this_machine = false;
    if (!expect(topology_, YAML_MAPPING_NODE, "auto or a mapping (nodes, cores_per_node, threads_per_core)"))
      return false;
    long nodes = 1, cores = 0, threads = 1;
    bool have_cores = false;
    if (!for_each_key(topology_, "topology", {"nodes", "cores_per_node", "threads_per_core"},
                      [&](const std::string &key, Node *v) {
                        if (key == "nodes") return integer(v, key, 1, 64, nodes);
                        if (key == "threads_per_core") return integer(v, key, 1, 8, threads);
                        return have_cores = true, integer(v, key, 1, 1024, cores);
                      }))
      return false;
    if (!have_cores) return problem(topology_, "topology: cores_per_node is missing");
    if (nodes * cores * threads > kMaxCpus)
      return problem(topology_, "topology: " + std::to_string(nodes * cores * threads) + " cpus, more than " +
                                    std::to_string(kMaxCpus) + " (the most Sluice can pin)");
    out_.topology = generated_topology(int(nodes), int(cores), int(threads));
    for (const HostCpu &c : out_.topology.cpus) available_.push_back(c.id);
    return true;
  }

  bool problem_or_file(Node *n, const std::string &msg) {
    if (n) return problem(n, msg);
    msg_ = label_ + ": error: " + msg;
    return false;
  }

  bool resolve_memory() {
    if (memory_mb_ && !is_auto(memory_mb_)) {
      if (memory_mb_->type == YAML_SEQUENCE_NODE) {
        if (!out_.hugepages)
          return problem(memory_mb_, "mb: a list per NUMA node needs hugepages: true (DPDK reserves per-node memory "
                                     "only from hugepages); give one number for the total");
        for (auto *i = memory_mb_->data.sequence.items.start; i < memory_mb_->data.sequence.items.top; ++i) {
          long mb;
          if (!integer(node(*i), "mb", 0, 1l << 22, mb)) return false;
          out_.node_memory_mb.push_back(unsigned(mb));
        }
        if (out_.node_memory_mb.size() != size_t(out_.topology.node_count))
          return problem(memory_mb_, "mb: " + std::to_string(out_.node_memory_mb.size()) + " values for " +
                                         std::to_string(out_.topology.node_count) + " NUMA node" +
                                         (out_.topology.node_count == 1 ? "" : "s") + ": give one per node");
      } else {
        long mb;
        std::string val = scalar(memory_mb_);
        char *end = nullptr;
        mb = memory_mb_->type == YAML_SCALAR_NODE ? std::strtol(val.c_str(), &end, 10) : 0;
        if (memory_mb_->type != YAML_SCALAR_NODE || val.empty() || *end || mb < 64 || mb > (1l << 22))
          return problem(memory_mb_, "mb: expected auto or megabytes (64 or more), not '" + shown(val) + "'");
        out_.memory_mb = unsigned(mb);
      }
    }
    // The options DPDK gets; the runtime adds what `auto` leaves to it.
    if (!out_.hugepages) out_.eal_args.push_back("--no-huge");
    out_.eal_args.insert(out_.eal_args.end(), eal_extra_.begin(), eal_extra_.end());
    if (out_.memory_mb) out_.eal_args.insert(out_.eal_args.end(), {"-m", std::to_string(out_.memory_mb)});
    if (!out_.node_memory_mb.empty()) {
      std::string list;
      for (unsigned mb : out_.node_memory_mb) list += (list.empty() ? "" : ",") + std::to_string(mb);
      out_.eal_args.insert(out_.eal_args.end(), {"--socket-mem", list});
    }
    return true;
  }

  // Every cpu named must exist, and on this machine be one this process may use.
  bool check_cpus_exist(Node *where, const std::string &key, const std::vector<int> &cpus) {
    for (int c : cpus) {
      if (!out_.topology.cpu(c))
        return problem(where, key + ": cpu " + std::to_string(c) + " does not exist on " +
                                  (out_.this_machine ? "this machine" : "the machine described") + " (cpus " +
                                  format_cpu_list(all_cpus()) + ")");
      if (!std::binary_search(available_.begin(), available_.end(), c))
        return problem(where, key + ": cpu " + std::to_string(c) + " is not available to this process (cpus " +
                                  format_cpu_list(available_) + "; see taskset, cgroups)");
    }
    return true;
  }
  std::vector<int> all_cpus() const {
    std::vector<int> v;
    for (const HostCpu &c : out_.topology.cpus) v.push_back(c.id);
    return v;
  }

  bool resolve_cpus() {
    std::vector<int> use = available_;
    if (use_ && !is_auto(use_)) {
      if (!cpu_list(use_, "use", use) || !check_cpus_exist(use_, "use", use)) return false;
      if (use.empty()) return problem(use_, "use: no cpu given");
    }
    if (reserve_ && !(reserve_->type == YAML_SCALAR_NODE && scalar(reserve_) == "none")) {
      if (!cpu_list(reserve_, "reserve", out_.reserved_cpus)) return false;
      for (int c : out_.reserved_cpus)
        if (!out_.topology.cpu(c))
          return problem(reserve_, "reserve: cpu " + std::to_string(c) + " does not exist (cpus " +
                                       format_cpu_list(all_cpus()) + ")");
    }
    for (int c : use)
      if (!std::binary_search(out_.reserved_cpus.begin(), out_.reserved_cpus.end(), c)) out_.usable_cpus.push_back(c);
    if (out_.usable_cpus.empty())
      return problem_or_file(reserve_ ? reserve_ : use_, "no cpu is left to use: every usable cpu (" +
                                                             format_cpu_list(use) + ") is reserved");
    if (housekeeping_ && !is_auto(housekeeping_)) {
      long c;
      if (!integer(housekeeping_, "housekeeping", 0, kMaxCpus - 1, c) ||
          !check_cpus_exist(housekeeping_, "housekeeping", {int(c)}))
        return false;
      out_.housekeeping_cpu = int(c);
    }
    return true;
  }

  bool resolve_devices() {
    std::set<std::string> names;
    for (const DeviceNodes &d : devices_) {
      ProfileDevice dev{scalar(d.name), -1, "the profile"};
      if (!names.insert(dev.name).second) return problem(d.name, "device '" + shown(dev.name) + "' is listed twice");
      if (is_auto(d.node)) {
        if (!out_.this_machine)
          return problem(d.node, "node: auto asks this machine's sysfs, but the profile describes another machine "
                                 "(topology is not auto): give the node number");
        dev.node = device_numa_node(env_.sysfs_root, dev.name, &dev.node_source);
        if (dev.node_source.empty())
          return problem(d.name, "node: auto needs a PCI address or an interface (af_packet:IFACE) to look up, not '" +
                                     shown(dev.name) + "'");
      } else {
        long n;
        if (!integer(d.node, "node", 0, 63, n)) return false;
        if (n >= out_.topology.node_count)
          return problem(d.node, "node: " + std::to_string(n) + " does not exist (the machine has " +
                                     std::to_string(out_.topology.node_count) + " node" +
                                     (out_.topology.node_count == 1 ? "" : "s") + ")");
        dev.node = int(n);
      }
      out_.devices.push_back(dev);
    }
    return true;
  }

  bool resolve_acquisition() {
    AcquisitionPolicy &a = out_.acquisition;
    if (a.mode != AcquisitionPolicy::Mode::Periodic) return true;
    if (!period_ || !runtime_)
      return problem(mode_, "mode: periodic needs a period and a runtime (e.g. period: 100us, runtime: 30us)");
    if (a.runtime_ns < kMinDeadlineRuntimeNs)
      return problem(runtime_, "runtime: at least 1024ns (the kernel's SCHED_DEADLINE minimum)");
    if (a.period_ns > kMaxDeadlinePeriodNs) return problem(period_, "period: at most 4s (the kernel's default limit)");
    if (a.runtime_ns > a.period_ns)
      return problem(runtime_, "runtime: " + shown(scalar(runtime_)) + " is longer than the period (" +
                                   shown(scalar(period_)) + ")");
    return true;
  }

  struct DeviceNodes {
    Node *entry, *name, *node;
  };

  std::string label_;
  yaml_document_t &doc_;
  const HostEnvironment &env_;
  HostProfile &out_;
  std::string msg_;
  std::vector<int> available_;  // cpus that exist and this process may use
  std::vector<std::string> eal_extra_;
  std::vector<DeviceNodes> devices_;
  Node *topology_ = nullptr, *memory_mb_ = nullptr, *use_ = nullptr, *reserve_ = nullptr, *housekeeping_ = nullptr;
  Node *mode_ = nullptr, *period_ = nullptr, *runtime_ = nullptr;
};

}  // namespace

int HostProfile::device_node(const std::string &device, std::string *why) const {
  std::string pci = device_pci_address(device), iface = device_interface(device);
  for (const ProfileDevice &d : devices)
    if (d.name == device || (!pci.empty() && device_pci_address(d.name) == pci) || (!iface.empty() && d.name == iface)) {
      *why = d.node_source;
      return d.node;
    }
  if (!this_machine) return -1;
  return device_numa_node(sysfs_root, device, why);
}

HostEnvironment HostEnvironment::this_process() {
  HostEnvironment env;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) env.affinity.push_back(c);
  return env;
}

std::string default_host_profile_path() {
  namespace fs = std::filesystem;
  std::error_code ec;
  // Never the working directory: a profile's EAL options can load any shared
  // object (-d), and a probe started as root in a directory others can
  // write would run what they left there. Both places are fixed at build time.
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  fs::path build_tree = SLUICE_BUILD_DIR;
  bool in_build_tree = !ec && std::mismatch(build_tree.begin(), build_tree.end(), exe.begin(), exe.end()).first ==
                                  build_tree.end();
  fs::path profile = in_build_tree ? fs::path(SLUICE_SOURCE_DIR "/configs/laptop.yaml")
                                   : fs::path(SLUICE_CONFIG_DIR "/laptop.yaml");
  return fs::exists(profile, ec) ? profile.string() : "";
}

namespace {

// libyaml's scanner does work in proportion to the nesting depth for every
// token (a 1 MiB profile of '[' took hours), and its loader builds the whole
// document. A first pass over the parser's events stops at the first
// collection nested deeper than any profile's (3 levels: the profile, cpus,
// use's list).
constexpr int kMaxProfileDepth = 16;

bool check_depth(const std::string &label, const std::string &yaml, std::string *error) {
  yaml_parser_t parser;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char *>(yaml.data()), yaml.size());
  int depth = 0;
  bool ok = true, done = false;
  while (ok && !done) {
    yaml_event_t event;
    if (!yaml_parser_parse(&parser, &event)) break;  // the loader reports it, as far as this pass got
    switch (event.type) {
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT:
        if (++depth > kMaxProfileDepth) {
          *error = label + ":" + std::to_string(event.start_mark.line + 1) + ":" +
                   std::to_string(event.start_mark.column + 1) + ": error: lists and mappings nested more than " +
                   std::to_string(kMaxProfileDepth) + " deep (a profile needs 3)";
          ok = false;
        }
        break;
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT: --depth; break;
      case YAML_DOCUMENT_END_EVENT:  // only the first document is read
      case YAML_STREAM_END_EVENT: done = true; break;
      default: break;
    }
    yaml_event_delete(&event);
  }
  yaml_parser_delete(&parser);
  return ok;
}

}  // namespace

bool parse_host_profile(const std::string &label, const std::string &yaml, const HostEnvironment &env,
                        HostProfile &out, std::string *error) {
  out = HostProfile{};
  out.path = label;
  if (!check_depth(label, yaml, error)) return false;
  yaml_parser_t parser;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char *>(yaml.data()), yaml.size());
  yaml_document_t doc;
  if (!yaml_parser_load(&parser, &doc)) {
    *error = label + ":" + std::to_string(parser.problem_mark.line + 1) + ":" +
             std::to_string(parser.problem_mark.column + 1) + ": error: " +
             (parser.problem ? parser.problem : "malformed YAML");
    yaml_parser_delete(&parser);
    return false;
  }
  bool ok = ProfileReader(label, doc, env, out).read(error);
  yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  if (ok && out.name.empty()) out.name = std::filesystem::path(label).stem().string();
  return ok;
}

bool load_host_profile(const std::string &path, const HostEnvironment &env, HostProfile &out, std::string *error) {
  // What is checked is what is read: the file's absolute path, links resolved.
  std::error_code ec;
  std::string resolved = std::filesystem::canonical(path, ec).string();
  if (ec) return *error = path + ": error: cannot read host profile: " + ec.message(), false;
  std::string text, why;
  if (!read_user_file(resolved, kMaxHostProfileBytes, text, &why)) return *error = path + ": error: " + why, false;
  if (why = untrusted_as_root(resolved); !why.empty()) {
    *error = path + ": error: refusing this host profile as root: " + why +
             " (its EAL options can load code: the file and its directories must be root's and writable only by root)";
    return false;
  }
  return parse_host_profile(path, text, env, out, error);
}

bool builtin_host_profile(const HostEnvironment &env, HostProfile &out, std::string *error) {
  return parse_host_profile("built-in laptop profile", "name: laptop\ncpus:\n  oversubscribe: true\n", env, out, error);
}

}  // namespace sluice
