// TraceDeal: a trace over several lanes, walked once. Lane 0's reader walks
// the file, keeps its own share of the records (by the symmetric software
// RSS hash) and deals each other lane's records to that lane's ring, as a
// pointer into the file's mapping with the record's time and lengths; the
// other lanes never walk the file: each attaches its records in place and
// parses them itself (EthDevice::keep_lane_share). So the 1 GB walk, which
// waits for memory, is made once, and no packet buffer or annotation
// written on one core is read on another (which made dealing bursts of
// packets cost the receiving lane's flow table 4x). A record the mapping
// does not hold (read by libpcap, longer than a buffer can point at) is
// copied into a buffer by lane 0 and dealt as that buffer.
#pragma once
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace sluice {

class TraceMapping;

struct TraceDeal {
  struct Record {
    const uint8_t *data;  // caplen bytes in mapping(file); or, file == kCopied, the rte_mbuf lane 0 filled
    uint64_t ns;
    uint32_t caplen, len;
    uint32_t hash;  // the software RSS hash it was dealt by
    uint32_t file;  // index of its file's mapping (mapping_for)
  };
  static constexpr uint32_t kCopied = UINT32_MAX;
  static constexpr unsigned kRingRecords = 4096;

  // Rings for lanes 1..lanes-1; throws std::runtime_error when DPDK cannot make them.
  explicit TraceDeal(unsigned lanes);
  ~TraceDeal();  // copied records still in the rings are freed
  TraceDeal(const TraceDeal &) = delete;
  TraceDeal &operator=(const TraceDeal &) = delete;

  rte_ring *ring(unsigned lane) const { return rings_[lane]; }
  // Lane 0, before dealing the first record of a mapped file: its index.
  uint32_t add_mapping(const std::shared_ptr<TraceMapping> &m);
  std::shared_ptr<TraceMapping> mapping_for(uint32_t file);

  std::atomic<bool> done{false};        // lane 0 has dealt its last record
  std::atomic<uint64_t> walked{0};      // bytes lane 0 walked, of all files

 private:
  std::vector<rte_ring *> rings_;
  std::mutex mutex_;  // mappings_: lane 0 adds, the others look up (once a file)
  // Kept to the end of the run: a lane may reach a file's first record long
  // after lane 0 left it. What a kept mapping costs is its address range:
  // the pages behind the walk are let go of as it goes (TraceMapping).
  std::vector<std::shared_ptr<TraceMapping>> mappings_;
};

}  // namespace sluice
