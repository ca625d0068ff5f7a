// PcapFileReader: the records of a trace file, with their bytes, for
// RSSSource's `pcap:FILE` devices: each record's nanosecond capture time,
// captured and wire lengths, and data (PcapRecord).
//
// A classic pcap file (magic a1b2c3d4 or a1b23c4d, either byte order,
// version 2.4, a link type the packet parser knows) is walked here: in place
// in its mapping when asked (`map`, a regular file: MappedFile), with a
// thread bringing the pages in ahead when asked (ReadAhead); or in chunks of
// 256 KiB read into buffers (slots) of whole records, a read() per chunk,
// on a thread of its own reading ahead when asked. Mapped, the records'
// bytes are read in place (by a packet pointing at them, InPlaceRecords,
// where the mapping is shared) or copied once, by whoever takes them;
// read(), twice, the kernel's copy on the reading thread
// (docs/performance.md, "A trace read in place"). DPDK's net_pcap, which read these files
// before, went through libpcap's stdio: a read() per 4 KiB, a second copy,
// microsecond times only, no wire length (docs/performance.md, "Trace
// files"). Anything else (pcapng, older versions, other magics and link
// types) and any record libpcap would read differently (caplen above the
// file's snapshot length or above len) goes to libpcap from that record on,
// so the records are always libpcap's.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/packet/mapped_file.hh"
#include "engine/packet/pcap_record.hh"
#include "engine/packet/trace_mapping.hh"

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

// Whether a PcapFileReader of `file` walks it in its mapping (a regular
// file in the classic format): its records can be handed on in place.
bool walked_in_place(const std::string &file);

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
  // Reading ahead on a thread of its own: the file's read() calls (a fifth
  // of a one-lane probe's time on a trace, most of it the kernel's copy)
  // leave the thread that takes the records, and overlap with its work.
  struct ReadAhead {
    unsigned slots = 4;               // chunks read and not yet taken, at most
    std::function<void()> on_thread;  // run first on the reading thread (its CPUs, say)
  };
  // Opens `file`; throws std::runtime_error when it cannot be read. With
  // `map`, a classic pcap file that is a regular file is mapped and walked
  // in place (to the size it had when opened; what is added later, and any
  // file that cannot be mapped, is read as below); the thread `ahead` asks
  // for brings its pages in before they are walked, one mapping and one
  // thread for all the readers walking the file at once (TraceMapping;
  // ReadAhead::slots unused).
  // Otherwise the file is read `chunk` bytes at a time, on the caller's
  // thread, or ahead of it on a thread of the reader's own when `ahead` is
  // given (a classic pcap file's walk only: libpcap's reading stays on the
  // caller's).
  explicit PcapFileReader(const std::string &file, size_t chunk = kChunk, std::optional<ReadAhead> ahead = {},
                          bool map = false);
  ~PcapFileReader();
  PcapFileReader(const PcapFileReader &) = delete;
  PcapFileReader &operator=(const PcapFileReader &) = delete;

  // The next record, its data valid until the next call: false at the end
  // of the file, at a truncated record, or where libpcap stops reading.
  bool next(PcapRecord &out);
  // Whether the bytes of the record last given were all the file's: false
  // when the file shrank under its mapping while they were read (they read
  // zeros from there). The caller drops such a record: the next call gives
  // it again as the file now has it, or ends where the file now ends.
  bool intact() const { return !map_ || map_record_end_ <= map_->intact_below(); }
  // About how far into the file the walk is, in bytes (where read() fills
  // slots ahead, up to their end).
  uint64_t offset() const { return map_ ? pos_ : read_offset_; }
  // Whether the records so far were walked here, not read by libpcap.
  bool walked() const { return !pcap_; }
  // Whether a thread reads the file ahead (now).
  bool reading_ahead() const { return reader_.joinable() || walker_ >= 0; }

  // The mapping the record last given was walked in, when it is one shared
  // through TraceMapping: its bytes then stay valid, past the next call,
  // for as long as the mapping is held (a packet may point at them:
  // InPlaceRecords). Null otherwise: the bytes were read into a slot or a
  // mapping of the reader's own, valid until the next call.
  const std::shared_ptr<TraceMapping> &record_mapping() const { return map_ && walker_ >= 0 ? shared_map_ : kNoMapping; }
  // Where in the file the record last given starts (its 16-byte header).
  size_t record_offset() const { return map_record_start_; }
  // The caller still reads the mapping's bytes from `offset` on (packets
  // pointing at records it holds): the pages from there stay mapped.
  void hold_pages_from(size_t offset) { hold_from_ = offset; }

 private:
  // Some of the file, read: whole records in bytes [0, records_end), and
  // what comes after them.
  struct Slot {
    enum class Then : uint8_t {
      More,       // more records: the next slot's
      EndOfFile,  // the end of the file (or a truncated record, or a read error)
      Libpcap,    // a record libpcap reads otherwise: it takes the file from here
    };
    std::unique_ptr<uint8_t[]> bytes;
    size_t records_end = 0;
    Then then = Then::More;
  };
  void fill(Slot &s);  // reads the records after the previous slot's
  void advance();      // the next slot in slot_
  void read_ahead(std::function<void()> on_thread);  // the reading thread
  void stop_reading_ahead();
  void to_libpcap();   // libpcap reads on from record number records_
  bool next_mapped(PcapRecord &out);  // false: read() takes the walk on from pos_ (leave_map)
  void leave_map();

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
  // The walk: slots of room for a chunk beyond the largest record. slot_ is
  // the one whose records are being given, the next record at pos_.
  size_t cap_ = 0;
  std::vector<Slot> slots_;
  Slot *slot_ = nullptr;
  size_t pos_ = 0;
  uint64_t read_offset_ = 0;  // the file's byte at the next slot's start (fill's)
  // Reading ahead: the slots filled and not yet taken (in file order), and
  // those free for the thread to fill; slot_ is in neither.
  std::thread reader_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Slot *> filled_, free_;
  bool stop_ = false;
  // The mapped walk: the next record at pos_ in map_, which is own_map_, or
  // shared_map_'s file (with a thread bringing pages in, shared with the
  // readers walking the same file) where this reader is its walker_. The
  // last record given started at map_record_start_.
  MappedFile *map_ = nullptr;
  std::unique_ptr<MappedFile> own_map_;
  std::shared_ptr<TraceMapping> shared_map_;
  int walker_ = -1;
  size_t hold_from_ = ~size_t(0);  // hold_pages_from()
  static inline const std::shared_ptr<TraceMapping> kNoMapping;
  size_t map_record_start_ = 0, map_record_end_ = 0;
  size_t map_prefetched_ = 0;  // the mapping's bytes below this were prefetched
  std::unique_ptr<char[]> buffer_;  // libpcap's stdio buffer (outlives its FILE)
  ::pcap *pcap_ = nullptr;
};

}  // namespace sluice
