// Packets as the runtime moves them: DPDK mbufs in batches, each mbuf
// carrying its parsed headers and its time in the mbuf private area, so
// that every element reads them without touching the packet again.
#pragma once
#include <rte_mbuf.h>

#include <cstdint>

#include "engine/flow/flow_record.hh"
#include "engine/packet/packet_meta.hh"
#include "engine/runtime/in_place_records.hh"

namespace sluice {

// The per-packet annotations in the mbuf private area (set at the source).
struct alignas(8) PacketAnno {
  PacketMeta meta;     // headers, parsed once by the source
  uint64_t time_ns;    // packet time (UNIX ns): the capture time, or what Timestamp set
  uint32_t hash;       // RSS hash: the NIC's, or the software one when lanes share a device; else 0
  uint32_t wire_len;   // length on the wire (pcap's len); the mbuf holds pkt_len bytes
  // Where the source received it (its `ifindex` and `direction`): a flow's
  // ingressInterface and flowDirection (0 ingress, 1 egress).
  uint32_t if_index;
  uint8_t flow_direction;
  // Values elements put on the packet for its flow's extension fields
  // (flow_extension.hh); sources set labels.count to 0.
  PacketLabels labels;
};
inline constexpr uint16_t kMbufPrivSize = RTE_ALIGN(sizeof(PacketAnno), RTE_MBUF_PRIV_ALIGN);

inline PacketAnno &anno(rte_mbuf *m) { return *static_cast<PacketAnno *>(rte_mbuf_to_priv(m)); }
inline const PacketAnno &anno(const rte_mbuf *m) {
  return *static_cast<const PacketAnno *>(rte_mbuf_to_priv(const_cast<rte_mbuf *>(m)));
}

// ThreadSanitizer cannot see into DPDK's mempools (an uninstrumented
// library): a buffer freed by one thread and allocated again by another
// would look like a race. These say what the pool does: a free releases the
// buffer, an allocation (or a receive from a device) acquires it. Nothing
// in other builds.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLUICE_TSAN 1
extern "C" void __tsan_acquire(void *addr);
extern "C" void __tsan_release(void *addr);
#endif
#endif
inline void packet_released(rte_mbuf *m) {
#ifdef SLUICE_TSAN
  __tsan_release(m);
#else
  (void)m;
#endif
}
inline void packets_acquired(rte_mbuf *const *m, unsigned n) {
#ifdef SLUICE_TSAN
  for (unsigned i = 0; i < n; ++i) __tsan_acquire(m[i]);
#else
  (void)m, (void)n;
#endif
}
// rte_pktmbuf_alloc_bulk, with the acquire before the buffers are written
// (rte_pktmbuf_reset): 0, or -ENOENT with nothing taken.
inline int alloc_packets(rte_mempool *pool, rte_mbuf **m, unsigned n) {
#ifdef SLUICE_TSAN
  if (int rc = rte_mempool_get_bulk(pool, reinterpret_cast<void **>(m), n)) return rc;
  packets_acquired(m, n);
  for (unsigned i = 0; i < n; ++i) rte_pktmbuf_reset(m[i]);
  return 0;
#else
  return rte_pktmbuf_alloc_bulk(pool, m, n);
#endif
}
// rte_pktmbuf_free and rte_pktmbuf_free_bulk, with the release; in bulk,
// packets pointing at a trace's records give back their block's references
// a run at a time (InPlaceRecords::release_runs).
inline void free_packet(rte_mbuf *m) {
  packet_released(m);
  rte_pktmbuf_free(m);
}
inline void free_packets(rte_mbuf **m, unsigned n) {
  InPlaceRecords::release_runs(m, n);  // reads and writes the buffers: before their release
#ifdef SLUICE_TSAN
  for (unsigned i = 0; i < n; ++i) __tsan_release(m[i]);
#endif
  rte_pktmbuf_free_bulk(m, n);
}

// Largest batch: the `burst` argument's upper bound.
inline constexpr int kMaxBurst = 512;

struct PacketBatch {
  uint16_t count = 0;
  rte_mbuf *pkts[kMaxBurst];

  void push(rte_mbuf *m) { pkts[count++] = m; }
  bool empty() const { return count == 0; }
  void clear() { count = 0; }
  // Sum of wire lengths, for bit rates.
  uint64_t wire_bytes() const {
    uint64_t b = 0;
    for (int i = 0; i < count; ++i) b += anno(pkts[i]).wire_len;
    return b;
  }
};

// A batch of flow records (a flows stream), moved by value.
inline constexpr int kMaxFlowBatch = 64;
struct FlowBatch {
  uint16_t count = 0;
  FlowRecord recs[kMaxFlowBatch];

  bool full() const { return count == kMaxFlowBatch; }
  void clear() { count = 0; }
  uint64_t packets() const {
    uint64_t p = 0;
    for (int i = 0; i < count; ++i) p += recs[i].packets();
    return p;
  }
};

}  // namespace sluice
