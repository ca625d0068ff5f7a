#include "engine/runtime/in_place_records.hh"

namespace sluice {

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
    b->owner.reset();  // the last block of a file lets its mapping go (of generated frames, their memory)
    free_.push_back(b);
  }
}

bool InPlaceRecords::open(size_t offset, std::shared_ptr<const void> owner) {
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
  b->owner = std::move(owner);
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

void InPlaceRecords::attach_to_open(rte_mbuf *m, const uint8_t *data, uint32_t len) {
  rte_pktmbuf_attach_extbuf(m, const_cast<uint8_t *>(data), RTE_BAD_IOVA, uint16_t(len), &open_->shinfo);
  m->data_len = uint16_t(len);
  m->pkt_len = len;
  if (--open_->left == 0) close();
}

namespace {
// What rte_pktmbuf_detach() does to a buffer once its external buffer's
// reference is given back (DPDK 22.11's rte_mbuf.h): it points at its own
// data room again.
void make_direct(rte_mbuf *m) {
  rte_mempool *mp = m->pool;
  const uint16_t priv_size = rte_pktmbuf_priv_size(mp);
  const uint32_t mbuf_size = uint32_t(sizeof(rte_mbuf) + priv_size);
  m->priv_size = priv_size;
  m->buf_addr = reinterpret_cast<char *>(m) + mbuf_size;
  rte_mbuf_iova_set(m, rte_mempool_virt2iova(m) + mbuf_size);
  m->buf_len = uint16_t(rte_pktmbuf_data_room_size(mp));
  rte_pktmbuf_reset_headroom(m);
  m->data_len = 0;
  m->ol_flags = 0;
}

bool ours_alone(const rte_mbuf *m, rte_mbuf_extbuf_free_callback_t cb) {
  return RTE_MBUF_HAS_EXTBUF(m) && m->shinfo->free_cb == cb && rte_mbuf_refcnt_read(m) == 1 && m->next == nullptr;
}
}  // namespace

void InPlaceRecords::release_runs(rte_mbuf **m, unsigned n) {
  for (unsigned i = 0; i < n;) {
    if (!ours_alone(m[i], last_packet_freed)) {
      ++i;
      continue;
    }
    rte_mbuf_ext_shared_info *shinfo = m[i]->shinfo;
    void *addr = m[i]->buf_addr;
    unsigned k = 0;
    for (; i < n && ours_alone(m[i], last_packet_freed) && m[i]->shinfo == shinfo; ++i, ++k) make_direct(m[i]);
    if (rte_mbuf_ext_refcnt_update(shinfo, int16_t(-int(k))) == 0) shinfo->free_cb(addr, shinfo->fcb_opaque);
  }
}

size_t InPlaceRecords::held_from_owner(size_t walk, const void *owner) {
  reclaim();
  for (const Block *b : out_)
    if (b->owner.get() == owner) return b->start;
  return walk;
}

}  // namespace sluice
