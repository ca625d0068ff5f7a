// libFuzzer target: any byte string as a trace file (pcap or pcapng), read
// as RSSSource's pcap path reads one: libpcap opens it with nanosecond time
// stamps, the link type becomes the parser's (as EthDevice does), each record
// is taken by next_pcap_record (the shadow reader's per-record step) and its
// bytes go through the packet parser with the record's wire length. Never a
// crash, a read outside a record (ASan) or undefined behaviour (UBSan).
#include <pcap/pcap.h>

#include <cstdint>
#include <cstdio>

#include "engine/packet/parse.hh"
#include "engine/packet/pcap_record.hh"

using namespace sluice;

static void check(bool ok) {
  if (!ok) __builtin_trap();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;  // fmemopen refuses an empty buffer
  FILE *f = fmemopen(const_cast<uint8_t *>(data), size, "rb");
  if (!f) return 0;
  char err[PCAP_ERRBUF_SIZE];
  pcap_t *p = pcap_fopen_offline_with_tstamp_precision(f, PCAP_TSTAMP_PRECISION_NANO, err);
  if (!p) {
    fclose(f);
    return 0;
  }
  LinkType link = LinkType(pcap_datalink(p));  // as EthDevice takes it
  PcapRecord r;
  for (int n = 0; n < 100000 && next_pcap_record(p, r); ++n) {
    check(r.data != nullptr || r.caplen == 0);
    PacketMeta m;
    ParseStatus s = parse_packet(r.data, r.caplen, link, m, r.len);
    check(s == m.status);
    if (m.l4_offset) check(m.l4_offset <= r.caplen);
    if (s == ParseStatus::Ok) check(m.payload_offset <= r.caplen);
  }
  pcap_close(p);  // closes f too
  return 0;
}
