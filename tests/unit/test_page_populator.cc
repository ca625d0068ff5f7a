// PagePopulator: a flow table's memory brought in on a thread of its own.
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/flow/page_populator.hh"

using namespace sluice;

namespace {
constexpr size_t kPage = 4096;

// Anonymous memory on small pages (a huge page would make a page brought
// in bring its 511 neighbours with it).
struct Anon {
  explicit Anon(size_t bytes) : n(bytes) {
    p = static_cast<uint8_t *>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
    REQUIRE(p != MAP_FAILED);
    madvise(p, n, MADV_NOHUGEPAGE);
  }
  ~Anon() { munmap(p, n); }
  // Pages of [from, to) resident now.
  size_t resident(size_t from, size_t to) const {
    std::vector<unsigned char> v((to - from + kPage - 1) / kPage);
    REQUIRE(mincore(p + from, to - from, v.data()) == 0);
    size_t k = 0;
    for (unsigned char c : v) k += c & 1;
    return k;
  }
  uint8_t *p;
  size_t n;
};

template <class F>
bool within_5s(F done) {
  for (int i = 0; i < 5000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return done();
}

bool kernel_has_populate_write() {  // Linux 5.14
  utsname u{};
  int major = 0, minor = 0;
  return uname(&u) == 0 && std::sscanf(u.release, "%d.%d", &major, &minor) == 2 && (major > 5 || (major == 5 && minor >= 14));
}
}  // namespace

TEST_CASE("page populator: an index at once, slot arrays ahead of the frontier, and nothing written", "[flowcache][populate]") {
  if (!kernel_has_populate_write()) {
    WARN("skipped: the kernel has no MADV_POPULATE_WRITE (Linux 5.14)");
    return;
  }
  Anon index(size_t(4) << 20), slots(size_t(4) << 20);
  constexpr size_t kSlotBytes = 64, kSlots = (size_t(4) << 20) / kSlotBytes, kLead = 4096;
  // What a lane wrote before the thread got there stays.
  std::memset(index.p + 5 * kPage, 0xab, kPage);
  std::memset(slots.p, 0xcd, 10 * kSlotBytes);
  REQUIRE(index.resident(0, index.n) == 1);
  {
    PagePopulator pop({{index.p, index.n}}, {{slots.p, kSlotBytes, kSlots}}, kLead, nullptr);
    REQUIRE(within_5s([&] { return pop.at_once_done() && pop.ahead_done() >= kLead; }));
    REQUIRE(pop.supported());
    CHECK(index.resident(0, index.n) == index.n / kPage);
    const size_t lead_end = kLead * kSlotBytes;  // 256 KiB
    CHECK(slots.resident(0, lead_end) == lead_end / kPage);
    CHECK(slots.resident(lead_end, slots.n) == 0);  // not past the lead
    // The frontier moves: the lead follows it.
    pop.advance(8192);
    REQUIRE(within_5s([&] { return pop.ahead_done() >= 8192 + kLead; }));
    const size_t now_end = (8192 + kLead) * kSlotBytes;
    CHECK(slots.resident(0, now_end) == now_end / kPage);
    CHECK(slots.resident(now_end, slots.n) == 0);
    pop.advance(100);  // behind: nothing changes
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(pop.ahead_done() == 8192 + kLead);
    CHECK(pop.bytes_brought_in() == index.n + now_end);
  }
  for (size_t i = 0; i < kPage; ++i) REQUIRE(index.p[5 * kPage + i] == 0xab);
  for (size_t i = 0; i < 10 * kSlotBytes; ++i) REQUIRE(slots.p[i] == 0xcd);
  CHECK(index.p[0] == 0);
  CHECK(slots.p[10 * kSlotBytes] == 0);
}

TEST_CASE("page populator: destroyed while it works, it stops and brings nothing more in", "[flowcache][populate]") {
  if (!kernel_has_populate_write()) {
    WARN("skipped: the kernel has no MADV_POPULATE_WRITE (Linux 5.14)");
    return;
  }
  Anon big(size_t(1) << 30);  // a GiB: longer to bring in than the test waits
  {
    PagePopulator pop({{big.p, big.n}}, {}, 0, nullptr);
    REQUIRE(within_5s([&] { return pop.bytes_brought_in() > 0; }));
  }  // the destructor returns once the thread has stopped
  const size_t at_end = big.resident(0, big.n);
  CHECK(at_end < big.n / kPage);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(big.resident(0, big.n) == at_end);
}
