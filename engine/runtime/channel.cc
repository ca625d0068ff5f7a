#include "engine/runtime/channel.hh"

#include <rte_errno.h>
#include <rte_pause.h>
#include <rte_ring_peek_zc.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace sluice {

Channel::Channel(const std::string &name, StreamType type, unsigned capacity, int socket)
    : type_(type), esize_(type == StreamType::Packets ? sizeof(rte_mbuf *) : sizeof(FlowRecord)), capacity_(capacity),
      wake_threshold_(std::clamp(capacity / 8, 1u, 1024u)), window_(std::min(capacity, kOfflineWindow)),
      room_mark_(window_ / 2) {
  // rte_ring names are limited to RTE_RING_NAMESIZE and process-wide; they
  // only need to be unique.
  static std::atomic<unsigned> next{0};
  std::string ring_name = "ch" + std::to_string(next++);
  ring_ = rte_ring_create_elem(ring_name.c_str(), esize_, capacity, socket,
                               RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
  if (!ring_)
    throw std::runtime_error("cannot create the ring of " + name + ": " + rte_strerror(rte_errno));
}

Channel::~Channel() {
  if (type_ == StreamType::Packets) {  // packets still inside (an aborted run) go back to their pool
    rte_mbuf *m;
    while (rte_ring_sc_dequeue_elem(ring_, &m, sizeof m) == 0) free_packet(m);
  }
  rte_ring_free(ring_);
}

// Up to n items into the ring. Pointers (packets) through DPDK's copy;
// flow records, hundreds of bytes each, by memcpy into the ring's slots
// (DPDK's zero-copy API): its own copy moves elements of other sizes than
// 8 and 16 bytes four bytes at a time.
unsigned Channel::enqueue(const char *items, unsigned n, unsigned *free_space) {
  if (type_ == StreamType::Packets) return rte_ring_sp_enqueue_burst_elem(ring_, items, esize_, n, free_space);
  rte_ring_zc_data zc;
  unsigned got = rte_ring_enqueue_zc_burst_elem_start(ring_, esize_, n, &zc, free_space);
  if (got) {
    std::memcpy(zc.ptr1, items, size_t(zc.n1) * esize_);
    if (zc.n1 < got) std::memcpy(zc.ptr2, items + size_t(zc.n1) * esize_, size_t(got - zc.n1) * esize_);
    rte_ring_enqueue_zc_elem_finish(ring_, got);
  }
  return got;
}

template <typename OnDrop>
unsigned Channel::send_items(const void *items, unsigned n, const std::atomic<bool> &abort, OnDrop on_drop) {
  const char *p = static_cast<const char *>(items);
  unsigned done = 0;
  int spins = 0;
  while (done < n) {
    bool wait = wait_.load(std::memory_order_relaxed);
    unsigned want = n - done;
    if (wait) {  // no further ahead of the consumer than the window
      unsigned occ = occupancy();
      want = occ < window_ ? std::min(want, window_ - occ) : 0;
    }
    unsigned free_space = 0, sent = 0;
    if (want) sent = enqueue(p + size_t(done) * esize_, want, &free_space);
    else free_space = capacity_ - occupancy();
    done += sent;
    // Wake a sleeping consumer only once a good part of the ring (of the
    // window) is waiting, not for every batch: a wake-up is a system call
    // and a context switch, and the consumer's timeout bounds the delay of
    // the first items.
    unsigned wake = wait ? std::min(wake_threshold_, std::max(window_ / 4, 1u)) : wake_threshold_;
    if (sent && consumer_bell_ && capacity_ - free_space >= wake) consumer_bell_->ring();
    uint64_t occ = capacity_ - free_space;
    if (occ > max_occupancy_.get()) max_occupancy_.add(occ - max_occupancy_.get());
    if (done == n) break;
    if (!wait || abort.load(std::memory_order_relaxed)) {
      // No room: the rest is lost, counted where the user can see why.
      owner_->counters.drops[full_reason_].add(n - done);
      for (unsigned i = done; i < n; ++i) on_drop(i);
      break;
    }
    // Offline input: wait for the consumer instead of dropping; sleep when
    // it takes long, so that the consumer gets the core, until it has
    // emptied half the window: woken for every batch it took instead, a
    // producer sharing its cpu switched in and out every 32 packets.
    waits_.add();
    if (++spins < 64)
      rte_pause();
    else
      room_bell_.wait([&] { return occupancy() <= room_mark_ || abort.load(std::memory_order_relaxed); },
                      1'000'000);
  }
  return done;
}

unsigned Channel::send(PacketBatch &batch, const std::atomic<bool> &abort) {
  return send_items(batch.pkts, batch.count, abort, [&](unsigned i) { free_packet(batch.pkts[i]); });
}

unsigned Channel::send(FlowBatch &batch, const std::atomic<bool> &abort) {
  return send_items(batch.recs, batch.count, abort, [](unsigned) {});
}

unsigned Channel::receive(PacketBatch &batch, unsigned max) {
  batch.count = uint16_t(rte_ring_sc_dequeue_burst_elem(ring_, batch.pkts, esize_, std::min<unsigned>(max, kMaxBurst), nullptr));
  if (batch.count && wait_.load(std::memory_order_relaxed) && occupancy() <= room_mark_) room_bell_.ring();
  return batch.count;
}

unsigned Channel::receive(FlowBatch &batch, unsigned max) {
  rte_ring_zc_data zc;
  batch.count = uint16_t(rte_ring_dequeue_zc_burst_elem_start(ring_, esize_, std::min<unsigned>(max, kMaxFlowBatch), &zc, nullptr));
  if (batch.count) {
    std::memcpy(batch.recs, zc.ptr1, size_t(zc.n1) * esize_);
    if (zc.n1 < batch.count) std::memcpy(batch.recs + zc.n1, zc.ptr2, size_t(batch.count - zc.n1) * esize_);
    rte_ring_dequeue_zc_elem_finish(ring_, batch.count);
  }
  if (batch.count && wait_.load(std::memory_order_relaxed) && occupancy() <= room_mark_) room_bell_.ring();
  return batch.count;
}

}  // namespace sluice
