// A channel carries batches from one segment (thread) to another: the buffer
// of a Ring element, or the merge of a lane into a shared element. It is a
// single-producer single-consumer rte_ring of mbuf pointers, so neither side
// takes a lock.
#pragma once
#include <rte_ring.h>

#include <atomic>
#include <string>

#include "engine/runtime/counters.hh"
#include "engine/runtime/element_runtime.hh"

namespace sluice {

class PacketChannel {
 public:
  // capacity: packets it holds. owner and full_reason: where packets that do
  // not fit are counted (a live lane drops them; an offline one waits).
  PacketChannel(const std::string &name, unsigned capacity, int socket);
  ~PacketChannel();
  PacketChannel(const PacketChannel &) = delete;
  PacketChannel &operator=(const PacketChannel &) = delete;

  void set_overflow(RuntimeElement *owner, int full_reason, bool wait_when_full) {
    owner_ = owner, full_reason_ = full_reason, wait_ = wait_when_full;
  }
  void set_target(OutputTarget t) { target_ = t; }
  const OutputTarget &target() const { return target_; }

  // Producer side. Takes every packet of the batch: enqueued, or dropped
  // and counted on the owner when full (live), or waits for room (offline,
  // giving up only when `abort` is set). Returns the packets enqueued.
  unsigned send(PacketBatch &batch, const std::atomic<bool> &abort);
  // The producer will send no more.
  void close() { closed_.store(true, std::memory_order_release); }

  // Consumer side: up to max packets; 0 when empty.
  unsigned receive(PacketBatch &batch, unsigned max);
  // Closed and drained: nothing will ever come again.
  bool finished() const {
    return closed_.load(std::memory_order_acquire) && rte_ring_count(ring_) == 0;
  }

  unsigned capacity() const { return capacity_; }
  unsigned occupancy() const { return rte_ring_count(ring_); }
  uint64_t max_occupancy() const { return max_occupancy_.get(); }
  uint64_t waits() const { return waits_.get(); }
  uint64_t sent() const { return sent_.get(); }

 private:
  rte_ring *ring_ = nullptr;
  unsigned capacity_;
  OutputTarget target_;
  RuntimeElement *owner_ = nullptr;
  int full_reason_ = -1;
  bool wait_ = false;
  std::atomic<bool> closed_{false};
  Counter max_occupancy_, waits_, sent_;
};

}  // namespace sluice
