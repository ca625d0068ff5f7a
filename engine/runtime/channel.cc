#include "engine/runtime/channel.hh"

#include <rte_errno.h>
#include <rte_pause.h>

#include <sched.h>
#include <stdexcept>

namespace sluice {

PacketChannel::PacketChannel(const std::string &name, unsigned capacity, int socket)
    : capacity_(capacity) {
  // rte_ring names are limited to RTE_RING_NAMESIZE; they only need to be unique.
  static std::atomic<unsigned> next{0};
  std::string ring_name = "ch" + std::to_string(next++);
  ring_ = rte_ring_create(ring_name.c_str(), capacity, socket,
                          RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
  if (!ring_)
    throw std::runtime_error("cannot create the ring of " + name + ": " + rte_strerror(rte_errno));
}

PacketChannel::~PacketChannel() { rte_ring_free(ring_); }

unsigned PacketChannel::send(PacketBatch &batch, const std::atomic<bool> &abort) {
  unsigned done = 0;
  int spins = 0;
  while (done < batch.count) {
    unsigned free_space = 0;
    done += rte_ring_sp_enqueue_burst(ring_, reinterpret_cast<void *const *>(batch.pkts + done),
                                      batch.count - done, &free_space);
    uint64_t occ = capacity_ - free_space;
    if (occ > max_occupancy_.get()) max_occupancy_.add(occ - max_occupancy_.get());
    if (done == batch.count) break;
    if (!wait_ || abort.load(std::memory_order_relaxed)) {
      // No room: the rest is lost, counted where the user can see why.
      for (unsigned i = done; i < batch.count; ++i) {
        owner_->counters.drops[full_reason_].add();
        rte_pktmbuf_free(batch.pkts[i]);
      }
      break;
    }
    // Offline input: wait for the consumer instead of dropping.
    waits_.add();
    if (++spins < 64) rte_pause();
    else sched_yield();
  }
  sent_.add(done);
  return done;
}

unsigned PacketChannel::receive(PacketBatch &batch, unsigned max) {
  batch.count = uint16_t(rte_ring_sc_dequeue_burst(ring_, reinterpret_cast<void **>(batch.pkts), max, nullptr));
  return batch.count;
}

}  // namespace sluice
