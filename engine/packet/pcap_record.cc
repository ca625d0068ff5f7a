#include "engine/packet/pcap_record.hh"

#include <pcap/pcap.h>

namespace sluice {

bool next_pcap_record(pcap *p, PcapRecord &out) {
  pcap_pkthdr *h;
  const u_char *d;
  if (pcap_next_ex(p, &h, &d) != 1) return false;
  out = {record_time_ns(h->ts.tv_sec, h->ts.tv_usec), net_pcap_time_us(h->ts.tv_sec, h->ts.tv_usec), h->caplen, h->len, d};
  return true;
}

// A pcap record's seconds are 32 bits on disk, unsigned (2106 is their
// limit); libpcap 1.10 reads them as signed, so that 2038 and later come as
// negative seconds. (pcapng's 64-bit times never do.)
uint64_t record_time_ns(int64_t sec, int64_t ns) {
  uint64_t s = sec < 0 ? uint64_t(uint32_t(sec)) : uint64_t(sec);
  return s * 1000000000ull + uint64_t(ns);
}

// What net_pcap puts in the mbuf for the same record: it opens the file at
// microsecond precision (libpcap divides a nanosecond file's fraction by
// 1000, signed: a fraction of 2^31 or more is negative in a file of our
// byte order) and computes tv_sec * 1000000 + tv_usec in 64 bits, negative
// seconds and all. Compared as they are, 2038 and later match too.
uint64_t net_pcap_time_us(int64_t sec, int64_t ns) {
  return uint64_t(sec) * 1000000ull + uint64_t(ns / 1000);
}

}  // namespace sluice
