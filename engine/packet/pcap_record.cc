#include "engine/packet/pcap_record.hh"

#include <pcap/pcap.h>

namespace sluice {

bool next_pcap_record(pcap *p, PcapRecord &out) {
  pcap_pkthdr *h;
  const u_char *d;
  if (pcap_next_ex(p, &h, &d) != 1) return false;
  out = {uint64_t(h->ts.tv_sec) * 1000000000ull + uint64_t(h->ts.tv_usec), h->caplen, h->len, d};
  return true;
}

}  // namespace sluice
