// How full a DPDK ring is, read from any thread. rte_ring_count() reads the
// two tails with plain loads, which the C++ memory model (and
// ThreadSanitizer) calls a race with the side moving them; these loads are
// atomic (acquire), as the ring's own enqueue and dequeue are.
#pragma once
#include <rte_ring.h>

namespace sluice {

inline unsigned ring_count(const rte_ring *r) {
  uint32_t prod = __atomic_load_n(&r->prod.tail, __ATOMIC_ACQUIRE);
  uint32_t cons = __atomic_load_n(&r->cons.tail, __ATOMIC_ACQUIRE);
  uint32_t n = (prod - cons) & r->mask;
  return n > r->capacity ? r->capacity : n;
}

inline unsigned ring_free_count(const rte_ring *r) { return r->capacity - ring_count(r); }

}  // namespace sluice
