#include "engine/runtime/trace_deal.hh"

#include <rte_errno.h>

#include <stdexcept>
#include <string>

#include "engine/packet/trace_mapping.hh"
#include "engine/runtime/packet.hh"

namespace sluice {

TraceDeal::TraceDeal(unsigned lanes) : rings_(lanes, nullptr) {
  static std::atomic<unsigned> next{0};  // ring names are process-wide in DPDK
  for (unsigned l = 1; l < lanes; ++l) {
    std::string name = "deal" + std::to_string(next++);
    rings_[l] = rte_ring_create_elem(name.c_str(), sizeof(Record), kRingRecords, SOCKET_ID_ANY,
                                     RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (!rings_[l]) {
      std::string why = rte_strerror(rte_errno);
      for (rte_ring *r : rings_) rte_ring_free(r);  // empty yet
      throw std::runtime_error("cannot create the rings a trace's records are dealt to: " + why);
    }
  }
}

TraceDeal::~TraceDeal() {
  for (rte_ring *r : rings_) {
    if (!r) continue;
    Record rec;
    while (rte_ring_sc_dequeue_elem(r, &rec, sizeof rec) == 0)
      if (rec.file == kCopied) {
        rte_mbuf *m = const_cast<rte_mbuf *>(reinterpret_cast<const rte_mbuf *>(rec.data));
        packets_acquired(&m, 1);
        free_packet(m);
      }
    rte_ring_free(r);
  }
  rings_.clear();
}

uint32_t TraceDeal::add_mapping(const std::shared_ptr<TraceMapping> &m) {
  std::lock_guard lock(mutex_);
  mappings_.push_back(m);
  return uint32_t(mappings_.size() - 1);
}

std::shared_ptr<TraceMapping> TraceDeal::mapping_for(uint32_t file) {
  std::lock_guard lock(mutex_);
  return file < mappings_.size() ? mappings_[file] : nullptr;
}

}  // namespace sluice
