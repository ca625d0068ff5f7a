// FlowTable: the per-lane flow cache that turns packets into flow records.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "engine/core/element_spec.hh"
#include "engine/flow/flow_cache.hh"
#include "engine/flow/flow_clock.hh"
#include "engine/runtime/element_runtime.hh"

namespace sluice::elements {

// The optional record fields a FlowTable node keeps (its `fields`).
FlowFieldSet kept_flow_fields(const Node &n);

// The run-time table; GCSlicer, in the same segment, expires its flows.
class FlowTableRuntime final : public RuntimeElement {
 public:
  FlowTableRuntime(const Node &n, RunContext &c);

  FlowCache &cache() { return *cache_; }
  // Packet time: the table's clock (UNIX ns, FlowClock), where its latest
  // packet was dated; and when, on the wall clock (CLOCK_MONOTONIC ns), the
  // last batch came.
  uint64_t now_ns() const { return clock_.now(); }
  uint64_t last_batch_wall_ns() const { return last_wall_ns_; }
  // Whether the lane's input is live (its time must advance while idle).
  bool live() const { return live_; }

  void prepare() override;
  void flush() override;
  Change prepare_reconfigure(const Node &next) override;
  void adopt_state(RuntimeElement &old) override;
  void report(std::vector<std::string> &lines) const override;
  void event_counts(std::vector<std::pair<std::string, uint64_t>> &out) const override;
  // Handlers (flow_table_spec).
  size_t size() const;
  size_t active() const;
  double load() const;
  size_t peak() const;
  uint64_t created() const;
  uint64_t evicted() const;
  std::string ended() const;
  std::string clock() const;
  std::string idle_timeout() const;
  std::string active_timeout() const;
  HandlerChange prepare_idle_timeout(const std::string &value) { return prepare_timeout(true, value); }
  HandlerChange prepare_active_timeout(const std::string &value) { return prepare_timeout(false, value); }
  void report_metrics(ElementMetrics &out) const override;
  void jit_constants(std::vector<ConstantBytes> &out) const override;
  size_t flow_slots() const override { return cache_->slots(); }
  void peek_flows(size_t begin, size_t end, const std::function<void(const FlowRecord &)> &fn) const override {
    cache_->peek(begin, end, fn);
  }

 public:
  void push(int port, PacketBatch &batch) override;

 private:
  std::unique_ptr<FlowCache> cache_;
  FlowBatch out_;
  // Records of flows that found no room when a reload moved them in: they
  // leave on this lane's thread, with the next batch or at the end.
  std::vector<FlowRecord> adopted_evictions_;
  void emit_adopted_evictions();
  HandlerChange prepare_timeout(bool idle, const std::string &value);
  void count_dating(FlowClock::Dating how) { dated_[int(how)].add(); }
  // "3 packets behind the clock, ..." for the summary; empty when every
  // packet was dated at its own time.
  std::string dating_text() const;
  FlowClock clock_;
  Counter dated_[FlowClock::kDatings];  // packets by how the clock dated them (OnTime not counted)
  uint64_t last_wall_ns_ = 0;
  size_t peak_active_ = 0;  // most flows in the table at once (after a batch)
  bool live_ = false;
  // Drop reasons: of a packet without a valid IP header, by its parse
  // status ("not ip", "malformed ip: ..."); of one the table had no room for.
  int no_ip_header_[kParseStatusCount] = {};
  int full_ = -1, probe_limit_ = -1;
};

}  // namespace sluice::elements
