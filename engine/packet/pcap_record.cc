#include "engine/packet/pcap_record.hh"

#include <pcap/pcap.h>

namespace sluice {

bool next_pcap_record(pcap *p, PcapRecord &out) {
  pcap_pkthdr *h;
  const u_char *d;
  if (pcap_next_ex(p, &h, &d) != 1) return false;
  out = {record_time_ns(h->ts.tv_sec, h->ts.tv_usec), h->caplen, h->len, d};
  return true;
}

// A pcap record's seconds are 32 bits on disk, unsigned (2106 is their
// limit); libpcap 1.10 reads them as signed, so that 2038 and later come as
// negative seconds. (pcapng's 64-bit times never do.)
uint64_t record_time_ns(int64_t sec, int64_t ns) {
  uint64_t s = sec < 0 ? uint64_t(uint32_t(sec)) : uint64_t(sec);
  return s * 1000000000ull + uint64_t(ns);
}

}  // namespace sluice
