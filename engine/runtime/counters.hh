// Statistics counters written by one data-plane thread and read by others
// (the status line, the summary, later the control socket). A relaxed load
// and store instead of an atomic add: a single writer needs no locked
// instruction, and readers see a recent value without tearing.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice {

class Counter {
 public:
  void add(uint64_t n = 1) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// What an element did with the packets it was given. For every element, at
// the end of a run: in + copies = out + absorbed + dropped (summed over
// reasons). `absorbed` are packets that end here by design (Discard,
// PcapSink, a flow table); drops are counted by reason. The same for flow
// records: records_in + records_made + records_copies = records_out +
// records_absorbed + records lost (by reason).
struct ElementCounters {
  static constexpr int kMaxReasons = 8;
  Counter in, out, absorbed, copies;
  Counter records_in, records_out;  // flows streams: flow records
  Counter records_made;             // records made here (a flow table's, its GCSlicer's expirations)
  Counter records_copies;           // extra records made by fan-out
  Counter records_absorbed;         // records that end here (exported, written)
  Counter write_errors;             // failed writes (FlowLog, PcapSink); what they lost is dropped by reason
  Counter in_bytes;
  Counter drops[kMaxReasons];
  std::vector<std::string> reasons;  // names of drops[i], fixed before the run
  std::vector<bool> of_records;      // drops[i] counts flow records, not packets

  // Index for a drop reason, added on first use (setup time only).
  int reason(const std::string &name, bool records = false) {
    for (size_t i = 0; i < reasons.size(); ++i)
      if (reasons[i] == name && of_records[i] == records) return int(i);
    reasons.push_back(name);
    of_records.push_back(records);
    return int(reasons.size()) - 1;
  }
  // Packets dropped, over all reasons.
  uint64_t dropped() const {
    uint64_t d = 0;
    for (size_t i = 0; i < reasons.size(); ++i) d += of_records[i] ? 0 : drops[i].get();
    return d;
  }
  // Flow records lost, over all reasons.
  uint64_t records_dropped() const {
    uint64_t d = 0;
    for (size_t i = 0; i < reasons.size(); ++i) d += of_records[i] ? drops[i].get() : 0;
    return d;
  }
};

}  // namespace sluice
