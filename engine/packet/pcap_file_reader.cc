#include "engine/packet/pcap_file_reader.hh"

#include <fcntl.h>
#include <pcap/pcap.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace sluice {

namespace {

constexpr uint32_t kMagicMicro = 0xa1b2c3d4, kMagicNano = 0xa1b23c4d;
constexpr size_t kFileHeader = 24, kRecordHeader = 16;
// libpcap's MAXIMUM_SNAPLEN: the snapshot of a file whose snaplen is 0 or
// larger (a few link types allow more; their larger records go to libpcap).
constexpr uint32_t kMaxSnapshot = 262144;

uint32_t load32(const uint8_t *p, bool swapped) {
  uint32_t v;
  memcpy(&v, p, 4);
  return swapped ? __builtin_bswap32(v) : v;
}
// Whether the 16 bytes at p are all zero.
bool zeros(const uint8_t *p) {
  uint64_t a, b;
  memcpy(&a, p, 8), memcpy(&b, p + 8, 8);
  return (a | b) == 0;
}
uint16_t load16(const uint8_t *p, bool swapped) {
  uint16_t v;
  memcpy(&v, p, 2);
  return swapped ? __builtin_bswap16(v) : v;
}

}  // namespace

bool classic_pcap_format(const uint8_t *data, size_t size, ClassicPcapFormat &out) {
  if (size < kFileHeader) return false;
  uint32_t magic = load32(data, false);
  out = ClassicPcapFormat{};
  if (magic == kMagicMicro || magic == kMagicNano) {
    out.swapped = false;
  } else if (__builtin_bswap32(magic) == kMagicMicro || __builtin_bswap32(magic) == kMagicNano) {
    out.swapped = true, magic = __builtin_bswap32(magic);
  } else {
    return false;  // pcapng, or a magic of the modified formats
  }
  out.nanoseconds = magic == kMagicNano;
  // 2.4 only: libpcap swaps caplen and len in older files.
  if (load16(data + 4, out.swapped) != 2 || load16(data + 6, out.swapped) != 4) return false;
  // Link types the parser knows, without FCS bits: libpcap changes the
  // headers of some others (the length of Linux USB mmapped captures).
  switch (load32(data + 20, out.swapped)) {
    case 0: case 1: case 9: case 12: case 14: case 101: case 108: case 113: case 228: case 229: case 239: case 276:
      break;
    default:
      return false;
  }
  uint32_t snaplen = load32(data + 16, out.swapped);
  out.snapshot = snaplen == 0 || snaplen > kMaxSnapshot ? kMaxSnapshot : snaplen;
  return true;
}

bool walked_in_place(const std::string &file) {
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  uint8_t header[kFileHeader];
  ClassicPcapFormat f;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && size_t(st.st_size) > kFileHeader &&
            pread(fd, header, kFileHeader, 0) == ssize_t(kFileHeader) && classic_pcap_format(header, kFileHeader, f);
  close(fd);
  return ok;
}

ClassicRecord classic_pcap_record(const uint8_t *hdr, const ClassicPcapFormat &f, PcapRecord &out) {
  // libpcap 1.10 reads the seconds and the fraction as signed 32 bits, but
  // as unsigned in a file of the other byte order (its byte swap yields an
  // unsigned value): 2038 and later, and fractions of 2^31 and more, give
  // other times there. The same here, so that the times are libpcap's.
  uint32_t raw_sec = load32(hdr, f.swapped), raw_frac = load32(hdr + 4, f.swapped);
  int64_t sec = f.swapped ? int64_t(raw_sec) : int64_t(int32_t(raw_sec));
  int64_t frac = f.swapped ? int64_t(raw_frac) : int64_t(int32_t(raw_frac));
  uint32_t caplen = load32(hdr + 8, f.swapped), len = load32(hdr + 12, f.swapped);
  if (caplen > f.snapshot || caplen > len) return ClassicRecord::ToLibpcap;  // libpcap cuts or rejects these
  // At nanosecond precision libpcap scales a microsecond fraction by 1000.
  int64_t ns = f.nanoseconds ? frac : frac * 1000;
  out = {record_time_ns(sec, ns), caplen, len, nullptr};
  return ClassicRecord::Ok;
}

PcapFileReader::PcapFileReader(const std::string &file, size_t chunk, std::optional<ReadAhead> ahead, bool map)
    : file_(file), chunk_(std::max<size_t>(chunk, 4096)) {
  fd_.fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_.fd < 0) throw std::runtime_error("cannot open " + file + ": " + strerror(errno));
  uint8_t header[kFileHeader];
  if (pread(fd_.fd, header, kFileHeader, 0) == ssize_t(kFileHeader) && classic_pcap_format(header, kFileHeader, format_)) {
    walking_ = true;
    cap_ = chunk_ + kRecordHeader + format_.snapshot;
    read_offset_ = kFileHeader;
    if (map && ahead) {  // the file's pages brought in by the thread of its mapping, shared with other walkers
      shared_map_ = TraceMapping::open(fd_.fd, std::move(ahead->on_thread));
      if (shared_map_ && shared_map_->file().size() > kFileHeader) walker_ = shared_map_->join(kFileHeader);
      if (walker_ >= 0) {
        map_ = &shared_map_->file();
        pos_ = kFileHeader;
        return;
      }
      shared_map_.reset();
    }
    if (map) {
      auto mapped = std::make_unique<MappedFile>(fd_.fd);
      if (mapped->size() > kFileHeader) {
        own_map_ = std::move(mapped);
        map_ = own_map_.get();
        pos_ = kFileHeader;
        return;
      }
    }
    // Two slots at least when reading ahead: one being given, one being filled.
    slots_.resize(ahead ? std::max(ahead->slots, 2u) : 1);
    for (Slot &s : slots_) s.bytes = std::make_unique_for_overwrite<uint8_t[]>(cap_);
    if (ahead) {
      for (Slot &s : slots_) free_.push_back(&s);
      reader_ = std::thread(&PcapFileReader::read_ahead, this, std::move(ahead->on_thread));
    }
  } else {
    to_libpcap();
  }
}

PcapFileReader::~PcapFileReader() {
  stop_reading_ahead();
  if (pcap_) pcap_close(pcap_);  // before buffer_ goes
}

PcapFileReader::Descriptor::~Descriptor() {
  if (fd >= 0) close(fd);
}

bool PcapFileReader::next(PcapRecord &out) {
  if (map_) {
    if (next_mapped(out)) return true;
    leave_map();
  }
  if (walking_) {
    while (!slot_ || pos_ == slot_->records_end) {
      if (slot_ && slot_->then == Slot::Then::EndOfFile) return walking_ = false;
      if (slot_ && slot_->then == Slot::Then::Libpcap) {
        try {
          to_libpcap();
        } catch (const std::runtime_error &) {
          return false;  // the file ends here
        }
        return next(out);
      }
      advance();
    }
    classic_pcap_record(slot_->bytes.get() + pos_, format_, out);  // Ok: fill() walked it
    out.data = slot_->bytes.get() + pos_ + kRecordHeader;
    pos_ += kRecordHeader + out.caplen;
    ++records_;
    return true;
  }
  if (!pcap_ || !next_pcap_record(pcap_, out)) return false;
  ++records_;
  return true;
}

// The next record in the mapping, in place. Anything but a whole record
// there, as mapped and intact, is left to read(): the end of the file (or
// of what was mapped: the file may have grown since), a truncated record, a
// record libpcap reads its own way, a file that shrank.
bool PcapFileReader::next_mapped(PcapRecord &out) {
  if (map_record_end_ > map_->intact_below()) {  // the last record was cut short: given again by read()
    pos_ = map_record_start_, map_record_end_ = 0;
    --records_;
    return false;
  }
  const uint8_t *header = map_->data() + pos_;
  if (pos_ + kRecordHeader > map_->size() || classic_pcap_record(header, format_, out) == ClassicRecord::ToLibpcap)
    return false;
  size_t end = pos_ + kRecordHeader + out.caplen;
  // A header of zeros, this one or the next: where a file cut short ends
  // in a page, the kernel's zeros past the end read as empty records, and
  // this record may be cut (a real trace hardly has such a header: a look
  // at the file's size tells them apart). A fault reading the next header
  // lowers intact_below too.
  if (zeros(header) || (end + kRecordHeader <= map_->size() && zeros(map_->data() + end))) map_->check_size();
  // Loaded after the headers were read: a fault there shows in it.
  if (end > std::min(map_->size(), map_->intact_below())) return false;
  out.data = header + kRecordHeader;
  map_record_start_ = pos_;
  map_record_end_ = pos_ = end;
  // Every cache line of the next kPrefetchAhead bytes on its way: the page
  // thread maps pages but reads none of them, so each header read here (the
  // next one, just above) waited for memory, as did the copy of its record.
  // Lines, not a line a record: a line per record lands on the next headers
  // by chance only. A prefetch does not fault, past a file's end either.
  constexpr size_t kPrefetchAhead = 4096;
  const size_t ahead = std::min(map_->size(), end + kPrefetchAhead);
  for (size_t at = std::max(map_prefetched_, end) & ~size_t(63); at < ahead; at += 64)
    __builtin_prefetch(map_->data() + at);
  map_prefetched_ = std::max(map_prefetched_, ahead);
  // 4 MiB further: the page thread may go on (it keeps 8 MiB ahead). A
  // wake-up every MiB cost the walk ~10 us each on a VM (1.3% of a trace's
  // run, in futex_wake).
  if (walker_ >= 0 && (map_record_start_ ^ pos_) >> 22) shared_map_->walked(walker_, pos_, hold_from_);
  // Every MiB: where other lanes walk the file too, within a few MiB of them
  // (the lines they read are in the shared cache).
  else if (walker_ >= 0 && (map_record_start_ ^ pos_) >> 20) shared_map_->keep_pace(walker_, pos_);
  ++records_;
  return true;
}

// read() goes on from pos_, on this thread.
void PcapFileReader::leave_map() {
  stop_reading_ahead();
  read_offset_ = pos_;
  map_ = nullptr;
  own_map_.reset();
  shared_map_.reset();
  map_record_end_ = 0;
  slots_.resize(1);
  slots_.front().bytes = std::make_unique_for_overwrite<uint8_t[]>(cap_);
  slot_ = nullptr, pos_ = 0;
}

// Reads a chunk from read_offset_ (more, until one record is whole) and
// keeps the whole records: the one cut at the chunk's end is read again,
// from its start, by the next fill (a record among hundreds per chunk).
void PcapFileReader::fill(Slot &s) {
  uint8_t *bytes = s.bytes.get();
  size_t have = 0, pos = 0;
  bool end = false;  // no more bytes: the file's end, or a read error
  auto read_more = [&] {
    ssize_t got;
    do {
      got = pread(fd_.fd, bytes + have, std::min(chunk_, cap_ - have), off_t(read_offset_ + have));
    } while (got < 0 && errno == EINTR);
    if (got <= 0) return !(end = true);
    have += size_t(got);
    return true;
  };
  read_more();
  for (;;) {
    PcapRecord r;
    bool header = have - pos >= kRecordHeader;
    if (header && classic_pcap_record(bytes + pos, format_, r) == ClassicRecord::ToLibpcap) {
      s.then = Slot::Then::Libpcap;
      break;
    }
    if (header && have - pos >= kRecordHeader + r.caplen) {  // caplen <= snapshot: a whole record fits
      pos += kRecordHeader + r.caplen;
      continue;
    }
    if (pos > 0) {  // a truncated record at the end ends the file, as libpcap's read error does
      s.then = end ? Slot::Then::EndOfFile : Slot::Then::More;
      break;
    }
    if (end || !read_more()) {
      s.then = Slot::Then::EndOfFile;
      break;
    }
  }
  s.records_end = pos;
  read_offset_ += pos;
}

// The next slot of records: filled here, or taken from the reading thread
// (waiting for it: a file is read as fast as it is taken, never dropped).
void PcapFileReader::advance() {
  pos_ = 0;
  if (!reader_.joinable()) {
    slot_ = &slots_.front();
    fill(*slot_);
    return;
  }
  std::unique_lock lock(mutex_);
  if (slot_) {
    free_.push_back(slot_);
    changed_.notify_all();
  }
  changed_.wait(lock, [&] { return !filled_.empty(); });
  slot_ = filled_.front();
  filled_.pop_front();
}

// The reading thread: fills free slots in file order until a slot that
// ends the walk, or until told to stop.
void PcapFileReader::read_ahead(std::function<void()> on_thread) {
  pthread_setname_np(pthread_self(), "sl-pcap-read");
  if (on_thread) on_thread();
  for (;;) {
    Slot *s;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || !free_.empty(); });
      if (stop_) return;
      s = free_.front();
      free_.pop_front();
    }
    fill(*s);
    bool last = s->then != Slot::Then::More;
    {
      std::lock_guard lock(mutex_);
      filled_.push_back(s);
    }
    changed_.notify_all();
    if (last) return;
  }
}

void PcapFileReader::stop_reading_ahead() {
  if (walker_ >= 0) {  // the mapping's thread lets go of what this reader held back
    shared_map_->leave(walker_);
    walker_ = -1;
  }
  if (!reader_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  reader_.join();
}

// libpcap reads the file from the start, through a descriptor of the one
// opened (the file may have been renamed or removed since); the records
// given so far are skipped. With a 64 KiB stdio buffer: the default (the
// file system's block, 4 KiB) made a read() per 4 KiB; 1 MiB measured slower
// (the copies out of the kernel missed the caches).
void PcapFileReader::to_libpcap() {
  walking_ = false;
  stop_reading_ahead();
  slot_ = nullptr;
  filled_.clear(), free_.clear();
  slots_.clear();
  int fd = dup(fd_.fd);
  FILE *f = fd < 0 || lseek(fd, 0, SEEK_SET) != 0 ? nullptr : fdopen(fd, "rb");
  if (!f) {
    int e = errno;
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot read " + file_ + ": " + strerror(e));
  }
  constexpr size_t kBuffer = 64 << 10;
  if (!buffer_) buffer_ = std::make_unique<char[]>(kBuffer);
  setvbuf(f, buffer_.get(), _IOFBF, kBuffer);
  char err[PCAP_ERRBUF_SIZE];
  pcap_ = pcap_fopen_offline_with_tstamp_precision(f, PCAP_TSTAMP_PRECISION_NANO, err);
  if (!pcap_) {
    fclose(f);
    throw std::runtime_error(err);
  }
  PcapRecord skipped;
  for (uint64_t i = 0; i < records_; ++i)
    if (!next_pcap_record(pcap_, skipped)) break;
}

}  // namespace sluice
