#include "engine/runtime/in_place_records.hh"

#include <atomic>

#include "engine/packet/trace_mapping.hh"

namespace sluice {

struct InPlaceRecords::Block {
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
  size_t start = 0;     // the file offset of its first record
  uint16_t left = 0;    // records it may still take
  std::shared_ptr<TraceMapping> mapping;  // the bytes its packets point at
};

InPlaceRecords::~InPlaceRecords() {
  close();
  for (Block *b : out_)
    if (b->state.exchange(Block::Orphaned, std::memory_order_acq_rel) == Block::Done) delete b;
  for (Block *b : free_) delete b;
}

// Called by DPDK on the thread that freed the block's last packet, after
// the block was closed.
void InPlaceRecords::last_packet_freed(void *, void *block) {
  auto *b = static_cast<Block *>(block);
  if (b->state.exchange(Block::Done, std::memory_order_acq_rel) == Block::Orphaned) delete b;
}

void InPlaceRecords::reclaim() {
  while (!out_.empty() && out_.front() != open_ && out_.front()->state.load(std::memory_order_acquire) == Block::Done) {
    Block *b = out_.front();
    out_.pop_front();
    b->mapping.reset();  // the last block of a file lets its mapping go
    free_.push_back(b);
  }
}

bool InPlaceRecords::open(size_t offset, const std::shared_ptr<TraceMapping> &mapping) {
  reclaim();
  if (out_.size() >= max_blocks_) return false;
  Block *b;
  if (free_.empty()) {
    b = new Block;
  } else {
    b = free_.back();
    free_.pop_back();
  }
  b->state.store(Block::Out, std::memory_order_relaxed);
  b->start = offset;
  b->left = kRecordsPerBlock;
  b->mapping = mapping;
  b->shinfo.free_cb = last_packet_freed;
  b->shinfo.fcb_opaque = b;
  rte_mbuf_ext_refcnt_set(&b->shinfo, uint16_t(kRecordsPerBlock + 1));
  out_.push_back(b);
  open_ = b;
  return true;
}

void InPlaceRecords::close() {
  if (!open_) return;
  Block *b = open_;
  open_ = nullptr;
  // Gives back the records it did not take and its own reference: where
  // every packet of it is already freed, nobody else will call back.
  if (rte_mbuf_ext_refcnt_update(&b->shinfo, int16_t(-(int(b->left) + 1))) == 0)
    b->state.store(Block::Done, std::memory_order_release);
}

bool InPlaceRecords::attach(rte_mbuf *m, const uint8_t *data, uint32_t len, size_t offset,
                            const std::shared_ptr<TraceMapping> &mapping) {
  if (open_ && open_->mapping != mapping) close();
  if (!open_ && !open(offset, mapping)) return false;
  rte_pktmbuf_attach_extbuf(m, const_cast<uint8_t *>(data), RTE_BAD_IOVA, uint16_t(len), &open_->shinfo);
  m->data_len = uint16_t(len);
  m->pkt_len = len;
  if (--open_->left == 0) close();
  return true;
}

size_t InPlaceRecords::held_from(size_t walk, const std::shared_ptr<TraceMapping> &mapping) {
  reclaim();
  for (const Block *b : out_)
    if (b->mapping == mapping) return b->start;
  return walk;
}

}  // namespace sluice
