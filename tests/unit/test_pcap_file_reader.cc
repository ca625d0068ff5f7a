// PcapFileReader gives the records libpcap gives (time in ns, caplen, wire
// length, the bytes), whether it walks the file itself or hands it to
// libpcap: on the real traces, on files of both byte orders and both
// precisions, across the edges of its read chunks, and on files with records
// libpcap reads in its own way (cut to the snapshot length, caplen above len,
// a truncated end, pcapng).
#include <pcap/pcap.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/packet/pcap_file_reader.hh"
#include "run_fixture.hh"

using namespace sluice;
namespace fs = std::filesystem;

namespace {

struct Seen {
  uint64_t ns;
  uint32_t caplen, len;
  std::string bytes;
  bool operator==(const Seen &) const = default;
};

std::ostream &operator<<(std::ostream &o, const Seen &s) {
  uint32_t sum = 0;  // the bytes in short
  for (unsigned char c : s.bytes) sum = sum * 31 + c;
  return o << "{ns " << s.ns << ", caplen " << s.caplen << ", len " << s.len << ", bytes #" << std::hex << sum
           << std::dec << "}";
}

Seen seen(const PcapRecord &r) {
  return {r.ns, r.caplen, r.len, std::string(reinterpret_cast<const char *>(r.data), r.caplen)};
}

// Every record as libpcap reads it.
std::vector<Seen> by_libpcap(const std::string &path) {
  char err[PCAP_ERRBUF_SIZE];
  pcap_t *p = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
  INFO(path << ": " << err);
  REQUIRE(p);
  std::vector<Seen> out;
  PcapRecord r;
  while (next_pcap_record(p, r)) out.push_back(seen(r));
  pcap_close(p);
  return out;
}

// The ways a reader can take a file: read() on the caller's thread, or by a
// thread of the reader's with two slots (the reader waiting for the thread
// and the thread for it, both); or mapped and walked in place, with or
// without a thread bringing the pages in.
enum class Way { Read, ReadAhead, Mapped, MappedAhead };
constexpr Way kWays[] = {Way::Read, Way::ReadAhead, Way::Mapped, Way::MappedAhead};
const char *way_name(Way w) {
  return w == Way::Read ? "read" : w == Way::ReadAhead ? "read ahead" : w == Way::Mapped ? "mapped" : "mapped, pages brought in ahead";
}

std::vector<Seen> by_reader(const std::string &path, size_t chunk, bool *walked = nullptr, Way way = Way::Read) {
  bool ahead = way == Way::ReadAhead || way == Way::MappedAhead;
  PcapFileReader reader(path, chunk, ahead ? std::optional(PcapFileReader::ReadAhead{2, nullptr}) : std::nullopt,
                        way == Way::Mapped || way == Way::MappedAhead);
  std::vector<Seen> out;
  PcapRecord r;
  bool all_walked = true;
  while (reader.next(r)) {
    all_walked = all_walked && reader.walked();
    out.push_back(seen(r));
    CHECK(reader.intact());
  }
  if (walked) *walked = all_walked;
  return out;
}

// That `got` is the first n records of `want`, record by record (a failure
// names the first that differs).
void require_first_records(const std::vector<Seen> &got, const std::vector<Seen> &want, size_t n) {
  REQUIRE(n <= want.size());
  REQUIRE(got.size() == n);
  for (size_t i = 0; i < n; ++i) {
    INFO("record " << i);
    REQUIRE(got[i] == want[i]);
  }
}

// Whether every way gives `want`.
void every_way_gives(const std::string &path, const std::vector<Seen> &want) {
  for (Way way : kWays) {
    INFO(way_name(way));
    CHECK(by_reader(path, 4096, nullptr, way) == want);
  }
}

// A classic pcap file, header fields and records as given (in our byte
// order, or swapped), records of `caplen` bytes each, of a pattern of their own.
struct RawRecord {
  uint32_t sec, frac, caplen, len;
};
std::string write_raw(const std::string &path, uint32_t magic, uint16_t major, uint16_t minor, uint32_t snaplen,
                      const std::vector<RawRecord> &records, bool swapped, size_t cut_end = 0,
                      uint32_t linktype = 1 /* Ethernet */) {
  std::string bytes;
  auto put32 = [&](uint32_t v) {
    if (swapped) v = __builtin_bswap32(v);
    bytes.append(reinterpret_cast<const char *>(&v), 4);
  };
  auto put16 = [&](uint16_t v) {
    if (swapped) v = __builtin_bswap16(v);
    bytes.append(reinterpret_cast<const char *>(&v), 2);
  };
  put32(magic), put16(major), put16(minor), put32(0), put32(0), put32(snaplen), put32(linktype);
  for (const RawRecord &r : records) {
    put32(r.sec), put32(r.frac), put32(r.caplen), put32(r.len);
    for (uint32_t i = 0; i < r.caplen; ++i) bytes.push_back(char(r.sec * 7 + r.frac + i));
  }
  bytes.resize(bytes.size() - std::min(cut_end, bytes.size()));
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::vector<RawRecord> many_records(size_t n) {
  std::vector<RawRecord> out;
  for (size_t i = 0; i < n; ++i) {
    uint32_t caplen = uint32_t(40 + (i * 977) % 1400);
    // times past 2038 too (libpcap reads the seconds as signed)
    out.push_back({uint32_t(1'700'000'000u + i * 3'000'000u), uint32_t((i * 123457) % 999999), caplen,
                   caplen + uint32_t(i % 3) * 100});
  }
  return out;
}

}  // namespace

TEST_CASE("pcap file reader: the real traces walked give libpcap's records", "[pcap]") {
  fs::path traces = fs::path(SLUICE_SOURCE_DIR) / "../shared/traces";
  if (!fs::exists(traces)) {
    WARN("skipped: " << traces << " is not there (the shared real traces)");
    return;
  }
  size_t files = 0;
  for (const auto &e : fs::recursive_directory_iterator(traces)) {
    std::string ext = e.path().extension();
    if (ext != ".pcap" && ext != ".pcapng") continue;
    INFO(e.path());
    std::vector<Seen> want = by_libpcap(e.path());
    bool walked = false;
    // Chunks of a page: every record near a chunk's edge somewhere.
    for (size_t chunk : {size_t(4096), PcapFileReader::kChunk})
      for (Way way : kWays) {
      INFO("chunk " << chunk << ", " << way_name(way));
      require_first_records(by_reader(e.path(), chunk, &walked, way), want, want.size());
      }
    CHECK(walked == (ext == ".pcap"));  // pcapng goes to libpcap
    ++files;
  }
  CHECK(files >= 2);
}

TEST_CASE("pcap file reader: both byte orders, both precisions, records across chunk edges", "[pcap]") {
  std::string dir = test::scratch("pcap-reader", "formats");
  std::vector<RawRecord> records = many_records(3000);
  for (bool swapped : {false, true})
    for (uint32_t magic : {0xa1b2c3d4u, 0xa1b23c4du}) {
      std::string path = write_raw(dir + "/f.pcap", magic, 2, 4, 65535, records, swapped);
      INFO("swapped " << swapped << " magic " << std::hex << magic);
      std::vector<Seen> want = by_libpcap(path);
      REQUIRE(want.size() == records.size());
      for (size_t chunk : {size_t(4096), size_t(8192), size_t(1) << 20})
        for (Way way : kWays) {
        INFO("chunk " << chunk << ", " << way_name(way));
        bool walked = false;
        std::vector<Seen> got = by_reader(path, chunk, &walked, way);
        CHECK(walked);
        require_first_records(got, want, want.size());
      }
    }
}

TEST_CASE("pcap file reader: records libpcap reads its own way go to libpcap, from that record on", "[pcap]") {
  std::string dir = test::scratch("pcap-reader", "handover");
  std::vector<RawRecord> records = many_records(200);
  SECTION("a record above the snapshot length (libpcap cuts it)") {
    records[120].caplen = 2000, records[120].len = 2000;
    std::string path = write_raw(dir + "/f.pcap", 0xa1b2c3d4u, 2, 4, 1500, records, false);
    std::vector<Seen> want = by_libpcap(path);
    REQUIRE(want.size() == 200);
    CHECK(want[120].caplen == 1500);
    every_way_gives(path, want);
  }
  SECTION("caplen above len") {
    records[50].len = records[50].caplen - 1;
    std::string path = write_raw(dir + "/f.pcap", 0xa1b2c3d4u, 2, 4, 65535, records, true);
    every_way_gives(path, by_libpcap(path));
  }
  SECTION("an older version (libpcap may swap caplen and len)") {
    std::string path = write_raw(dir + "/f.pcap", 0xa1b2c3d4u, 2, 2, 65535, records, false);
    bool walked = true;
    std::vector<Seen> got = by_reader(path, 4096, &walked);
    CHECK_FALSE(walked);
    CHECK(got == by_libpcap(path));
  }
  SECTION("a file cut in a record's body, and in a record's header") {
    for (size_t cut : {size_t(10), size_t(records.back().caplen + 5)}) {
      std::string path = write_raw(dir + "/f.pcap", 0xa1b23c4du, 2, 4, 65535, records, false, cut);
      std::vector<Seen> want = by_libpcap(path);
      CHECK(want.size() == 199);
      every_way_gives(path, want);
    }
  }
  SECTION("a link type whose lengths libpcap rewrites (Linux USB, mmapped)") {
    std::string path = write_raw(dir + "/f.pcap", 0xa1b2c3d4u, 2, 4, 65535, records, false, 0, 220);
    bool walked = true;
    std::vector<Seen> got = by_reader(path, 4096, &walked);
    CHECK_FALSE(walked);
    CHECK(got == by_libpcap(path));
  }
  SECTION("a file of its header alone") {
    std::string path = write_raw(dir + "/f.pcap", 0xa1b2c3d4u, 2, 4, 65535, {}, false);
    every_way_gives(path, {});
  }
}

TEST_CASE("pcap file reader: a file that is not a trace is an error naming it", "[pcap]") {
  std::string dir = test::scratch("pcap-reader", "errors");
  std::string path = test::write_file(dir + "/not.pcap", "this is not a capture file at all\n");
  try {
    PcapFileReader r(path);
    FAIL("no error");
  } catch (const std::runtime_error &e) {
    CHECK(std::string(e.what()).find("format") != std::string::npos);
  }
  CHECK_THROWS_WITH(PcapFileReader(dir + "/absent.pcap"), Catch::Contains("absent.pcap"));
}

// Fractions of 2^31 and more (garbage, but in real files) are signed in a
// file of our byte order and unsigned in the other; seconds from 2038 on
// come negative from libpcap (found by fuzz_pcap).
TEST_CASE("pcap file reader: libpcap's time for any seconds and fraction", "[pcap]") {
  std::string dir = test::scratch("pcap-reader", "times");
  std::vector<RawRecord> records = {{0x90000000u, 3970343532u, 60, 60}, {0x7fffffffu, 999999999u, 60, 60},
                                    {1700000000u, 0x80000000u, 60, 60}, {0xffffffffu, 0xffffffffu, 60, 60},
                                    {1, 1, 60, 60}};
  for (bool swapped : {false, true})
    for (uint32_t magic : {0xa1b2c3d4u, 0xa1b23c4du}) {
      INFO("swapped " << swapped << " magic " << std::hex << magic);
      std::string path = write_raw(dir + "/f.pcap", magic, 2, 4, 65535, records, swapped);
      bool walked = false;
      std::vector<Seen> got = by_reader(path, 4096, &walked);
      CHECK(walked);
      REQUIRE(got.size() == records.size());
      CHECK(got == by_libpcap(path));
    }
}

// The thread reading ahead: started where the file is walked, run with the
// caller's setup first, stopped (not left waiting for a slot) when the
// reader goes before the file's end, and gone once libpcap takes over.
TEST_CASE("pcap file reader: reading ahead on a thread of its own", "[pcap]") {
  std::string dir = test::scratch("pcap-reader", "ahead");
  std::vector<RawRecord> records = many_records(3000);
  std::string path = write_raw(dir + "/f.pcap", 0xa1b2c3d4u, 2, 4, 65535, records, false);
  std::vector<Seen> want = by_libpcap(path);
  std::atomic<int> setups{0};
  std::atomic<bool> other_thread{false};
  std::thread::id caller = std::this_thread::get_id();
  SECTION("the setup runs on the reading thread; a reader gone mid-file stops it") {
    {
      PcapFileReader reader(path, 4096, PcapFileReader::ReadAhead{2, [&] {
                              other_thread = std::this_thread::get_id() != caller;
                              ++setups;
                            }});
      CHECK(reader.reading_ahead());
      PcapRecord r;
      for (int i = 0; i < 10; ++i) {
        REQUIRE(reader.next(r));
        CHECK(seen(r) == want[size_t(i)]);
      }
    }  // two slots of 4 KiB: the thread is waiting for a free one here
    CHECK(setups == 1);
    CHECK(other_thread);
  }
  SECTION("libpcap takes over from the record it reads its own way") {
    records[2500].caplen = 2000, records[2500].len = 2000;
    path = write_raw(dir + "/cut.pcap", 0xa1b2c3d4u, 2, 4, 1500, records, false);
    PcapFileReader reader(path, 4096, PcapFileReader::ReadAhead{3, nullptr});
    want = by_libpcap(path);
    std::vector<Seen> got;
    PcapRecord r;
    while (reader.next(r)) {
      if (got.size() == 2499) CHECK(reader.reading_ahead());
      got.push_back(seen(r));
    }
    CHECK_FALSE(reader.reading_ahead());
    CHECK_FALSE(reader.walked());
    CHECK(got == want);
  }
  SECTION("not a classic pcap file: libpcap reads it, no thread") {
    std::string ng = dir + "/older.pcap";
    write_raw(ng, 0xa1b2c3d4u, 2, 2, 65535, records, false);
    PcapFileReader reader(ng, 4096, PcapFileReader::ReadAhead{2, [&] { ++setups; }});
    CHECK_FALSE(reader.reading_ahead());
    CHECK(setups == 0);
  }
}

namespace {
// Where record i of write_raw's file starts.
size_t record_offset(const std::vector<RawRecord> &records, size_t i) {
  size_t at = 24;
  for (size_t j = 0; j < i; ++j) at += 16 + records[j].caplen;
  return at;
}
}  // namespace

// A trace can be cut short while it is walked in its mapping (rewritten by
// whoever wrote it): its pages past the new end raise SIGBUS when read,
// which ended the process, and the page the end falls in reads zeros past
// it. The reader's mapping catches the faults and looks at the file's size
// where it finds zeros: the record cut is not intact and is dropped, and
// the walk ends where the file now ends, with the records read() gives.
TEST_CASE("pcap file reader: a mapped trace cut short while it is walked ends where the file ends, without a SIGBUS",
          "[pcap]") {
  std::string dir = test::scratch("pcap-reader", "shrinks");
  std::vector<RawRecord> records = many_records(3000);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  // Where to cut, from record 1000 on: the first record that fits `where`.
  struct Cut {
    const char *what;
    std::function<std::optional<size_t>(size_t start, size_t end)> where;
  };
  auto page_after = [&](size_t at) { return (at + page - 1) / page * page; };
  const Cut cuts[] = {
      {"at a page's start, in a record whose header is in the page before",
       [&](size_t start, size_t end) -> std::optional<size_t> {
         if (page_after(start + 16) < end) return page_after(start + 16);
         return {};
       }},
      {"in a record's bytes, the record ending in the same page",
       [&](size_t start, size_t end) -> std::optional<size_t> {
         if (page_after(start + 16) >= end + 16 && end - start > 40) return start + 16 + 7;
         return {};
       }},
      {"in a record's bytes, the record going on into the next page",
       [&](size_t start, size_t end) -> std::optional<size_t> {
         size_t next = page_after(start + 16);
         if (next < end && next - (start + 16) > 20) return next - 13;
         return {};
       }},
      {"in a record's last bytes, the next header in the next page",
       [&](size_t start, size_t end) -> std::optional<size_t> {
         size_t next = page_after(end);
         if (end + 16 > next && end - 3 > start + 16 && end - 3 > next - page) return end - 3;
         return {};
       }},
      {"between two records, in a page",
       [&](size_t start, size_t) -> std::optional<size_t> {
         if (start % page > 64 && start % page < page - 64) return start;
         return {};
       }},
  };
  for (const Cut &c : cuts)
    for (bool ahead : {false, true}) {
      INFO(c.what << (ahead ? ", pages brought in ahead" : ", no thread"));
      std::string path = write_raw(dir + "/f.pcap", 0xa1b2c3d4u, 2, 4, 65535, records, false);
      std::vector<Seen> want = by_libpcap(path);
      size_t whole = 1000, cut = 0;  // the records below the cut
      for (;; ++whole) {
        REQUIRE(whole < records.size());
        size_t start = record_offset(records, whole);
        if (auto at = c.where(start, start + 16 + records[whole].caplen)) {
          cut = *at;
          break;
        }
      }
      PcapFileReader reader(path, 4096,
                            ahead ? std::optional(PcapFileReader::ReadAhead{2, nullptr}) : std::nullopt, true);
      std::vector<Seen> got;
      PcapRecord r;
      for (int i = 0; i < 100; ++i) {
        REQUIRE(reader.next(r));
        got.push_back(seen(r));
      }
      REQUIRE(truncate(path.c_str(), off_t(cut)) == 0);
      while (reader.next(r)) {
        Seen s = seen(r);  // reads the record's bytes (past the cut, zeros, or a fault)
        if (reader.intact()) got.push_back(s);
      }
      require_first_records(got, want, whole);
    }
}

// The mapping is of the file as it was opened: what is written to it later
// (a capture still being written) is read on from there.
TEST_CASE("pcap file reader: a mapped trace that grows while it is walked gives the records added", "[pcap]") {
  std::string dir = test::scratch("pcap-reader", "grows");
  std::vector<RawRecord> records = many_records(600);
  std::string path = write_raw(dir + "/f.pcap", 0xa1b2c3d4u, 2, 4, 65535, records, false);
  std::vector<Seen> want = by_libpcap(path);
  // The first 400 records and half of the 401st, then the rest.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  size_t first = record_offset(records, 400) + 30;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, first);
  PcapFileReader reader(path, 4096, std::nullopt, true);
  std::vector<Seen> got;
  PcapRecord r;
  for (int i = 0; i < 399; ++i) {
    REQUIRE(reader.next(r));
    got.push_back(seen(r));
  }
  std::ofstream(path, std::ios::binary | std::ios::app) << bytes.substr(first);
  while (reader.next(r)) got.push_back(seen(r));
  CHECK(got == want);
}

namespace {
// Threads of this process named `name` now.
int threads_named(const std::string &name) {
  int n = 0;
  for (const auto &task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string got;
    if (std::getline(comm, got) && got == name) ++n;
  }
  return n;
}
// threads_named(name) once it is `want` (a thread names itself as it
// starts, and is gone a little after it was told to end), or after 2 s.
int threads_named_soon(const std::string &name, int want) {
  int n = threads_named(name);
  for (int i = 0; i < 2000 && n != want; ++i, n = threads_named(name)) usleep(1000);
  return n;
}
}  // namespace

// The lanes of a trace each walk it whole: readers of one file at the same
// time share its mapping and the one thread that brings its pages in ahead
// of the furthest and lets go of them behind the slowest; each reads every
// record. Another file gets a mapping of its own.
TEST_CASE("pcap file reader: readers of one file at once share its mapping and the thread that keeps its pages brought in ahead", "[pcap]") {
  std::string dir = test::scratch("pcap-reader", "shared-mapping");
  std::vector<RawRecord> records = many_records(40000);  // ~30 MB: several windows of the thread
  std::string path = write_raw(dir + "/f.pcap", 0xa1b2c3d4u, 2, 4, 65535, records, false);
  std::vector<Seen> want = by_libpcap(path);
  const int before = threads_named("sl-pcap-read");
  std::atomic<int> setups{0};
  auto open = [&] {
    return std::make_unique<PcapFileReader>(path, PcapFileReader::kChunk,
                                            PcapFileReader::ReadAhead{2, [&] { ++setups; }}, true);
  };
  {
    auto a = open(), b = open();
    CHECK(a->reading_ahead());
    CHECK(b->reading_ahead());
    CHECK(threads_named_soon("sl-pcap-read", before + 1) == before + 1);
    {
      std::vector<RawRecord> other = many_records(100);
      std::string changed = write_raw(dir + "/g.pcap", 0xa1b2c3d4u, 2, 4, 65535, other, false);
      PcapFileReader c(changed, PcapFileReader::kChunk, PcapFileReader::ReadAhead{2, nullptr}, true);
      CHECK(threads_named_soon("sl-pcap-read", before + 2) == before + 2);  // another file: its own
    }
    // b starts behind and stays behind: a runs 3 records for each of b's.
    std::vector<Seen> got_a, got_b;
    PcapRecord r;
    bool more_a = true, more_b = true;
    while (more_a || more_b) {
      for (int k = 0; k < 3 && more_a; ++k)
        if ((more_a = a->next(r))) got_a.push_back(seen(r));
      if (more_b && (more_b = b->next(r))) got_b.push_back(seen(r));
    }
    CHECK(got_a == want);
    CHECK(got_b == want);
  }
  CHECK(setups == 1);  // the thread's setup ran once, for both
  CHECK(threads_named_soon("sl-pcap-read", before) == before);  // gone with the last reader
}

// Pages brought in ahead, and let go behind, over a file of several times
// the window; more readers at once than the SIGBUS guard has room for (those
// read() the file).
TEST_CASE("pcap file reader: mapped, pages brought in ahead on a thread of its own, many readers at once", "[pcap]") {
  std::string dir = test::scratch("pcap-reader", "mapped-ahead");
  std::vector<RawRecord> records = many_records(40000);  // ~30 MB
  std::string path = write_raw(dir + "/f.pcap", 0xa1b23c4du, 2, 4, 65535, records, true);
  std::vector<Seen> want = by_libpcap(path);
  std::atomic<bool> other_thread{false};
  std::thread::id caller = std::this_thread::get_id();
  {
    PcapFileReader reader(path, PcapFileReader::kChunk, PcapFileReader::ReadAhead{2, [&] {
                            other_thread = std::this_thread::get_id() != caller;
                          }},
                          true);
    CHECK(reader.reading_ahead());
    PcapRecord r;
    size_t n = 0;
    for (; reader.next(r); ++n) {
      REQUIRE(n < want.size());
      REQUIRE(seen(r) == want[n]);
    }
    CHECK(n == want.size());
    CHECK(reader.walked());
  }
  CHECK(other_thread);
  std::vector<RawRecord> few = many_records(50);
  std::string small = write_raw(dir + "/small.pcap", 0xa1b2c3d4u, 2, 4, 65535, few, false);
  std::vector<Seen> small_want = by_libpcap(small);
  std::vector<std::unique_ptr<PcapFileReader>> readers;
  for (int i = 0; i < 80; ++i) readers.push_back(std::make_unique<PcapFileReader>(small, 4096, std::nullopt, true));
  for (auto &reader : readers) {
    std::vector<Seen> got;
    PcapRecord r;
    while (reader->next(r)) got.push_back(seen(r));
    CHECK(got == small_want);
  }
}
