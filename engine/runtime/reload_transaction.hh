// A hot reload as a transaction: the running graph replaced by another,
// state kept (DESIGN §9, docs/reload.md). Runtime::reload runs the phases in
// order; every phase before switch_over() may fail, and a transaction that
// did not switch rolls back in its destructor, leaving the old graph running
// as it was. The switch allocates nothing and cannot fail.
//
//   plan()            what happens to each element (engine/reload), or why not
//   make_instances()  instances for migrated and added elements
//   allocate()        the new segments' runners and channels (rings), and
//                     their threads, waiting behind a gate
//   stop()            every segment stops between two batches, upstream first;
//                     channels the new graph keeps stay filled, the others
//                     are drained through the old graph
//   prepare()         new instances prepared (files, filters), the wiring of
//                     kept instances staged, live argument changes and links
//                     to other instances prepared
//   switch_over()     removed elements hand on what they hold through the
//                     old wiring, the old threads end, kept instances take
//                     their new wiring and changes, the gates open; replaced
//                     instances go to RetiredElements
//   measure_pauses()  each lane's pause, from its acquisition's stop to its
//                     new acquisition loop
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/graph_builder.hh"
#include "engine/runtime/runtime.hh"

namespace sluice {

class ReloadTransaction {
 public:
  ReloadTransaction(Runtime &rt, std::shared_ptr<const CompiledPipe> next);
  ~ReloadTransaction();  // rolls back unless switched
  ReloadTransaction(const ReloadTransaction &) = delete;
  ReloadTransaction &operator=(const ReloadTransaction &) = delete;

  bool plan(bool dry_run);
  bool make_instances();
  bool allocate();
  bool stop();
  bool prepare();
  void switch_over();
  void measure_pauses();

  ReloadOutcome &outcome() { return out_; }

 private:
  bool fail(std::string why);
  void resume_old_graph();
  size_t old_instance(int old_element, int lane) const;

  Runtime &rt_;
  std::shared_ptr<const CompiledPipe> old_pipe_, next_;  // held: old_lg_ and new_lg_ point into them
  const LaneGraph &old_lg_;
  const LaneGraph &new_lg_;
  ReloadOutcome out_;
  bool dry_run_ = false;
  bool switched_ = false;

  // make_instances()
  std::vector<const ReloadStep *> step_of_;   // by new element
  std::vector<bool> retiring_element_;        // by old element: removed or migrated
  std::vector<RuntimeElement *> inst_;        // by new node
  std::vector<size_t> kept_from_;             // by new node: index in the running elements, or SIZE_MAX
  std::vector<RuntimeElement *> predecessor_; // by new node: a migrated instance's old one
  std::vector<std::unique_ptr<RuntimeElement>> made_;
  std::vector<RuntimeElement *> flush_at_switch_;
  KeptChannels kept_channels_;
  std::vector<const Channel *> keep_channels_;

  // allocate() .. prepare()
  SegmentSet set_;
  std::vector<std::function<void()>> at_switch_;  // channel settings, live changes, links

  // stop(): the stopped segments' jobs wait for a verdict.
  enum class Verdict { Wait, Resume, Switch };
  struct Stop {
    std::mutex m;
    std::condition_variable cv;
    Verdict verdict = Verdict::Wait;
    std::vector<char> stopped, flushed, failed;
    std::vector<uint64_t> stopped_at_ns;
  } stop_;
  std::vector<std::thread> callers_;
  std::unique_lock<std::shared_mutex> structure_;
  void release(Verdict v);

  // prepare(): the context as it was, for a rollback.
  bool context_changed_ = false;
  const LaneGraph *old_lanes_ = nullptr;
  std::vector<RuntimeElement *> old_instances_;
  std::shared_ptr<const Placement> old_placement_;
  std::vector<std::pair<std::string, std::string>> old_files_;
};

}  // namespace sluice
