#include "engine/placement/placement.hh"

#include <algorithm>
#include <map>
#include <set>

namespace sluice {

std::string segment_cpus_text(const SegmentPlacement &sp) {
  return sp.floats_over.empty() ? "cpu " + std::to_string(sp.cpu) : "cpus " + format_cpu_list(sp.floats_over);
}

std::vector<int> Placement::segments_on(int cpu) const {
  std::vector<int> out;
  for (const SegmentPlacement &s : segments)
    if (s.cpu == cpu) out.push_back(s.segment);
  return out;
}

namespace {

std::string plural(size_t n, const std::string &word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

std::string join_ints(const std::vector<int> &v) {
  std::string out;
  for (int i : v) out += (out.empty() ? "" : ", ") + std::to_string(i);
  return out;
}

// What one lane asks of its node: its segments, the acquisition first.
struct LaneDemand {
  int lane = -1;
  int source = -1;  // element index of the lane's source
  int node = 0;
  std::vector<int> segments;
};

struct SharedDemand {
  std::vector<int> segments;
  int preferred_node = 0;  // where most lanes run
};

// Assigns cpus to the segments of the lanes and to the shared segments,
// node by node, as the profile allows. Segments that find no cpu are counted
// as missing, per node; the caller turns that into an error (and runs the
// assigner again on variations of the demand, for the hints).
class CpuAssigner {
 public:
  CpuAssigner(const HostProfile &host, size_t segment_count) : host_(host) {
    sites_.resize(segment_count);
    missing_.assign(size_t(host.topology.node_count), 0);
    for (int c : host.usable_cpus) state_[c] = State::Free;
    state_.erase(host.housekeeping_cpu);  // the profile's housekeeping cpu is for shared elements only
    // The node's usable cpus in the order they are handed out: by id, cpu 0
    // last (the system's interrupts and timers run there).
    candidates_.resize(size_t(host.topology.node_count));
    for (int node = 0; node < host.topology.node_count; ++node) {
      for (int c : host.topology.node_cpus(node))
        if (state_.count(c)) candidates_[size_t(node)].push_back(c);
      std::stable_partition(candidates_[size_t(node)].begin(), candidates_[size_t(node)].end(),
                            [](int c) { return c != 0; });
    }
    for (const HostCpu &c : host.topology.cpus) siblings_[c.id] = host.topology.siblings(c.id);
  }

  void assign(const std::vector<LaneDemand> &lanes, const SharedDemand &shared) {
    // Acquisition first: they are the ones that must not wait.
    for (const LaneDemand &l : lanes) place_acquisition(l);
    for (const LaneDemand &l : lanes)
      for (size_t k = 1; k < l.segments.size(); ++k) place_processing(l, l.segments[k], k == 1);
    if (!shared.segments.empty()) place_shared(shared);
  }

  // The placements, each segment placed alone told who came to share its cpu.
  std::vector<SegmentPlacement> sites() const {
    std::vector<SegmentPlacement> out = sites_;
    for (const auto &[seg, squeezed] : later_)
      out[size_t(seg)].reason += "; later shared with segment" + std::string(squeezed.size() == 1 ? " " : "s ") +
                                 join_ints(squeezed) + " (no free cpu was left)";
    for (SegmentPlacement &s : out)
      s.shares_cpu = s.cpu >= 0 && load_.count(s.cpu) && load_.at(s.cpu) > 1;
    return out;
  }
  int missing(int node) const { return missing_[size_t(node)]; }
  int missing_total() const {
    int n = housekeeping_missing_;
    for (int m : missing_) n += m;
    return n;
  }
  bool housekeeping_missing() const { return housekeeping_missing_ > 0; }
  int housekeeping_cpu() const { return housekeeping_; }
  // Segments that share a cpu because none was free (oversubscribe).
  const std::set<int> &squeezed() const { return squeezed_; }
  int free_cpus(int node) const {
    int n = 0;
    for (int c : host_.topology.node_cpus(node)) n += is_free(c);
    return n;
  }

 private:
  enum class State { Unusable, Free, Taken, Kept, Idle };

  State state(int cpu) const {
    auto it = state_.find(cpu);
    return it == state_.end() ? State::Unusable : it->second;
  }
  bool is_free(int cpu) const { return state(cpu) == State::Free; }

  const std::vector<int> &candidates(int node) const { return candidates_[size_t(node)]; }
  const std::vector<int> &siblings(int cpu) const { return siblings_.at(cpu); }

  // A free cpu whose SMT siblings are free too (or not usable at all).
  int whole_core(int node) const {
    for (int c : candidates(node)) {
      if (!is_free(c)) continue;
      bool whole = true;
      for (int s : siblings(c)) whole &= is_free(s) || state(s) == State::Unusable;
      if (whole) return c;
    }
    return -1;
  }
  int any_thread(int node) const {
    for (int c : candidates(node))
      if (is_free(c)) return c;
    return -1;
  }

  std::string cpu0_note(int cpu) const {
    return cpu == 0 ? "; cpu 0 is otherwise avoided (the system's interrupts and timers run there): no other was free"
                    : "";
  }

  void take(int segment, int lane, int node, int cpu, std::string reason) {
    state_[cpu] = State::Taken;
    load_[cpu]++;
    sites_[size_t(segment)] = SegmentPlacement{segment, lane, node, cpu, false, reason + cpu0_note(cpu), {}};
  }
  // Takes a whole core: its siblings are kept for the lane (smt: share) or
  // left idle (smt: separate). Returns the siblings.
  std::vector<int> take_core(int cpu) {
    std::vector<int> sib;
    for (int s : siblings(cpu))
      if (is_free(s)) {
        state_[s] = host_.smt_share ? State::Kept : State::Idle;
        sib.push_back(s);
      }
    return sib;
  }

  // No free cpu: share the least loaded one of the node (oversubscribe), the
  // lane's own cpus first on a tie, then any but cpu 0. A sibling kept for a
  // lane's processing counts as loaded already.
  bool share(int segment, int lane, int node, const std::set<int> &own) {
    int best = -1;
    auto load = [&](int c) { return load_[c] + (state(c) == State::Kept); };
    auto better = [&](int c, int b) {
      if (load(c) != load(b)) return load(c) < load(b);
      if (own.count(c) != own.count(b)) return own.count(c) > 0;
      if ((c == 0) != (b == 0)) return b == 0;
      return c < b;
    };
    for (int c : candidates(node))
      if (best < 0 || better(c, best)) best = c;
    if (best < 0) return false;
    std::vector<int> on_it;
    for (const SegmentPlacement &s : sites_)
      if (s.cpu == best && s.segment >= 0) {
        on_it.push_back(s.segment);
        if (!squeezed_.count(s.segment)) later_[s.segment].push_back(segment);
      }
    std::string with = join_ints(on_it);
    squeezed_.insert(segment);
    load_[best]++;
    sites_[size_t(segment)] = SegmentPlacement{
        segment, lane, node, best, false,
        "no free cpu left on node " + std::to_string(node) + ": shares cpu " + std::to_string(best) +
            (with.empty() ? "" : " with segment" + std::string(with.find(',') == std::string::npos ? " " : "s ") + with) +
            " (oversubscribe: true)",
        {}};
    return true;
  }

  // No cpu left for the shared elements (oversubscribe): they run on every
  // usable cpu of the node, not pinned, in the time the segments there
  // leave. Pinned beside one lane, they held that lane back while the other
  // lanes' cpus had time to spare (two lanes on two cpus in memory: 5% more
  // packets a second unpinned; docs/performance.md).
  bool float_shared(int segment, int node) {
    const std::vector<int> &cpus = candidates(node);
    if (cpus.empty()) return false;
    int least = cpus.front();
    for (int c : cpus)
      if (load_[c] < load_[least] || (load_[c] == load_[least] && least == 0 && c != 0)) least = c;
    std::vector<int> beside;
    for (const SegmentPlacement &s : sites_)
      if (s.segment >= 0 && std::find(cpus.begin(), cpus.end(), s.cpu) != cpus.end()) {
        beside.push_back(s.segment);
        if (!squeezed_.count(s.segment)) later_[s.segment].push_back(segment);
      }
    std::sort(beside.begin(), beside.end());
    squeezed_.insert(segment);
    for (int c : cpus) load_[c]++;
    std::vector<int> over(cpus.begin(), cpus.end());
    std::sort(over.begin(), over.end());
    sites_[size_t(segment)] = SegmentPlacement{
        segment, -1, node, least, false,
        "no free cpu left on node " + std::to_string(node) + ": runs on cpus " + format_cpu_list(over) +
            (beside.empty() ? "" : " beside segment" + std::string(beside.size() == 1 ? " " : "s ") + join_ints(beside)) +
            ", not pinned, in the time they leave (oversubscribe: true)",
        over};
    return true;
  }

  void place_acquisition(const LaneDemand &l) {
    int seg = l.segments.front();
    std::string where = " on node " + std::to_string(l.node) + " (the lane's node)";
    if (int c = whole_core(l.node); c >= 0) {
      bool keep = l.segments.size() > 1;
      std::vector<int> sib = take_core(c);
      std::string reason = "dedicated cpu" + where;
      if (!sib.empty() && host_.smt_share && keep)
        reason = "dedicated core" + where + "; its SMT sibling cpu " + format_cpu_list(sib) +
                 " is kept for the lane's processing";
      else if (!sib.empty() && !host_.smt_share)
        reason = "dedicated core" + where + "; its SMT sibling cpu " + format_cpu_list(sib) +
                 " stays idle (smt: separate)";
      if (!keep && host_.smt_share)
        for (int s : sib) state_[s] = State::Free;  // the lane has nothing to run there
      if (keep && host_.smt_share) kept_[l.lane] = sib;
      take(seg, l.lane, l.node, c, reason);
      return;
    }
    if (int c = host_.smt_share ? any_thread(l.node) : -1; c >= 0) {
      take(seg, l.lane, l.node, c,
           "dedicated cpu" + where + "; no whole core was left, its SMT sibling runs another segment");
      return;
    }
    if (host_.oversubscribe && share(seg, l.lane, l.node, {})) return;
    missing_[size_t(l.node)]++;
  }

  void place_processing(const LaneDemand &l, int seg, bool first) {
    int acq_cpu = sites_[size_t(l.segments.front())].cpu;
    std::string node = "node " + std::to_string(l.node);
    if (first && acq_cpu >= 0)
      for (int s : kept_[l.lane])
        if (state(s) == State::Kept) {
          take(seg, l.lane, l.node, s,
               "SMT sibling of the acquisition cpu " + std::to_string(acq_cpu) +
                   " (smt: share): the lane's packets stay in that core's caches");
          return;
        }
    if (host_.smt_share || !host_.topology.has_smt()) {
      if (int c = any_thread(l.node); c >= 0) {
        std::string why = !host_.topology.has_smt() ? "a cpu of its own on " + node + ", the lane's node"
                          : first ? "a cpu of its own on " + node + " (the acquisition cpu has no free sibling)"
                                  : "a cpu of its own on " + node + ", the lane's node";
        take(seg, l.lane, l.node, c, why);
        return;
      }
    } else if (int c = whole_core(l.node); c >= 0) {
      std::vector<int> sib = take_core(c);
      take(seg, l.lane, l.node, c,
           "a core of its own on " + node + " (smt: separate; sibling cpu " + format_cpu_list(sib) + " stays idle)");
      return;
    }
    std::set<int> own;
    for (int s : l.segments)
      if (sites_[size_t(s)].cpu >= 0) own.insert(sites_[size_t(s)].cpu);
    if (host_.oversubscribe && share(seg, l.lane, l.node, own)) return;
    missing_[size_t(l.node)]++;
  }

  void place_shared(const SharedDemand &shared) {
    // Lanes done: what they kept and did not use is free for the housekeeping.
    for (auto &[cpu, st] : state_)
      if (st == State::Kept) st = State::Free;
    int first = shared.segments.front();
    int n = host_.topology.node_count;
    std::string most = n > 1 ? ", on node " + std::to_string(shared.preferred_node) + " where most lanes run" : "";
    const char *what = "housekeeping cpu for the shared elements (exporters, merges of all lanes)";
    if (host_.housekeeping_cpu >= 0) {
      int c = host_.housekeeping_cpu;
      load_[c]++;
      sites_[size_t(first)] = SegmentPlacement{first, -1, host_.topology.cpu(c)->node, c, false,
                                               std::string(what) + ": cpu " + std::to_string(c) +
                                                   " as the profile sets it (cpus.housekeeping)",
                                               {}};
      housekeeping_ = c;
    } else {
      // the preferred node first, then the others
      std::vector<int> nodes = {shared.preferred_node};
      for (int k = 0; k < n; ++k)
        if (k != shared.preferred_node) nodes.push_back(k);
      for (int node : nodes) {
        int c = host_.smt_share || !host_.topology.has_smt() ? any_thread(node) : whole_core(node);
        if (c < 0) continue;
        if (!host_.smt_share) take_core(c);
        take(first, -1, node, c,
             std::string(what) + (node == shared.preferred_node ? most : ", on node " + std::to_string(node) +
                                                                            " (node " + std::to_string(shared.preferred_node) +
                                                                            " has no free cpu)"));
        housekeeping_ = c;
        break;
      }
      if (housekeeping_ < 0 && host_.oversubscribe && float_shared(first, shared.preferred_node))
        housekeeping_ = sites_[size_t(first)].cpu;
      if (housekeeping_ < 0) {
        housekeeping_missing_ = 1;
        return;
      }
    }
    for (size_t k = 1; k < shared.segments.size(); ++k) {
      int seg = shared.segments[k];
      const SegmentPlacement &with = sites_[size_t(first)];
      if (with.floats_over.empty()) load_[housekeeping_]++;
      for (int c : with.floats_over) load_[c]++;
      sites_[size_t(seg)] = SegmentPlacement{
          seg, -1, with.node, housekeeping_, false,
          "packed with segment " + std::to_string(first) +
              (with.floats_over.empty() ? " on the housekeeping cpu " + std::to_string(housekeeping_)
                                        : " on cpus " + format_cpu_list(with.floats_over)) +
              ": shared elements are light, they need no cpu of their own",
          with.floats_over};
    }
  }

  const HostProfile &host_;
  std::map<int, State> state_;
  std::map<int, int> load_;  // segments per cpu
  std::map<int, std::vector<int>> kept_;  // lane -> siblings kept for its processing
  std::vector<std::vector<int>> candidates_;  // per node
  std::map<int, std::vector<int>> siblings_;
  std::vector<SegmentPlacement> sites_;
  std::vector<int> missing_;  // per node
  int housekeeping_missing_ = 0;
  int housekeeping_ = -1;
  std::set<int> squeezed_;
  std::map<int, std::vector<int>> later_;  // segment placed alone -> segments squeezed onto its cpu later
};

class Planner {
 public:
  Planner(const LaneGraph &lg, const HostProfile &host, Placement &out) : lg_(lg), host_(host), out_(out) {}

  bool run(std::string *error) {
    out_ = Placement{};
    out_.host = host_.name;
    out_.this_machine = host_.this_machine;
    out_.topology = host_.topology;
    out_.usable_cpus = host_.usable_cpus;
    out_.reserved_cpus = host_.reserved_cpus;
    out_.acquisition = host_.acquisition;
    out_.hugepages = host_.hugepages;
    choose_nodes();
    CpuAssigner cpus(host_, lg_.segments.size());
    cpus.assign(demands_, shared_);
    if (cpus.missing_total() > 0) {
      *error = explain_missing(cpus);
      return false;
    }
    out_.segments = cpus.sites();
    out_.housekeeping_cpu = cpus.housekeeping_cpu();
    write_notes(cpus);
    return true;
  }

 private:
  std::string device_of(int source) const {
    for (const Node &n : lg_.nodes)
      if (n.element == source && n.spec->needs.device) return n.spec->needs.device(n);
    return "";
  }

  int usable_on(int node) const {
    int n = 0;
    for (int c : host_.usable_cpus) n += host_.topology.cpu(c)->node == node;
    return n;
  }

  // Each source's lanes go to its device's node; sources without one (files,
  // generators) to the node with the most usable cpus not yet promised.
  void choose_nodes() {
    const ElementGraph &g = *lg_.graph;
    int nodes = host_.topology.node_count;
    std::vector<int> promised(size_t(nodes), 0);  // segments headed for each node
    std::map<int, std::pair<int, std::string>> node_of_source;  // source -> node, reason
    std::vector<int> order;  // sources, in lane order
    for (const Lane &l : lg_.lanes)
      if (std::find(order.begin(), order.end(), l.source) == order.end()) order.push_back(l.source);
    for (int s : order) {
      std::string dev = device_of(s), why;
      int node = dev.empty() ? -1 : host_.device_node(dev, &why);
      if (node >= 0 && node < nodes) {
        node_of_source[s] = {node, "device " + dev + " is on node " + std::to_string(node) + " (" + why + ")"};
        continue;
      }
      std::string what = dev.empty() ? "'" + g.elements[s].name + "' generates its packets"
                         : device_pci_address(dev).empty() && device_interface(dev).empty()
                             ? "device " + dev + " is not a NIC (no NUMA node)"
                             : "the NUMA node of device " + dev + " is unknown (" +
                                   (why.empty() ? "not in the profile" : "none in " + why) + ")";
      node_of_source[s] = {-1, what};
    }
    auto segments_of = [&](int source) {
      int n = 0;
      for (const Lane &l : lg_.lanes)
        if (l.source == source) n += int(l.segments.size());
      return n;
    };
    for (auto &[s, nr] : node_of_source)
      if (nr.first >= 0) promised[size_t(nr.first)] += segments_of(s);
    for (int s : order) {
      auto &[node, reason] = node_of_source[s];
      if (node >= 0) continue;
      int best = 0;
      for (int k = 1; k < nodes; ++k)
        if (usable_on(k) - promised[size_t(k)] > usable_on(best) - promised[size_t(best)]) best = k;
      node = best;
      promised[size_t(best)] += segments_of(s);
      reason += nodes == 1 ? ": node 0, the only one" : ": node " + std::to_string(best) + ", the one with the most free cpus";
    }
    std::vector<int> lanes_on(size_t(nodes), 0);
    for (const Lane &l : lg_.lanes) {
      auto &[node, reason] = node_of_source[l.source];
      out_.lanes.push_back(LanePlacement{l.id, node, device_of(l.source), reason});
      demands_.push_back(LaneDemand{l.id, l.source, node, l.segments});
      lanes_on[size_t(node)]++;
    }
    for (const Segment &s : lg_.segments)
      if (s.lane < 0) shared_.segments.push_back(s.id);
    shared_.preferred_node = int(std::max_element(lanes_on.begin(), lanes_on.end()) - lanes_on.begin());
  }

  // How many of a source's lanes would fit on their node, all else equal.
  int lanes_that_fit(int source) const {
    std::vector<LaneDemand> others, mine;
    for (const LaneDemand &d : demands_) (d.source == source ? mine : others).push_back(d);
    for (int k = int(mine.size()) - 1; k > 0; --k) {
      std::vector<LaneDemand> trial = others;
      trial.insert(trial.end(), mine.begin(), mine.begin() + k);
      CpuAssigner a(host_, lg_.segments.size());
      a.assign(trial, shared_);
      if (a.missing(mine.front().node) == 0) return k;
    }
    return 0;
  }

  int missing_with(const HostProfile &variant) const {
    CpuAssigner a(variant, lg_.segments.size());
    a.assign(demands_, shared_);
    return a.missing_total();
  }

  std::string explain_missing(const CpuAssigner &cpus) const {
    const ElementGraph &g = *lg_.graph;
    int total = cpus.missing_total();
    std::string msg = "host profile '" + host_.name + "' cannot hold this graph: " + plural(size_t(total), "cpu") +
                      " missing (" + (host_.smt_share ? "acquisition and processing" : "every segment a core of its own") +
                      ", shared elements on a housekeeping cpu, reserved cpus" +
                      (host_.reserved_cpus.empty() ? "" : " " + format_cpu_list(host_.reserved_cpus)) + " left alone)";
    std::vector<std::string> hints;
    for (int node = 0; node < host_.topology.node_count; ++node) {
      int miss = cpus.missing(node);
      if (!miss) continue;
      std::vector<int> usable;
      for (int c : host_.usable_cpus)
        if (host_.topology.cpu(c)->node == node) usable.push_back(c);
      int lanes = 0, segs = 0;
      std::set<int> sources;
      for (const LaneDemand &d : demands_)
        if (d.node == node) ++lanes, segs += int(d.segments.size()), sources.insert(d.source);
      msg += "\n  node " + std::to_string(node) + ": " + plural(size_t(lanes), "lane") + " with " +
             plural(size_t(segs), "segment") + ", " + std::to_string(usable.size()) + " usable cpu" +
             (usable.size() == 1 ? "" : "s") + (usable.empty() ? "" : " (" + format_cpu_list(usable) + ")") + ": " +
             std::to_string(miss) + " missing";
      if (usable.empty())
        hints.push_back("cpus of node " + std::to_string(node) + " to use (cpus.use, cpus.reserve)");
      else
        for (int s : sources)
          if (int fit = lanes_that_fit(s); fit > 0)
            hints.push_back("fewer queues: " + plural(size_t(fit), "lane") + " of '" + g.elements[s].name + "' " +
                            (fit == 1 ? "fits" : "fit") + " on node " + std::to_string(node) + " (queues " +
                            std::to_string(fit) + ")");
      for (int other = 0; other < host_.topology.node_count; ++other)
        if (other != node && cpus.free_cpus(other) > 0)
          hints.push_back("another node: node " + std::to_string(other) + " has " +
                          plural(size_t(cpus.free_cpus(other)), "free cpu") + " (a device in a slot of node " +
                          std::to_string(other) + ", or a second source there)");
    }
    if (cpus.housekeeping_missing())
      msg += "\n  the shared elements have no housekeeping cpu: 1 missing";
    if (cpus.housekeeping_missing() && !host_.reserved_cpus.empty())
      hints.push_back("a housekeeping cpu among the reserved ones (cpus.housekeeping: " +
                      std::to_string(host_.reserved_cpus.front()) + ")");
    if (!host_.smt_share && host_.topology.has_smt()) {
      HostProfile shared = host_;
      shared.smt_share = true;
      int m = missing_with(shared);
      hints.push_back("allow SMT sharing (cpus.smt: share): " +
                      (m ? std::to_string(m) + " would still be missing" : std::string("then it fits")));
    }
    if (!host_.reserved_cpus.empty()) hints.push_back("fewer reserved cpus (cpus.reserve)");
    hints.push_back("let segments share cpus (cpus.oversubscribe: true): it runs, slower");
    msg += "\n  what could change:";
    for (const std::string &h : hints) msg += "\n    - " + h;
    return msg;
  }

  void write_notes(const CpuAssigner &cpus) {
    if (!host_.this_machine)
      out_.notes.push_back("the profile describes another machine: this plan can be printed here, not run");
    if (!cpus.squeezed().empty())
      out_.notes.push_back(plural(lg_.segments.size(), "segment") + " on " +
                           plural(host_.usable_cpus.size(), "usable cpu") +
                           ": some share a cpu (cpus.oversubscribe: true); they take turns, so lanes run slower "
                           "than on cpus of their own");
    if (!host_.topology.has_smt()) out_.notes.push_back("no SMT siblings on this machine: one thread per core");
    if (!host_.hugepages)
      out_.notes.push_back("memory: ordinary pages (hugepages: false, --no-huge): pools and rings on the lane's node "
                           "where DPDK has memory there; flow tables on the node of the lane's pinned thread, "
                           "which touches them first");
    else if (!host_.node_memory_mb.empty())
      out_.notes.push_back("memory: hugepages as the profile reserves them per node (--socket-mem)");
    else
      out_.notes.push_back("memory: hugepages, on each node as much as its lanes need (--socket-mem, set by the run)");
    if (host_.acquisition.mode == AcquisitionPolicy::Mode::Periodic)
      out_.notes.push_back(
          "acquisition: periodic, SCHED_DEADLINE runtime " + std::to_string(host_.acquisition.runtime_ns / 1000) +
          "us every " + std::to_string(host_.acquisition.period_ns / 1000) +
          "us; the kernel takes a pinned thread only in an exclusive cpuset, else the thread keeps the deadline "
          "and runs where the kernel puts it; where it refuses, the run polls and says so");
    else
      out_.notes.push_back("acquisition: busy polling (acquisition threads spin on their cpus)");
  }

  const LaneGraph &lg_;
  const HostProfile &host_;
  Placement &out_;
  std::vector<LaneDemand> demands_;
  SharedDemand shared_;
};

}  // namespace

bool place_lanes(const LaneGraph &lg, const HostProfile &host, Placement &out, std::string *error) {
  return Planner(lg, host, out).run(error);
}

}  // namespace sluice
