// The commands a running probe answers on its control socket (stats, read,
// write, handlers, flows, plan), on top of a ControlServer, and the live
// statistics they share with the metrics endpoint.
//
// Counters are single-writer relaxed atomics and are read from here
// directly; anything else an element holds (a flow table, a histogram, a
// collector link) is read or changed on the element's own segment thread,
// between two batches, through SegmentRunner::call.
#pragma once
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "engine/control/control_server.hh"
#include "engine/runtime/runtime.hh"

namespace sluice {

// How long a control request waits for a segment to reach a batch boundary.
inline constexpr uint64_t kSegmentCallTimeoutNs = 2'000'000'000ull;

// Runs `fn` on the thread of segment `segment` between two batches; false
// when it did not get there within kSegmentCallTimeoutNs.
bool run_on_segment(const Runtime &rt, int segment, const std::function<void()> &fn);

// The name of an element in the .pipe file (`ft` for the instances `ft#0`,
// `ft#1`), and its lane as a label ("0", "shared").
std::string element_base_name(const Runtime &rt, const RuntimeElement &e);
std::string lane_label(int lane);

class ProbeControl {
 public:
  // `config`: the file the probe runs (for `plan`).
  ProbeControl(Runtime &rt, std::string config);
  // A reload switched the probe to another file.
  void set_config(std::string config) { config_ = std::move(config); }

  // stats, read, write, handlers, flows, plan.
  void add_commands(ControlServer &server);

  // What the commands answer.
  std::string stats_text() const;
  std::string stats_json() const;
  std::string read(const std::string &target) const;  // ELEMENT.HANDLER; throws HandlerError
  void write(const std::string &target, const std::string &value);
  std::string handlers(const std::string &element) const;  // "" : every element
  std::string top_flows(size_t n) const;
  std::string plan() const;

 private:
  // The instances ELEMENT names: one by its instance name (`ft#1`, a shared
  // `exp`), or every lane's (`ft`). Throws HandlerError when none.
  std::vector<RuntimeElement *> instances(const std::string &element) const;
  // Each element's report() lines, read on its segment thread.
  std::vector<std::vector<std::string>> report_lines() const;

  Runtime &rt_;
  std::string config_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace sluice
