// Statistics counters written by one data-plane thread and read by others
// (the status line, the summary, later the control socket). A relaxed load
// and store instead of an atomic add: a single writer needs no locked
// instruction, and readers see a recent value without tearing.
#pragma once
#include <atomic>
#include <cstdint>
#include <stdexcept>
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
  static constexpr int kMaxReasons = 16;
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
    if (reasons.size() == kMaxReasons) throw std::length_error("more than 16 drop reasons: '" + name + "'");
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

// The counters' values at one moment, as plain numbers: what the summary,
// its JSON and the metrics print, and what stays of an instance a reload
// replaced once it is released. add() sums another instance's into these
// (drops matched by reason).
struct CounterValues {
  uint64_t in = 0, out = 0, absorbed = 0, copies = 0;
  uint64_t records_in = 0, records_out = 0, records_absorbed = 0, in_bytes = 0;
  uint64_t records_made = 0, records_copies = 0, write_errors = 0;
  struct Drop {
    std::string reason;
    bool of_records;
    uint64_t count;
  };
  std::vector<Drop> drops;

  CounterValues() = default;
  explicit CounterValues(const ElementCounters &c) { add(c); }
  void add(const ElementCounters &c) {
    in += c.in.get(), out += c.out.get(), absorbed += c.absorbed.get(), copies += c.copies.get();
    records_in += c.records_in.get(), records_out += c.records_out.get();
    records_absorbed += c.records_absorbed.get(), in_bytes += c.in_bytes.get();
    records_made += c.records_made.get(), records_copies += c.records_copies.get();
    write_errors += c.write_errors.get();
    for (size_t r = 0; r < c.reasons.size(); ++r) add_drop(c.reasons[r], c.of_records[r], c.drops[r].get());
  }
  void add(const CounterValues &v) {
    in += v.in, out += v.out, absorbed += v.absorbed, copies += v.copies;
    records_in += v.records_in, records_out += v.records_out;
    records_absorbed += v.records_absorbed, in_bytes += v.in_bytes;
    records_made += v.records_made, records_copies += v.records_copies, write_errors += v.write_errors;
    for (const Drop &d : v.drops) add_drop(d.reason, d.of_records, d.count);
  }
  void add_drop(const std::string &reason, bool of_records, uint64_t count) {
    for (Drop &d : drops)
      if (d.reason == reason && d.of_records == of_records) {
        d.count += count;
        return;
      }
    drops.push_back({reason, of_records, count});
  }
  uint64_t dropped() const {
    uint64_t n = 0;
    for (const Drop &d : drops) n += d.of_records ? 0 : d.count;
    return n;
  }
  uint64_t records_dropped() const {
    uint64_t n = 0;
    for (const Drop &d : drops) n += d.of_records ? d.count : 0;
    return n;
  }
};

}  // namespace sluice
