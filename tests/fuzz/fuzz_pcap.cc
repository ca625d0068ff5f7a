// libFuzzer target: any byte string as a trace file (pcap or pcapng), read
// as RSSSource's pcap path reads one: libpcap opens it with nanosecond time
// stamps, the link type becomes the parser's (as EthDevice does), each record
// is taken by next_pcap_record (the file reader's step when libpcap reads)
// and its bytes go through the packet parser with the record's wire length. Never a
// crash, a read outside a record (ASan) or undefined behaviour (UBSan). The
// same bytes as a file, read by PcapFileReader (4 KiB chunks, so records
// cross their edges; on its caller's thread or reading ahead; or mapped),
// give the records libpcap gave, bytes and all, or it
// refuses the file as libpcap did.
#include <pcap/pcap.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/packet/parse.hh"
#include "engine/packet/pcap_record.hh"
#include "engine/packet/pcap_file_reader.hh"

using namespace sluice;

static void check(bool ok) {
  if (!ok) __builtin_trap();
}

// A record as libpcap gave it: its header fields, and its bytes copied
// (libpcap's buffer is reused by the next read).
struct Want {
  PcapRecord header;
  std::string bytes;
};

static void check_file_reader(const uint8_t *data, size_t size, const std::vector<Want> &want) {
  int fd = memfd_create("fuzz.pcap", MFD_CLOEXEC);
  if (fd < 0) return;
  bool written = write(fd, data, size) == ssize_t(size);
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (written) {
    // libpcap opened these bytes: so does the reader, in each of its ways
    // by turns: read() on this thread or ahead by its own (two slots), or
    // mapped and walked in place (as RSSSource reads a trace), with or
    // without a thread bringing the pages in.
    std::optional<PcapFileReader::ReadAhead> ahead;
    if (size % 2) ahead = PcapFileReader::ReadAhead{2, nullptr};
    PcapFileReader reader(path, 4096, ahead, size % 4 >= 2);
    PcapRecord r;
    size_t n = 0;
    for (; n < want.size() && reader.next(r); ++n) {
      const PcapRecord &w = want[n].header;
      check(r.ns == w.ns && r.caplen == w.caplen && r.len == w.len);
      check(r.caplen == 0 || memcmp(r.data, want[n].bytes.data(), r.caplen) == 0);
    }
    check(n == want.size());
    if (want.size() < 100000) check(!reader.next(r));
  }
  close(fd);
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
  std::vector<Want> records;
  for (int n = 0; n < 100000 && next_pcap_record(p, r); ++n) {
    records.push_back({r, std::string(reinterpret_cast<const char *>(r.data), r.data ? r.caplen : 0)});
    check(r.data != nullptr || r.caplen == 0);
    PacketMeta m;
    ParseStatus s = parse_packet(r.data, r.caplen, link, m, r.len);
    check(s == m.status);
    if (m.l4_offset) check(m.l4_offset <= r.caplen);
    if (s == ParseStatus::Ok) check(m.payload_offset <= r.caplen);
  }
  pcap_close(p);  // closes f too
  check_file_reader(data, size, records);
  return 0;
}
