// InPlaceRecords: records handed on as packets without copying their
// bytes: a trace's records in its file's mapping (EthDevice), generated
// frames in memory (TrafficGen). Each packet's buffer is its record's bytes
// (a DPDK external buffer: rte_pktmbuf_attach_extbuf), so the copy into the
// pool's buffers, a tenth of a one-lane probe's time on a trace
// (docs/performance.md, "Records handed on in place"), is gone.
//
// The bytes must outlive every packet that points at them: packets wait in
// Rings, channels and elements after their file's walk has ended. Records
// are attached in blocks of kRecordsPerBlock, one DPDK shared-info (a
// reference count) per block, and a block keeps the bytes' owner (a file's
// TraceMapping, a GeneratedTraffic: any shared_ptr) until its last packet
// is freed, on whatever thread frees it; the device asks the mapping to keep the pages of the oldest block
// still out mapped (held_from), so that a packet read long after its record
// was walked takes no page fault. Counting per block, with the block's
// references taken when it opens, costs the lane no atomic operation per
// packet (the free's decrement is DPDK's).
//
// One lane's thread attaches; any thread frees. A trace file cut short
// while it is mapped reads zeros where its bytes went (MappedFile), in
// packets already handed on too.
#pragma once
#include <rte_mbuf.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace sluice {

class InPlaceRecords {
 public:
  static constexpr uint16_t kRecordsPerBlock = 1024;
  // At most this many blocks out at once by default (a million packets):
  // past that, the caller copies (a packet held for good holds every block
  // after it).
  static constexpr size_t kMaxBlocks = 1024;

  explicit InPlaceRecords(size_t max_blocks = kMaxBlocks) : max_blocks_(max_blocks) {}
  // Blocks with packets still out are left to their last packet's free.
  ~InPlaceRecords();
  InPlaceRecords(const InPlaceRecords &) = delete;
  InPlaceRecords &operator=(const InPlaceRecords &) = delete;

  // Points `m` (a buffer fresh from the pool: direct, one reference) at
  // `len` bytes at `data` (at most 65,535: a buffer's length), a record
  // starting at offset `offset` (a file offset, a packet number: only
  // held_from reads it) of the bytes `owner` keeps. False, `m` untouched,
  // when kMaxBlocks are out: the caller copies the record. The owner is
  // compared by address and copied once a block, not once a record.
  template <class Owner>
  bool attach(rte_mbuf *m, const uint8_t *data, uint32_t len, size_t offset, const std::shared_ptr<Owner> &owner) {
    if (open_ && open_->owner.get() != static_cast<const void *>(owner.get())) close();
    if (!open_ && !open(offset, owner)) return false;
    attach_to_open(m, data, len);
    return true;
  }
  // The offset of the oldest record of `owner`'s a packet may still point
  // at, or `walk` (where the walk is) when none does.
  template <class Owner>
  size_t held_from(size_t walk, const std::shared_ptr<Owner> &owner) {
    return held_from_owner(walk, owner.get());
  }
  // Ends the open block: the next record opens another (the next file's
  // records are in another mapping).
  void close();
  // Blocks out now (for tests).
  size_t blocks_out() const { return out_.size(); }

  // Before packets are freed in bulk (free_packets): those of m[0..n) that
  // point at records of a block (of any InPlaceRecords) and are nothing
  // else's (one reference, one segment) become ordinary buffers of their
  // pool again, and each run of them from one block gives its references
  // back at once. DPDK's free gives them back one at a time, an atomic
  // operation a packet: 7% of a one-lane trace run's lane (docs/performance.md).
  static void release_runs(rte_mbuf **m, unsigned n);

 private:
  struct Block {
    enum State : int {
      Out,       // open, or packets of it not yet freed
      Done,      // closed, every packet of it freed: the lane may reuse it
      Orphaned,  // its InPlaceRecords is gone: its last packet's free deletes it
    };
    // DPDK's reference count of the buffer the block's packets share: one a
    // packet out, plus, while the block is open, one a record it may still
    // take and one of its own.
    rte_mbuf_ext_shared_info shinfo{};
    std::atomic<int> state{Out};
    size_t start = 0;     // the offset of its first record
    uint16_t left = 0;    // records it may still take
    std::shared_ptr<const void> owner;  // the bytes its packets point at
  };
  static void last_packet_freed(void *addr, void *block);  // the shared-info's free_cb
  void reclaim();           // the blocks at the front whose packets are all freed
  bool open(size_t offset, std::shared_ptr<const void> owner);
  void attach_to_open(rte_mbuf *m, const uint8_t *data, uint32_t len);
  size_t held_from_owner(size_t walk, const void *owner);

  std::deque<Block *> out_;   // in file order; the open block last
  std::vector<Block *> free_; // reclaimed, for reuse
  Block *open_ = nullptr;     // taking records, or null
  size_t max_blocks_;
};

}  // namespace sluice
