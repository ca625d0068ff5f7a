// A channel carries batches from one segment (thread) to another: the buffer
// of a Ring element, or the merge of a lane into a shared element. It is a
// single-producer single-consumer rte_ring, so neither side takes a lock: of
// mbuf pointers for a packets stream, of flow records (by value) for a flows
// stream.
#pragma once
#include <rte_ring.h>

#include <atomic>
#include <string>

#include "engine/core/element_spec.hh"
#include "engine/runtime/doorbell.hh"
#include "engine/runtime/counters.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/ring_count.hh"

namespace sluice {

class Channel {
 public:
  // Items a producer that waits for room keeps ahead of its consumer at
  // most (offline_window()). The default probe at 1M flows in memory, one
  // lane: 1024 and 2048 alike, 4096 and more as slow as the whole 64K ring.
  static constexpr unsigned kOfflineWindow = 2048;

  // capacity: packets or records it holds.
  Channel(const std::string &name, StreamType type, unsigned capacity, int socket);
  ~Channel();
  Channel(const Channel &) = delete;
  Channel &operator=(const Channel &) = delete;

  // Where items that do not fit are counted (owner's drop reason): a live
  // lane drops them; an offline one waits for room.
  void set_overflow(RuntimeElement *owner, int full_reason, bool wait_when_full) {
    owner_ = owner, full_reason_ = full_reason;
    wait_.store(wait_when_full, std::memory_order_relaxed);
  }
  // From now on wait for room even on a live lane: the producer is
  // flushing at the end (or for a reload), no packet is coming in that a
  // wait could make the device lose, and every record must get through.
  // Producer side.
  void wait_from_now() { wait_.store(true, std::memory_order_relaxed); }
  void set_target(OutputTarget t) { target_ = t; }
  // Rung when items arrive or the channel closes: the consumer sleeps on it.
  void set_consumer_doorbell(Doorbell *d) { consumer_bell_ = d; }
  const OutputTarget &target() const { return target_; }
  // The producer's output port (set_overflow's owner is the producer).
  void set_source_port(int port) { source_port_ = port; }
  RuntimeElement *source() const { return owner_; }
  int source_port() const { return source_port_; }
  StreamType type() const { return type_; }

  // Producer side. Takes every item of the batch: enqueued, or dropped and
  // counted on the owner when full (live), or waits for room (offline,
  // giving up only when `abort` is set). Returns the items enqueued.
  unsigned send(PacketBatch &batch, const std::atomic<bool> &abort);
  unsigned send(FlowBatch &batch, const std::atomic<bool> &abort);
  // The producer will send no more.
  void close() {
    closed_.store(true, std::memory_order_release);
    if (consumer_bell_) consumer_bell_->ring();
  }

  // Consumer side: up to max items; 0 when empty.
  unsigned receive(PacketBatch &batch, unsigned max);
  unsigned receive(FlowBatch &batch, unsigned max);
  // Closed and drained: nothing will ever come again.
  bool empty() const { return occupancy() == 0; }
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  bool finished() const {
    return closed_.load(std::memory_order_acquire) && occupancy() == 0;
  }

  unsigned capacity() const { return capacity_; }
  // The most items a producer that waits for room (offline input, a flush)
  // keeps in the ring: the ring's capacity is for bursts a live device
  // cannot hold back; an offline source can, and packets that wait long in
  // a deep ring have left the caches by the time they are processed.
  unsigned offline_window() const { return window_; }
  unsigned occupancy() const { return ring_count(ring_); }  // from any thread
  uint64_t max_occupancy() const { return max_occupancy_.get(); }
  uint64_t waits() const { return waits_.get(); }

 private:
  unsigned enqueue(const char *items, unsigned n, unsigned *free_space);
  // Enqueues n items of esize bytes at items; on_drop(i) for each lost one.
  template <typename OnDrop>
  unsigned send_items(const void *items, unsigned n, const std::atomic<bool> &abort, OnDrop on_drop);

  rte_ring *ring_ = nullptr;
  StreamType type_;
  unsigned esize_;
  unsigned capacity_;
  unsigned wake_threshold_;  // items waiting before a sleeping consumer is woken
  unsigned window_;          // items a waiting (offline) producer keeps ahead of its consumer
  unsigned room_mark_;       // items left when a producer sleeping for room is woken
  OutputTarget target_;
  RuntimeElement *owner_ = nullptr;
  int full_reason_ = -1;
  int source_port_ = 0;
  std::atomic<bool> wait_{false};  // read by the consumer too: whether to ring room_bell_
  std::atomic<bool> closed_{false};
  Doorbell *consumer_bell_ = nullptr;
  Doorbell room_bell_;  // an offline producer waiting for room sleeps on it
  Counter max_occupancy_, waits_;
};

}  // namespace sluice
