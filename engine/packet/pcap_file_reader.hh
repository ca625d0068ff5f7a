// PcapFileReader: the records of a trace file, with their bytes, for
// RSSSource's `pcap:FILE` devices: each record's nanosecond capture time,
// captured and wire lengths, and data (PcapRecord).
//
// A classic pcap file (magic a1b2c3d4 or a1b23c4d, either byte order,
// version 2.4, a link type the packet parser knows) is read here, in chunks
// of 256 KiB into one buffer that the records are walked in: one copy out of
// the kernel, a read() per chunk. DPDK's net_pcap, which read these files
// before, went through libpcap's stdio: a read() per 4 KiB, a second copy,
// microsecond times only, no wire length (docs/performance.md, "Trace
// files"). Anything else (pcapng, older versions, other magics and link
// types) and any record libpcap would read differently (caplen above the
// file's snapshot length or above len) goes to libpcap from that record on,
// so the records are always libpcap's.
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

class PcapFileReader {
 public:
  // The chunk measured fastest reading a 1 GB trace from the page cache
  // (128 KiB to 1 MiB tried): the copy out of the kernel stays in L2.
  static constexpr size_t kChunk = size_t(256) << 10;
  // Opens `file`; throws std::runtime_error when it cannot be read. The
  // file is read `chunk` bytes at a time.
  explicit PcapFileReader(const std::string &file, size_t chunk = kChunk);
  ~PcapFileReader();
  PcapFileReader(const PcapFileReader &) = delete;
  PcapFileReader &operator=(const PcapFileReader &) = delete;

  // The next record, its data valid until the next call: false at the end
  // of the file, at a truncated record, or where libpcap stops reading.
  bool next(PcapRecord &out);
  // Whether the records so far were walked here, not read by libpcap.
  bool walked() const { return !pcap_; }

 private:
  bool have(size_t n);  // at least n bytes in the buffer from pos_, reading more if needed
  void to_libpcap();    // libpcap reads on from record number records_

  struct Descriptor {  // closed with the reader, also when its constructor throws
    int fd = -1;
    ~Descriptor();
  };
  std::string file_;
  Descriptor fd_;
  size_t chunk_;
  ClassicPcapFormat format_;
  bool walking_ = false;
  uint64_t records_ = 0;  // records given so far
  // The walk's buffer: bytes [0, fill_) read from the file, the next record
  // header at pos_; room for a chunk beyond the largest record.
  std::unique_ptr<uint8_t[]> buf_;
  size_t cap_ = 0, fill_ = 0, pos_ = 0;
  uint64_t read_offset_ = 0;  // the file's next byte to read into it
  std::unique_ptr<char[]> buffer_;  // libpcap's stdio buffer (outlives its FILE)
  ::pcap *pcap_ = nullptr;
};

}  // namespace sluice
