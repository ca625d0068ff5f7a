// Trace files for tests, through libpcap: read every record, and write
// records again (with times a test changed) at micro- or nanosecond
// precision.
#pragma once
#include <pcap/pcap.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::test {

struct PcapRecord {
  uint64_t ns;  // UNIX ns
  uint32_t len;
  std::vector<uint8_t> data;
  bool operator==(const PcapRecord &) const = default;
};

// A record's time read at nanosecond precision. The seconds are 32 bits on
// disk, unsigned; libpcap 1.10 hands 2038 and later out as negative.
inline uint64_t record_ns(const pcap_pkthdr &h) {
  uint64_t sec = h.ts.tv_sec < 0 ? uint64_t(uint32_t(h.ts.tv_sec)) : uint64_t(h.ts.tv_sec);
  return sec * 1000000000ull + uint64_t(h.ts.tv_usec);
}

inline std::vector<PcapRecord> read_records(const std::string &path, int *linktype = nullptr) {
  char err[PCAP_ERRBUF_SIZE];
  pcap_t *p = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
  INFO(path << ": " << err);
  REQUIRE(p);
  if (linktype) *linktype = pcap_datalink(p);
  std::vector<PcapRecord> out;
  pcap_pkthdr *h;
  const u_char *d;
  while (pcap_next_ex(p, &h, &d) == 1) out.push_back({record_ns(*h), h->len, std::vector<uint8_t>(d, d + h->caplen)});
  pcap_close(p);
  return out;
}

// Writes `records` as a pcap file (Ethernet unless told), times at
// nanosecond precision or (nano false) microseconds.
inline void write_records(const std::string &path, const std::vector<PcapRecord> &records, bool nano = true,
                          int linktype = DLT_EN10MB) {
  pcap_t *p = pcap_open_dead_with_tstamp_precision(linktype, 65535,
                                                   nano ? PCAP_TSTAMP_PRECISION_NANO : PCAP_TSTAMP_PRECISION_MICRO);
  REQUIRE(p);
  pcap_dumper_t *d = pcap_dump_open(p, path.c_str());
  INFO(path << ": " << pcap_geterr(p));
  REQUIRE(d);
  for (const PcapRecord &r : records) {
    pcap_pkthdr h{};
    h.ts.tv_sec = time_t(r.ns / 1000000000ull);  // libpcap stores the low 32 bits
    h.ts.tv_usec = suseconds_t(nano ? r.ns % 1000000000ull : r.ns % 1000000000ull / 1000);
    h.caplen = uint32_t(r.data.size());
    h.len = r.len;
    pcap_dump(reinterpret_cast<u_char *>(d), &h, r.data.data());
  }
  pcap_dump_close(d);
  pcap_close(p);
}

}  // namespace sluice::test
