// PcapShadowReader: the record headers of a trace file, read beside DPDK's
// net_pcap, which reads the same file for the packets but keeps only
// microseconds and the captured length. The shadow gives each record's
// nanosecond time, wire length, and the time net_pcap stamps it with
// (PcapRecord, without data).
//
// A classic pcap file (magic a1b2c3d4 or a1b23c4d, either byte order,
// version 2.4, a link type the packet parser knows) is walked header to
// header through a read-only mapping, in windows: nothing of the packets is
// copied, where reading the file a second time through libpcap copied all of
// it out of the kernel again. Anything else (pcapng, older versions, other
// magics and link types) and any record libpcap would read differently
// (caplen above the file's snapshot length or above len) goes to libpcap
// from that record on, so the records are always libpcap's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/packet/pcap_record.hh"

struct pcap;  // libpcap's pcap_t

namespace sluice {

// A classic pcap file's global header, as the walk needs it.
struct ClassicPcapFormat {
  bool swapped = false;  // the file's byte order is not ours
  bool nanoseconds = false;  // a1b23c4d: the fraction is in ns
  uint32_t snapshot = 0;     // the largest caplen libpcap reads as it is
};

// The 24-byte global header at data[0..size): true, with the format, when
// the records can be walked here; false for anything libpcap should read.
bool classic_pcap_format(const uint8_t *data, size_t size, ClassicPcapFormat &out);

enum class ClassicRecord : uint8_t {
  Ok,       // out holds the record (data null)
  ToLibpcap,  // a record libpcap reads otherwise (it is libpcap's from here)
};
// The 16-byte record header at hdr.
ClassicRecord classic_pcap_record(const uint8_t *hdr, const ClassicPcapFormat &f, PcapRecord &out);

class PcapShadowReader {
 public:
  // Opens `file`; throws std::runtime_error when it cannot be read. A
  // window of `window` bytes (rounded to pages) is mapped at a time.
  explicit PcapShadowReader(const std::string &file, size_t window = size_t(32) << 20);
  ~PcapShadowReader();
  PcapShadowReader(const PcapShadowReader &) = delete;
  PcapShadowReader &operator=(const PcapShadowReader &) = delete;

  // The next record (out.data null when walked): false at the end of the
  // file, at a truncated record, or where libpcap stops reading.
  bool next(PcapRecord &out);
  // Whether the records so far were walked here, not read by libpcap.
  bool walked() const { return !pcap_; }

 private:
  bool map_at(uint64_t offset);
  void unmap();
  void to_libpcap();  // libpcap reads on from record number records_

  struct Descriptor {  // closed with the reader, also when its constructor throws
    int fd = -1;
    ~Descriptor();
  };
  std::string file_;
  Descriptor fd_;
  uint64_t size_ = 0;
  size_t window_;
  ClassicPcapFormat format_;
  bool walking_ = false;
  uint64_t offset_ = 0;   // the next record header's offset in the file
  uint64_t records_ = 0;  // records given so far
  const uint8_t *map_ = nullptr;  // the window [map_offset_, map_offset_ + map_len_)
  uint64_t map_offset_ = 0;
  size_t map_len_ = 0;
  std::unique_ptr<char[]> buffer_;  // libpcap's stdio buffer (outlives its FILE)
  ::pcap *pcap_ = nullptr;
};

}  // namespace sluice
