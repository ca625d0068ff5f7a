// The runtime's parts in one process: channels between segments (a Ring's
// buffer: a live lane drops what does not fit and counts it as "ring full",
// an offline lane waits for room and gives up only when the run is aborted),
// and segment loops swapped while running. Runs DPDK in this process (CTest
// gives each test case its own).
#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <chrono>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "engine/base/clock.hh"
#include "engine/placement/host_topology.hh"
#include "engine/runtime/compile_decision.hh"
#include "engine/runtime/dpdk_env.hh"
#include "engine/packet/mapped_file.hh"
#include "engine/packet/trace_mapping.hh"
#include "engine/runtime/eth_device.hh"
#include "engine/runtime/in_place_records.hh"
#include "engine/runtime/program_cache.hh"
#include "engine/runtime/runtime.hh"
#include "frontend_fixture.hh"
#include "pcap_fixture.hh"
#include "run_fixture.hh"

using namespace sluice;

namespace {

struct RingFixture {
  std::unique_ptr<test::Compiled> c;
  std::unique_ptr<Runtime> rt;
  Channel *channel = nullptr;
  RuntimeElement *ring = nullptr;
  rte_mempool *pool = nullptr;

  explicit RingFixture(const std::string &capacity = "64", unsigned buffers = 1024)
      : c(test::compile_text("TrafficGen(flows 10, duration 10ms) -> r :: Ring(capacity " + capacity + ") -> Discard;")) {
    REQUIRE(c->ok);
    RunOptions o;
    o.eal_args = {"--no-huge"};
    rt = std::make_unique<Runtime>(c->pipe, o);
    std::string err;
    REQUIRE(rt->setup(&err));
    ring = rt->find("r#0");
    REQUIRE(ring);
    channel = ring->targets(0).at(0).channel;
    REQUIRE(channel);
    static int n = 0;
    pool = rte_pktmbuf_pool_create(("test" + std::to_string(n++)).c_str(), buffers, 0, kMbufPrivSize, 256,
                                   SOCKET_ID_ANY);
    REQUIRE(pool);
  }
  PacketBatch batch(int n) {
    PacketBatch b;
    REQUIRE(rte_pktmbuf_alloc_bulk(pool, b.pkts, unsigned(n)) == 0);
    b.count = uint16_t(n);
    return b;
  }
  uint64_t ring_full() const {
    for (size_t r = 0; r < ring->counters.reasons.size(); ++r)
      if (ring->counters.reasons[r] == "ring full") return ring->counters.drops[r].get();
    return 0;
  }
};

}  // namespace

TEST_CASE("channel: a live lane drops and counts what does not fit", "[runtime]") {
  RingFixture f;
  std::atomic<bool> abort{false};
  f.channel->set_overflow(f.ring, f.ring->counters.reason("ring full"), /*wait_when_full=*/false);
  PacketBatch a = f.batch(40), b = f.batch(40);
  CHECK(f.channel->send(a, abort) == 40);
  CHECK(f.channel->send(b, abort) == 24);  // capacity 64
  CHECK(f.ring_full() == 16);
  CHECK(f.channel->occupancy() == 64);
  CHECK(f.channel->max_occupancy() == 64);
  PacketBatch out;
  CHECK(f.channel->receive(out, 100) == 64);
  rte_pktmbuf_free_bulk(out.pkts, out.count);
  CHECK(rte_mempool_avail_count(f.pool) == 1024);  // the dropped ones were freed
  CHECK_FALSE(f.channel->finished());
  f.channel->close();
  CHECK(f.channel->finished());
}

TEST_CASE("channel: an offline lane waits for room instead of dropping", "[runtime]") {
  RingFixture f;
  std::atomic<bool> abort{false};
  f.channel->set_overflow(f.ring, f.ring->counters.reason("ring full"), /*wait_when_full=*/true);
  std::atomic<unsigned> consumed{0};
  std::thread consumer([&] {
    PacketBatch out;
    while (consumed < 400) {
      unsigned n = f.channel->receive(out, 7);
      rte_pktmbuf_free_bulk(out.pkts, n);
      consumed += n;
      if (n == 0) std::this_thread::yield();
    }
  });
  for (int i = 0; i < 10; ++i) {
    PacketBatch b = f.batch(40);
    CHECK(f.channel->send(b, abort) == 40);
  }
  consumer.join();
  CHECK(consumed == 400);
  CHECK(f.ring_full() == 0);
  CHECK(f.channel->waits() > 0);

  // Aborted (a second Ctrl-C): the producer stops waiting and counts the rest.
  PacketBatch full = f.batch(64), more = f.batch(10);
  CHECK(f.channel->send(full, abort) == 64);
  abort = true;
  CHECK(f.channel->send(more, abort) == 0);
  CHECK(f.ring_full() == 10);
}

// An offline producer faster than its consumer used to fill the whole ring
// (64K packets by default) before it waited: packets then sat so long that
// their buffers had left the caches when the consumer got them. It now keeps
// no more than the window ahead; a live one still has the whole ring for
// bursts it cannot hold back.
TEST_CASE("channel: an offline lane keeps no more than its window ahead of the consumer, a live one has the whole ring",
          "[runtime]") {
  RingFixture f("16K", 20000);
  REQUIRE(f.channel->capacity() == 16384);
  REQUIRE(f.channel->offline_window() == Channel::kOfflineWindow);
  REQUIRE(Channel::kOfflineWindow < 16384);
  std::atomic<bool> abort{false};

  f.channel->set_overflow(f.ring, f.ring->counters.reason("ring full"), /*wait_when_full=*/true);
  const unsigned total = 200 * 64;
  std::atomic<unsigned> consumed{0};
  std::thread consumer([&] {  // slower than the producer
    PacketBatch out;
    while (consumed < total) {
      unsigned n = f.channel->receive(out, 32);
      rte_pktmbuf_free_bulk(out.pkts, n);
      consumed += n;
      std::this_thread::sleep_for(std::chrono::microseconds(n ? 50 : 10));
    }
  });
  for (unsigned sent = 0; sent < total; sent += 64) {
    PacketBatch b = f.batch(64);
    CHECK(f.channel->send(b, abort) == 64);
  }
  consumer.join();
  CHECK(consumed == total);
  CHECK(f.ring_full() == 0);
  CHECK(f.channel->waits() > 0);
  CHECK(f.channel->max_occupancy() >= Channel::kOfflineWindow - 64);  // it did run ahead
  CHECK(f.channel->max_occupancy() <= Channel::kOfflineWindow);

  // Live: nothing waits, the ring takes what it can hold.
  f.channel->set_overflow(f.ring, f.ring->counters.reason("ring full"), /*wait_when_full=*/false);
  for (unsigned sent = 0; sent < 3 * Channel::kOfflineWindow; sent += 64) {
    PacketBatch b = f.batch(64);
    CHECK(f.channel->send(b, abort) == 64);
  }
  CHECK(f.channel->occupancy() == 3 * Channel::kOfflineWindow);
  CHECK(f.ring_full() == 0);
}

// Flow records cross a channel by value, copied into and out of the ring's
// slots with memcpy (DPDK's zero-copy API): every record arrives whole and
// in order where a burst wraps around the ring's end, and a full ring keeps
// what it holds and counts the rest.
TEST_CASE("channel: flow records arrive whole and in order across the ring's wrap", "[runtime]") {
  RingFixture f;  // DPDK up, and an element to count drops against
  Channel ch("records", StreamType::Flows, 100, SOCKET_ID_ANY);  // 100 slots: bursts of 37 wrap
  ch.set_overflow(f.ring, f.ring->counters.reason("ring full"), /*wait_when_full=*/false);
  std::atomic<bool> abort{false};
  auto record = [](uint64_t i) {
    FlowRecord r{};
    r.key.src_port = uint16_t(i), r.key.dst_port = uint16_t(i >> 16);
    r.fwd.packets = i, r.fwd.octets = 1000 + i, r.rev.last_ns = ~i;
    return r;
  };
  uint64_t sent = 0, got = 0;
  unsigned bad = 0;
  auto send_37 = [&] {  // the next 37 records; how many the ring took
    FlowBatch b;
    b.count = 37;
    for (unsigned i = 0; i < b.count; ++i) b.recs[i] = record(sent + i);
    sent += 37;
    return ch.send(b, abort);
  };
  auto receive = [&](unsigned max) {  // up to max records, each checked against the next one expected
    FlowBatch out;
    unsigned n = ch.receive(out, max);
    for (unsigned i = 0; i < n; ++i, ++got) {
      FlowRecord want = record(got);
      if (std::memcmp(&out.recs[i], &want, sizeof want) != 0) ++bad;
    }
    return n;
  };
  for (int round = 0; round < 50; ++round) {
    REQUIRE(send_37() == 37);
    REQUIRE(receive(37) == 37);
  }
  CHECK(got == sent);
  CHECK(bad == 0);
  // Full: 100 slots take 100 of 3 x 37, the other 11 are counted.
  for (int k = 0; k < 3; ++k) send_37();
  CHECK(ch.occupancy() == 100);
  CHECK(f.ring_full() == 11);
  while (receive(64)) {
  }
  CHECK(got == sent - 11);
  CHECK(bad == 0);
}

// The runtime's packet pools hand back the buffer freed last (its lines
// still in the caches), not the one freed longest ago as DPDK's default
// ring does. Seen from a thread that is not a DPDK lcore: no per-lcore
// cache between it and the pool.
// EAL measures the TSC over a sleep Sluice shortens from 100 ms to 5 ms
// (dpdk_env.cc): the frequency it found agrees with the counter measured
// here over 200 ms (the median of three), to 1% (EAL rounds to 10 MHz).
// And a nanosleep of 100 ms anywhere else still sleeps 100 ms.
TEST_CASE("EAL: the TSC frequency measured in a shortened sleep agrees with the counter, other sleeps are whole",
          "[runtime]") {
  RingFixture f;  // DPDK up
  auto measured_hz = [] {
    timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC_RAW, &t0);
    uint64_t c0 = rte_rdtsc();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    clock_gettime(CLOCK_MONOTONIC_RAW, &t1);
    uint64_t c1 = rte_rdtsc();
    double s = double(t1.tv_sec - t0.tv_sec) + double(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return double(c1 - c0) / s;
  };
  std::vector<double> hz = {measured_hz(), measured_hz(), measured_hz()};
  std::sort(hz.begin(), hz.end());
  INFO("EAL: " << rte_get_tsc_hz() << " Hz, measured here: " << hz[1] << " Hz");
  // EAL's figure is the nearest multiple of 10 MHz: within 5 MHz of the
  // truth, and of this measurement to well within 10 MHz
  CHECK(std::abs(double(rte_get_tsc_hz()) - hz[1]) < 10e6);

  timespec asked = {0, 100'000'000}, t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  REQUIRE(nanosleep(&asked, nullptr) == 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CHECK((t1.tv_sec - t0.tv_sec) * 1'000'000'000 + (t1.tv_nsec - t0.tv_nsec) >= 100'000'000);
}

// Without hugepages EAL's memory is anonymous, with transparent huge pages
// advised: it was a memfd's shared pages, 4 KiB each, so a pool of 3,072
// buffers cost 10 ms of page faults at every start (dpdk_env.cc,
// memfd_create()). A virtio_user or vhost device keeps the memfd its back
// end maps.
TEST_CASE("EAL: memory without hugepages is anonymous, huge pages advised, unless a vhost back end needs its memfd",
          "[runtime]") {
  RingFixture f;  // DPDK up, --no-huge
  uintptr_t base = 0;
  rte_memseg_list_walk(
      [](const rte_memseg_list *msl, void *arg) {
        if (msl->page_sz == 4096 && msl->base_va) *static_cast<uintptr_t *>(arg) = uintptr_t(msl->base_va);
        return 0;
      },
      &base);
  REQUIRE(base != 0);
  // The mapping that holds it, in /proc/self/smaps: its first line, and its flags.
  std::ifstream smaps("/proc/self/smaps");
  std::string line, header, flags;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long from, to;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &from, &to) == 2 && line.find(':') > line.find(' ')) {
      inside = base >= from && base < to;
      if (inside) header = line;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      flags = line;
    }
  }
  INFO(header << "\n" << flags);
  REQUIRE(!header.empty());
  CHECK(header.find("memfd") == std::string::npos);
  CHECK(header.find(" rw-p ") != std::string::npos);  // private, not shared
  CHECK(flags.find(" hg") != std::string::npos);      // MADV_HUGEPAGE

  CHECK(eal_memory_can_be_anonymous({"--no-huge", "-m", "256"}));
  CHECK_FALSE(eal_memory_can_be_anonymous({"--no-huge", "--vdev", "net_virtio_user0,path=/tmp/vhost.sock"}));
  CHECK_FALSE(eal_memory_can_be_anonymous({"--vdev=net_vhost0,iface=/tmp/sock0"}));
}

// EAL asks sysfs about each of its 1024 lcore ids while it starts; the
// runtime answers "no such file" itself for cpus and nodes the kernel's
// "possible" masks leave out (dpdk_env.cc, access()). Each path it answers
// so is one the kernel says is not there; the paths of this machine's
// cpus, and any other path, it leaves to the kernel.
TEST_CASE("EAL: sysfs questions about cpus that cannot exist answered without the kernel, as the kernel would",
          "[runtime]") {
  auto kernel_says_absent = [](const std::string &path) {
    errno = 0;
    return faccessat(AT_FDCWD, path.c_str(), F_OK, 0) == -1 && errno == ENOENT;
  };
  unsigned answered = 0, existing = 0;
  for (unsigned cpu = 0; cpu < 1024; ++cpu) {
    std::string core = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/core_id";
    bool exists = !kernel_says_absent(core);
    existing += exists;
    if (sluice::sysfs_cpu_path_cannot_exist(core.c_str())) {
      INFO(core);
      CHECK(!exists);
      ++answered;
    }
    for (unsigned node = 0; node < 4; ++node) {
      std::string on_node = "/sys/devices/system/node/node" + std::to_string(node) + "/cpu" + std::to_string(cpu);
      if (sluice::sysfs_cpu_path_cannot_exist(on_node.c_str())) {
        INFO(on_node);
        CHECK(kernel_says_absent(on_node));
        ++answered;
      }
    }
  }
  CHECK(existing >= 1);
  // Every cpu beyond those that exist and may be plugged in is answered.
  std::ifstream f("/sys/devices/system/cpu/possible");
  std::string list;
  std::getline(f, list);
  std::vector<int> possible;
  REQUIRE(sluice::parse_cpu_list(list, possible));
  CHECK(answered >= (1024 - possible.size()) * 5);
  // This machine's cpus, and what is not a question about a cpu, go to the kernel.
  CHECK_FALSE(sluice::sysfs_cpu_path_cannot_exist("/sys/devices/system/cpu/cpu0/topology/core_id"));
  CHECK_FALSE(sluice::sysfs_cpu_path_cannot_exist("/sys/devices/system/node/node0/cpu0"));
  CHECK_FALSE(sluice::sysfs_cpu_path_cannot_exist("/sys/devices/system/cpu/cpu1023/online"));
  CHECK_FALSE(sluice::sysfs_cpu_path_cannot_exist("/sys/devices/system/cpu/cpu1023/topology/core_id2"));
  CHECK_FALSE(sluice::sysfs_cpu_path_cannot_exist("/tmp/cpu1023"));
  CHECK_FALSE(sluice::sysfs_cpu_path_cannot_exist(nullptr));
}

// Where DPDK is linked in (SLUICE_STATIC_DPDK), a driver loaded from a file
// (EAL's -d) would bring DPDK's shared libraries, a second DPDK, into the
// process: refused, saying why, before EAL starts.
TEST_CASE("EAL: -d is refused where DPDK is linked in", "[runtime]") {
  std::unique_ptr<test::Compiled> c = test::compile_text("TrafficGen(flows 10, duration 10ms) -> Discard;");
  REQUIRE(c->ok);
  RunOptions o;
  o.eal_args = {"--no-huge", "-d", "/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0/librte_net_tap.so"};
  Runtime rt(c->pipe, o);
  std::string err;
#if SLUICE_STATIC_DPDK
  CHECK_FALSE(rt.setup(&err));
  CHECK_THAT(err, Catch::Contains("EAL option -d") && Catch::Contains("linked in"));
  // EAL was not started: it starts for the next runtime, without -d
  o.eal_args = {"--no-huge"};
  Runtime again(c->pipe, o);
  CHECK(again.setup(&err));
#else
  WARN("skipped: DPDK's shared libraries (SLUICE_STATIC_DPDK off) load drivers from files");
#endif
}

TEST_CASE("packet pool: the buffer freed last is the next one handed out", "[runtime]") {
  RingFixture f;  // DPDK up
  rte_mempool *pool = create_packet_pool("lifo_test", 4096, 256, SOCKET_ID_ANY);
  REQUIRE(pool);
  CHECK(std::string(rte_mempool_get_ops(pool->ops_index)->name) == "stack");
  std::thread([&] {
    REQUIRE(rte_lcore_id() == LCORE_ID_ANY);
    rte_mbuf *m[8];
    REQUIRE(rte_pktmbuf_alloc_bulk(pool, m, 8) == 0);
    for (rte_mbuf *b : m) rte_pktmbuf_free(b);
    rte_mbuf *again = rte_pktmbuf_alloc(pool);
    CHECK(again == m[7]);  // a ring would give one never used yet
    rte_pktmbuf_free(again);
  }).join();
  rte_mempool_free(pool);
}

// An offline source's lanes never hold more than the window of each ring:
// its pool is sized to that, with less slack than a live one's (a short
// pool makes it wait, never drop). It was sized to the whole rings (two
// rings of 64K and 32K: about 105K buffers, every one written when the pool
// is made, each a page fault without hugepages). A live source's still is.
namespace {
// A graph's run set up (not run), its context given to `look`.
void with_set_up_run(const std::string &graph, const std::function<void(const RunContext &)> &look) {
  auto c = test::compile_text(graph);
  REQUIRE(c->ok);
  RunOptions o;
  o.eal_args = {"--no-huge"};
  Runtime rt(c->pipe, o);
  std::string err;
  REQUIRE(rt.setup(&err));
  look(rt.context());
}

// The packet buffers of the one source's pool of a graph, set up (not run).
unsigned source_pool_size(const std::string &graph) {
  unsigned size = 0;
  with_set_up_run(graph, [&](const RunContext &ctx) {
    REQUIRE(ctx.pools.size() == 1);
    size = ctx.pools.front().second->size;
  });
  return size;
}
}  // namespace

TEST_CASE("packet pool: an offline source gets buffers for the window of each ring, a live one for the whole rings",
          "[runtime]") {
  auto pool_size = [](const std::string &source) {
    return source_pool_size(source + " -> Ring(capacity 64K) -> Ring(capacity 32K) -> Discard;");
  };
  unsigned offline = pool_size("TrafficGen(flows 10, duration 10ms)");
  unsigned live = pool_size("TrafficGen(flows 10, duration 10ms, rate 1Kpps)");
  INFO("offline " << offline << ", live " << live);
  CHECK(live >= 96u * 1024);
  CHECK(offline >= 2 * Channel::kOfflineWindow);
  // and little slack: 8192 buffers of slack (a live lane's) were a fifth
  // of the start of a short trace's run
  CHECK(offline < 2 * Channel::kOfflineWindow + 4096);
}

// A lane's flow records cross into a shared exporter by value, in a channel
// of records: its source's pool gets no packet buffers for that channel. It
// got a merge's worth (4,096 buffers, written when the pool is made) for
// each such channel, live or offline, as if packets went through it.
TEST_CASE("packet pool: flow records into a shared element take no packet buffers", "[runtime]") {
  auto pool_size = [](const std::string &source, const std::string &records_to) {
    return source_pool_size(records_to + ";\n" + source +
                            " -> ft :: FlowTable(capacity 1K) -> GCSlicer(table ft) -> out;");
  };
  for (std::string source : {"TrafficGen(flows 10, duration 10ms)", "TrafficGen(flows 10, duration 10ms, rate 1Kpps)"}) {
    INFO(source);
    unsigned in_lane = pool_size(source, "out :: FlowLog(\"/dev/null\")");
    unsigned shared = pool_size(source, "out :: shared FlowLog(\"/dev/null\")");
    CHECK(shared == in_lane);
  }
}

namespace {
std::vector<test::PcapRecord> device_test_records() {
  std::vector<test::PcapRecord> records;
  for (uint32_t i = 0; i < 300; ++i) {
    uint32_t caplen = i == 100 ? 9000 : i == 200 ? 2049 : 60 + i % 200;
    test::PcapRecord r{1'700'000'000'123'456'789ull + i * 1'000'001ull, caplen + i % 3, {}};
    for (uint32_t b = 0; b < caplen; ++b) r.data.push_back(uint8_t(i * 13 + b));
    records.push_back(r);
  }
  return records;
}
}  // namespace

// A trace file is read into the pool's buffers as far as there are free
// ones: a record that finds none waits for the next receive. Through DPDK's
// net_pcap it was read, dropped and counted "rx no buffer". Records walked
// in the file's mapping come in a buffer pointing at their bytes there
// (InPlaceRecords); those libpcap reads (here from record 150 on, its
// caplen above its len) are copied, a record longer than a buffer into
// buffers chained. Every record keeps its nanosecond time and wire length.
// With a pool for copies (what RSSSource gives a trace walked in place),
// the source's pool has buffers without room of their own, for the records
// in place, and the copies take the other pool's buffers.
TEST_CASE("pcap device: every record of a trace reaches the lane through a pool of a few buffers", "[runtime]") {
  RingFixture f;  // DPDK up
  std::string dir = test::scratch("pcap-device", "small-pool");
  std::vector<test::PcapRecord> records = device_test_records();
  constexpr size_t kToLibpcap = 150;
  records[kToLibpcap].len = uint32_t(records[kToLibpcap].data.size() - 1);
  std::string path = dir + "/t.pcap";
  test::write_records(path, records);
  CHECK(walked_in_place(path));
  CHECK_FALSE(walked_in_place(dir));  // a directory
  CHECK_FALSE(walked_in_place(dir + "/none.pcap"));
  for (bool apart : {false, true}) {
    INFO((apart ? "with a pool for copies" : "one pool"));
    static int made = 0;
    const std::string name = "pcap_device_test" + std::to_string(made++);
    rte_mempool *pool = rte_pktmbuf_pool_create(name.c_str(), 16, 0, kMbufPrivSize,
                                                apart ? RTE_PKTMBUF_HEADROOM : RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    REQUIRE(pool);
    rte_mempool *copies = nullptr;
    if (apart) {
      copies = create_packet_pool(name + "c", 8, RTE_MBUF_DEFAULT_DATAROOM, SOCKET_ID_ANY, true, 0);
      REQUIRE(copies);
    }
    {
      DeviceSpec spec;
      std::string err;
      REQUIRE(parse_device("pcap:" + path, spec, &err));
      EthDevice dev(spec, "src", 1, 1024, true, pool, copies);
      CHECK(dev.has_timestamps());
      std::vector<rte_mbuf *> held;  // the lane holds up to 12 buffers at a time
      size_t next = 0, idle = 0;
      bool end = false;
      while (!end && idle < 1000) {
        rte_mbuf *pkts[32];
        EthDevice::RxInfo info[32];
        uint16_t n = dev.receive(0, pkts, info, 32, &end);
        idle = n ? 0 : idle + 1;
        for (uint16_t i = 0; i < n; ++i, ++next) {
          INFO("record " << next);
          REQUIRE(next < records.size());
          const test::PcapRecord &want = records[next];
          CHECK(info[i].time_ns == want.ns);
          CHECK(info[i].wire_len == want.len);
          REQUIRE(pkts[i]->pkt_len == want.data.size());
          const bool in_place = next < kToLibpcap;
          CHECK(bool(RTE_MBUF_HAS_EXTBUF(pkts[i])) == in_place);
          CHECK(pkts[i]->pool == (in_place || !apart ? pool : copies));
          CHECK(pkts[i]->nb_segs ==
                (in_place ? 1 : (want.data.size() + RTE_MBUF_DEFAULT_DATAROOM - 1) / RTE_MBUF_DEFAULT_DATAROOM));
          std::vector<uint8_t> bytes(want.data.size());
          const void *p = rte_pktmbuf_read(pkts[i], 0, uint32_t(bytes.size()), bytes.data());
          CHECK(memcmp(p, want.data.data(), bytes.size()) == 0);
          held.push_back(pkts[i]);
        }
        if (held.size() >= 12 || n == 0) {
          for (rte_mbuf *m : held) rte_pktmbuf_free(m);
          held.clear();
        }
      }
      CHECK(end);
      CHECK(next == records.size());
      for (rte_mbuf *m : held) rte_pktmbuf_free(m);
      for (const auto &[reason, count] : dev.losses()) CHECK(count == 0);
    }
    CHECK(rte_mempool_avail_count(pool) == 16u);  // every buffer back
    rte_mempool_free(pool);
    if (copies) {
      CHECK(rte_mempool_avail_count(copies) == 8u);
      rte_mempool_free(copies);
    }
  }
}

// A trace walked in place hands its records on in buffers that point into
// the file's mapping: its source's pool has buffers without room of their
// own (every buffer is written when the pool is made: 2.6 KB each with
// the room, a page fault each 4 KiB of fresh memory), and a small pool of
// buffers with room for the records it copies.
TEST_CASE("packet pool: a trace walked in place gets buffers without room, and a small pool for copies", "[runtime]") {
  std::string dir = test::scratch("packet-pool", "in-place");
  test::write_records(dir + "/t.pcap", device_test_records());
  with_set_up_run("src :: RSSSource(device \"pcap:" + dir + "/t.pcap\", queues 2); src -> Discard;",
                  [](const RunContext &ctx) {
                    REQUIRE(ctx.pools.size() == 1);
                    REQUIRE(ctx.copy_pools.size() == 1);
                    rte_mempool *pool = ctx.pools.front().second, *copies = ctx.copy_pools.front().second;
                    CHECK(rte_pktmbuf_data_room_size(pool) == RTE_PKTMBUF_HEADROOM);
                    CHECK(rte_pktmbuf_data_room_size(copies) == RTE_MBUF_DEFAULT_BUF_SIZE);
                    CHECK(copies->size == 2 * RunContext::kCopyBuffers);  // for each of the 2 lanes
                    CHECK(copies->cache_size == 0);
                  });
}

// TrafficGen's packets point at their frames in the generated memory
// (InPlaceRecords): its pool's buffers have no room of their own, and a
// small pool takes the frames copied when a million are out at once.
TEST_CASE("packet pool: TrafficGen's buffers have no room, and a small pool for copies", "[runtime]") {
  with_set_up_run("src :: TrafficGen(flows 10, duration 10ms, sizes [1500B], queues 2); src -> Discard;",
                  [](const RunContext &ctx) {
                    REQUIRE(ctx.pools.size() == 1);
                    REQUIRE(ctx.copy_pools.size() == 1);
                    rte_mempool *pool = ctx.pools.front().second, *copies = ctx.copy_pools.front().second;
                    CHECK(rte_pktmbuf_data_room_size(pool) == RTE_PKTMBUF_HEADROOM);
                    CHECK(rte_pktmbuf_data_room_size(copies) >= RTE_PKTMBUF_HEADROOM + 2048);
                    CHECK(copies->size == 2 * RunContext::kCopyBuffers);
                  });
}

// EAL's memory (without hugepages) follows the pools: a source whose buffers
// point at bytes it keeps gets no data room but its copies'. Sized for the
// rooms, the heap's free part grew resident as 200 reloads allocated and
// freed rings in it (+312 MiB against +72: tests/unit/test_soak.cc).
TEST_CASE("packet pool: EAL's memory counts no data room for buffers in place", "[runtime]") {
  auto memory_mb = [](const std::string &graph) {
    auto c = test::compile_text(graph);
    REQUIRE(c->ok);
    RunOptions o;
    Runtime rt(c->pipe, o);
    return eal_memory_mb_for(rt.context().graph());
  };
  const std::string rest = " -> Ring(capacity 256K) -> Discard;";
  unsigned generated = memory_mb("TrafficGen(flows 10, duration 10ms, rate 1Kpps)" + rest);
  unsigned device = memory_mb("RSSSource(device \"af_packet:lo\")" + rest);
  INFO("TrafficGen " << generated << " MiB, an af_packet device " << device << " MiB");
  // 256K buffers: 2 x 0.6 GiB with rooms, 2 x 0.14 GiB without
  CHECK(device > 1200);
  CHECK(generated < 450);
  CHECK(generated > 128);
}

namespace {
// A 4 KiB scratch file of `fill` bytes, mapped: records to point packets at.
std::shared_ptr<TraceMapping> mapped_scratch_bytes(const char *name, char fill) {
  std::string path = test::scratch("in-place", name) + "/bytes";
  { std::ofstream(path) << std::string(4096, fill); }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  std::shared_ptr<TraceMapping> mapping = TraceMapping::open(fd, {});
  close(fd);
  REQUIRE(mapping);
  return mapping;
}
}  // namespace

namespace {
// The pages of [p, p + n) this process's page tables map now (/proc/self/pagemap's bit 63).
size_t pages_mapped(const uint8_t *p, size_t n) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  std::vector<uint64_t> entries(n / page);
  const off_t at = off_t(reinterpret_cast<uintptr_t>(p) / page * sizeof(uint64_t));
  REQUIRE(pread(fd, entries.data(), entries.size() * sizeof(uint64_t), at) == ssize_t(entries.size() * sizeof(uint64_t)));
  close(fd);
  return size_t(std::count_if(entries.begin(), entries.end(), [](uint64_t e) { return e >> 63; }));
}
}  // namespace

// A trace is mapped at a 2 MiB-aligned address, so that the huge folios the
// page cache may hold it in are mapped one PMD each (a third of a trace
// run's cpu went to mapping it page by page); bring_in() reads a byte a
// fault-around window and still maps every page it was asked for.
TEST_CASE("mapped trace: the mapping is 2 MiB-aligned and bring_in maps every page asked for", "[runtime]") {
  std::string path = test::scratch("mapped-file", "aligned") + "/bytes";
  const size_t size = 5 * (size_t(1) << 20) + 12345;  // not a whole number of pages
  { std::ofstream(path) << std::string(size, 'a'); }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  {
    MappedFile file(fd);
    REQUIRE(file.size() == size);
    CHECK(reinterpret_cast<uintptr_t>(file.data()) % MappedFile::kHugeAlign == 0);
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const size_t from = 3 * page + 100, to = (size_t(3) << 20) + 7 * page + 1;  // pages 3 .. 775
    CHECK(pages_mapped(file.data(), (size_t(4) << 20)) == 0);  // nothing read yet
    REQUIRE(file.bring_in(from, to));
    const uint8_t *first = file.data() + from / page * page, *end = file.data() + (to + page - 1) / page * page;
    CHECK(pages_mapped(first, size_t(end - first)) == size_t(end - first) / page);
    // The last page, partly past the end: brought in, and the file's bytes read back.
    const uint8_t *last = file.data() + (size - 1) / page * page;
    CHECK(pages_mapped(last, page) == 0);
    REQUIRE(file.bring_in(size - 10, size));
    CHECK(pages_mapped(last, page) == 1);
    CHECK(file.data()[size - 1] == 'a');
    file.let_go(0, size);
    CHECK(pages_mapped(file.data() + page, (size_t(4) << 20)) == 0);
  }
  close(fd);
}

// Two lanes walking one trace are kept within TraceMapping::kPaceLead of
// each other, so that the one behind reads the lines the other just brought
// into the shared cache; one that stops moving, or leaves, holds no one.
TEST_CASE("mapped trace: a walker far ahead waits for the one behind while it moves, not once it stalls",
          "[runtime]") {
  std::shared_ptr<TraceMapping> mapping = mapped_scratch_bytes("pace", 'p');
  const int ahead = mapping->join(0), behind = mapping->join(0);
  REQUIRE(ahead >= 0);
  REQUIRE(behind >= 0);
  constexpr size_t kMiB = size_t(1) << 20, kLead = TraceMapping::kPaceLead, kTo = kLead + 20 * kMiB;
  std::atomic<bool> returned{false};
  auto walk_ahead = [&](uint64_t stalled_ns) {
    return std::thread([&, stalled_ns] {
      mapping->keep_pace(ahead, kTo, stalled_ns);
      returned = true;
    });
  };

  SECTION("within the lead, and the one behind: no wait") {
    mapping->keep_pace(behind, 10 * kMiB);
    const uint64_t t0 = mono_ns();
    std::thread([&] { mapping->keep_pace(ahead, 10 * kMiB + kLead, 60'000'000'000ull); }).join();  // a wait would last a minute
    mapping->keep_pace(behind, 10 * kMiB, 60'000'000'000ull);
    CHECK(mono_ns() - t0 < 10'000'000'000ull);
  }
  SECTION("not for a walker of its own thread (lanes of one thread)") {
    mapping->keep_pace(behind, kMiB);
    const uint64_t t0 = mono_ns();
    mapping->keep_pace(ahead, kTo, 60'000'000'000ull);  // a wait would last a minute
    CHECK(mono_ns() - t0 < 10'000'000'000ull);
  }
  SECTION("waits while the one behind moves, until it is within the lead") {
    std::thread t = walk_ahead(60'000'000'000ull);  // never stalled, however slow this thread is
    for (size_t at = 0; at + kLead < kTo; at += kMiB / 2) {
      mapping->keep_pace(behind, at);  // the one behind never waits
      std::this_thread::sleep_for(std::chrono::microseconds(300));
      INFO("behind at " << (at >> 10) << " KiB");
      REQUIRE_FALSE(returned);  // more than the lead behind: still waiting
    }
    mapping->keep_pace(behind, kTo - kLead);
    t.join();
    CHECK(returned);
  }
  SECTION("stops waiting once the one behind has not moved for the stall time") {
    mapping->keep_pace(behind, kMiB);
    const uint64_t t0 = mono_ns();
    std::thread t = walk_ahead(TraceMapping::kPaceStalledNs);
    t.join();  // returns: else the test hangs
    CHECK(returned);
    CHECK(mono_ns() - t0 >= TraceMapping::kPaceStalledNs);  // it did wait, for the stall time
  }
  SECTION("stops waiting when the one behind leaves") {
    mapping->keep_pace(behind, kMiB);
    std::thread t = walk_ahead(60'000'000'000ull);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK_FALSE(returned);
    mapping->leave(behind);
    t.join();
    CHECK(returned);
  }
}

// Blocks of records: a block is reused only once every packet of it is
// freed, at most max_blocks are out (then the caller copies), and
// held_from names the oldest record a packet still points at, so that the
// mapping keeps its pages.
TEST_CASE("in-place records: blocks counted by their packets, reused once all are freed", "[runtime]") {
  RingFixture f;  // DPDK up
  constexpr unsigned kBlock = InPlaceRecords::kRecordsPerBlock;
  rte_mempool *pool = rte_pktmbuf_pool_create("in_place_blocks", 3 * kBlock, 0, kMbufPrivSize, 64, SOCKET_ID_ANY);
  REQUIRE(pool);
  std::shared_ptr<TraceMapping> mapping = mapped_scratch_bytes("blocks", 'x');
  const uint8_t *bytes = mapping->file().data();
  rte_mbuf *late[3];
  {
    InPlaceRecords records(2);
    std::vector<rte_mbuf *> out(2 * kBlock + 1);
    REQUIRE(rte_pktmbuf_alloc_bulk(pool, out.data(), unsigned(out.size())) == 0);
    for (unsigned i = 0; i < 2 * kBlock; ++i) {
      INFO("record " << i);
      REQUIRE(records.attach(out[i], bytes + i % 4000, 60, 1000 + i, mapping));
      CHECK(rte_pktmbuf_mtod(out[i], const uint8_t *) == bytes + i % 4000);
      CHECK(out[i]->pkt_len == 60u);
    }
    CHECK(records.blocks_out() == 2);
    CHECK_FALSE(records.attach(out.back(), bytes, 60, 5000, mapping));  // both blocks out: copy
    CHECK(RTE_MBUF_DIRECT(out.back()));
    CHECK(records.held_from(9999, mapping) == 1000);
    for (unsigned i = 1; i < kBlock; ++i) rte_pktmbuf_free(out[i]);  // all of block 0 but its first
    CHECK_FALSE(records.attach(out.back(), bytes, 60, 5000, mapping));
    CHECK(records.held_from(9999, mapping) == 1000);
    rte_pktmbuf_free(out[0]);
    CHECK(records.held_from(9999, mapping) == 1000 + kBlock);  // block 0 given back
    REQUIRE(records.attach(out.back(), bytes, 60, 5000, mapping));  // and reused
    CHECK(records.blocks_out() == 2);
    for (unsigned i = kBlock; i < 2 * kBlock; ++i) rte_pktmbuf_free(out[i]);
    CHECK(records.held_from(9999, mapping) == 5000);
    rte_pktmbuf_free(out.back());
    records.close();
    CHECK(records.held_from(9999, mapping) == 9999);
    CHECK(records.blocks_out() == 0);
    // Packets still out when the records' owner goes: their block, and the
    // mapping, go with the last of them (LeakSanitizer would see a block
    // left behind).
    REQUIRE(rte_pktmbuf_alloc_bulk(pool, late, 3) == 0);
    for (rte_mbuf *m : late) REQUIRE(records.attach(m, bytes, 60, 7000, mapping));
  }
  std::weak_ptr<TraceMapping> held = mapping;
  mapping.reset();
  rte_pktmbuf_free(late[0]);
  CHECK_FALSE(held.expired());
  std::thread([&] {
    CHECK(*rte_pktmbuf_mtod(late[1], const char *) == 'x');
    rte_pktmbuf_free(late[1]);
    rte_pktmbuf_free(late[2]);
  }).join();
  CHECK(held.expired());
  CHECK(rte_mempool_avail_count(pool) == 3 * kBlock);
  rte_mempool_free(pool);
}

// Freed in bulk (free_packets), packets pointing at records give their
// block's references back a run at a time (InPlaceRecords::release_runs)
// and go back to the pool as ordinary buffers; a batch mixing two blocks,
// copies and a packet with a second reference (a clone) frees each right.
TEST_CASE("in-place records: packets freed in bulk give their blocks back a run at a time", "[runtime]") {
  RingFixture f;  // DPDK up
  constexpr unsigned kBlock = InPlaceRecords::kRecordsPerBlock;
  rte_mempool *pool = rte_pktmbuf_pool_create("in_place_bulk", 3 * kBlock, 0, kMbufPrivSize, 256, SOCKET_ID_ANY);
  REQUIRE(pool);
  std::shared_ptr<TraceMapping> mapping = mapped_scratch_bytes("bulk", 'y');
  const uint8_t *bytes = mapping->file().data();
  const unsigned room = rte_pktmbuf_data_room_size(pool);
  auto ordinary = [&](rte_mbuf *m) {  // what a buffer fresh from its pool looks like
    return RTE_MBUF_DIRECT(m) && m->buf_addr == reinterpret_cast<char *>(m) + sizeof(rte_mbuf) + m->priv_size &&
           m->buf_len == room && m->data_off == std::min<unsigned>(RTE_PKTMBUF_HEADROOM, room) && m->data_len == 0 &&
           m->ol_flags == 0;
  };
  InPlaceRecords records;
  // Block 0 gets kBlock records, block 1 (opened by the next) 10.
  std::vector<rte_mbuf *> in(kBlock + 10);
  REQUIRE(rte_pktmbuf_alloc_bulk(pool, in.data(), unsigned(in.size())) == 0);
  for (unsigned i = 0; i < in.size(); ++i) REQUIRE(records.attach(in[i], bytes + i % 4000, 60, 1000 + i, mapping));
  REQUIRE(records.blocks_out() == 2);
  rte_mbuf *copies[2];
  REQUIRE(rte_pktmbuf_alloc_bulk(pool, copies, 2) == 0);
  rte_mbuf *clone = rte_pktmbuf_clone(in[5], pool);  // a second packet on record 5's bytes
  REQUIRE(clone);
  rte_mbuf_refcnt_update(in[6], 1);  // and a second reference to record 6's packet

  SECTION("released alone: the packets are ordinary, the block is given back with its last") {
    std::vector<rte_mbuf *> run(in.begin(), in.begin() + 100);
    InPlaceRecords::release_runs(run.data(), unsigned(run.size()));
    for (unsigned i = 0; i < 100; ++i) {
      INFO("packet " << i);
      CHECK(ordinary(run[i]) == (i != 6));  // 6 has another reference: DPDK's free handles it
    }
    CHECK(records.held_from(9999, mapping) == 1000);  // block 0 still has packets out
    rte_pktmbuf_free_bulk(run.data(), unsigned(run.size()));
    CHECK(records.held_from(9999, mapping) == 1000);
    for (unsigned i = 100; i < in.size(); ++i) rte_pktmbuf_free(in[i]);  // the rest, one at a time
    rte_pktmbuf_free_bulk(copies, 2);
  }
  SECTION("freed in bulk in one mixed batch") {
    std::vector<rte_mbuf *> batch;
    for (unsigned i = 0; i < 300; ++i) batch.push_back(in[i]);
    batch.push_back(copies[0]);
    for (unsigned i = kBlock; i < kBlock + 10; ++i) batch.push_back(in[i]);  // block 1
    for (unsigned i = 300; i < kBlock; ++i) batch.push_back(in[i]);  // block 0 again
    batch.push_back(copies[1]);
    free_packets(batch.data(), unsigned(batch.size()));
  }
  CHECK(rte_mempool_avail_count(pool) < 3 * kBlock);  // record 6 (and the clone) still out
  CHECK(records.held_from(9999, mapping) == 1000);
  rte_pktmbuf_free(in[6]);
  CHECK(records.held_from(9999, mapping) == 1000);  // the clone still points at block 0
  CHECK(*rte_pktmbuf_mtod(clone, const char *) == 'y');
  rte_pktmbuf_free(clone);
  records.close();
  CHECK(records.held_from(9999, mapping) == 9999);  // both blocks given back
  CHECK(records.blocks_out() == 0);
  CHECK(rte_mempool_avail_count(pool) == 3 * kBlock);
  // Every buffer the pool hands out again is an ordinary one.
  std::vector<rte_mbuf *> again(3 * kBlock);
  REQUIRE(rte_pktmbuf_alloc_bulk(pool, again.data(), unsigned(again.size())) == 0);
  size_t not_ordinary = 0;
  for (rte_mbuf *m : again) not_ordinary += !ordinary(m);
  CHECK(not_ordinary == 0);
  rte_pktmbuf_free_bulk(again.data(), unsigned(again.size()));
  rte_mempool_free(pool);
}

// Packets pointing at their records in the trace's mapping are read after
// the device, its reader and the reader's hold on the mapping are gone, on
// another thread, which frees them: each block of records keeps the
// mapping until its last packet is freed. Before the blocks held it, the
// mapping went with the file's end, and the first packet read after faulted.
TEST_CASE("pcap device: packets handed on in place outlive the device and the file's mapping", "[runtime]") {
  RingFixture f;  // DPDK up
  std::string dir = test::scratch("pcap-device", "in-place-outlives");
  std::vector<test::PcapRecord> records;
  for (int copy = 0; copy < 8; ++copy)  // 2,400 records: more than two blocks
    for (const test::PcapRecord &r : device_test_records()) records.push_back(r);
  std::string path = dir + "/t.pcap";
  test::write_records(path, records);
  rte_mempool *pool = rte_pktmbuf_pool_create("pcap_in_place_test", 4096, 0, kMbufPrivSize, RTE_MBUF_DEFAULT_BUF_SIZE,
                                              SOCKET_ID_ANY);
  REQUIRE(pool);
  std::vector<rte_mbuf *> held;
  {
    DeviceSpec spec;
    std::string err;
    REQUIRE(parse_device("pcap:" + path, spec, &err));
    EthDevice dev(spec, "src", 1, 1024, true, pool);
    bool end = false;
    for (int calls = 0; !end && calls < 10000; ++calls) {
      rte_mbuf *pkts[64];
      EthDevice::RxInfo info[64];
      uint16_t n = dev.receive(0, pkts, info, 64, &end);
      held.insert(held.end(), pkts, pkts + n);
    }
    REQUIRE(end);
  }
  REQUIRE(held.size() == records.size());
  std::remove(path.c_str());  // its pages stay while mapped
  std::thread([&] {
    for (size_t i = 0; i < held.size(); ++i) {
      INFO("record " << i);
      CHECK(bool(RTE_MBUF_HAS_EXTBUF(held[i])));
      REQUIRE(held[i]->pkt_len == records[i].data.size());
      CHECK(memcmp(rte_pktmbuf_mtod(held[i], const uint8_t *), records[i].data.data(), records[i].data.size()) == 0);
    }
  }).join();
  CHECK(rte_mempool_avail_count(pool) == 4096u - held.size());
  std::thread([&] { for (rte_mbuf *m : held) rte_pktmbuf_free(m); }).join();
  CHECK(rte_mempool_avail_count(pool) == 4096u);
  rte_mempool_free(pool);
}

// Whether a run whose end can be told compiles its loops: two looks that
// say 2 s or more, each at the rate the inputs were read since the one
// before, over each lane's own time; a lane that has read nothing yet is
// looked at again. One look
// from the start compiled a 0.5 s trace run whose start was held up, and a
// lane that had read nothing by then made the run compile at once.
TEST_CASE("compile decision: a start held up does not make a short run look long", "[runtime]") {
  using V = CompileDecision::Verdict;
  SECTION("held up 0.09 s of the first 0.1, then at 4 s a whole: declined at the second look") {
    CompileDecision d;
    CHECK(d.next_look() == Approx(0.1));
    CHECK(d.look(0.1, {std::pair{0.0025, 1.0}}, std::nullopt) == V::Wait);  // from the start: 40 s more
    CHECK(d.next_look() == Approx(0.2));
    CHECK(d.look(0.2, {std::pair{0.2525, 1.0}}, std::nullopt) == V::Decline);  // 0.3 s more
    CHECK(d.expected_end() == Approx(0.5).epsilon(0.01));
  }
  SECTION("a machine busy with other work: each lane's rate over its own time, not the wall's") {
    // A lane that had a third of a cpu: 4% of the trace in each 0.1 s, in
    // 0.033 s of its own; by the wall 2.4 s more, 0.79 s by its own
    CompileDecision busy;
    CHECK(busy.look(0.1, {std::pair{0.04, 1.0}}, std::nullopt, {0.033}) == V::Decline);
    CHECK(busy.expected_end() == Approx(0.1 + 0.033 * 24).epsilon(0.01));
    CompileDecision by_wall;  // the same looks without the lane's own time: compiled
    CHECK(by_wall.look(0.1, {std::pair{0.04, 1.0}}, std::nullopt) == V::Wait);
    CHECK(by_wall.look(0.2, {std::pair{0.08, 1.0}}, std::nullopt) == V::Compile);
    // A paced lane rests between its packets: resting is its own time, so
    // a long paced run still compiles
    CompileDecision paced;
    CHECK(paced.look(0.1, {std::pair{0.002, 1.0}}, std::nullopt, {0.099}) == V::Wait);
    CHECK(paced.look(0.2, {std::pair{0.004, 1.0}}, std::nullopt, {0.198}) == V::Compile);
    // A lane whose own time did not grow (its segment replaced by a reload,
    // its time starting over) is read by the wall
    CompileDecision reloaded;
    CHECK(reloaded.look(0.1, {std::pair{0.01, 1.0}}, std::nullopt, {0.1}) == V::Wait);
    CHECK(reloaded.look(0.2, {std::pair{0.02, 1.0}}, std::nullopt, {0.0}) == V::Compile);
  }
  SECTION("a long run: compiled at the second look") {
    CompileDecision d;
    CHECK(d.look(0.1, {std::pair{0.01, 1.0}, std::pair{0.02, 1.0}}, std::nullopt) == V::Wait);
    CHECK(d.look(0.2, {std::pair{0.02, 1.0}, std::pair{0.04, 1.0}}, std::nullopt) == V::Compile);
  }
  SECTION("a short run: declined at the first look, by its slowest lane") {
    CompileDecision d;
    CHECK(d.look(0.1, {std::pair{0.2, 1.0}, std::pair{0.1, 1.0}}, std::nullopt) == V::Decline);
    CHECK(d.expected_end() == Approx(1.0));
  }
  SECTION("--duration bounds the rest; nothing that tells compiles at once") {
    CompileDecision d;
    CHECK(d.look(0.1, {std::pair{0.001, 1.0}}, 0.4) == V::Decline);
    CompileDecision live;
    CHECK(live.look(0.1, {std::nullopt}, std::nullopt) == V::Compile);
    CompileDecision timed;
    CHECK(timed.look(0.1, {std::nullopt}, 5.0) == V::Wait);
    CHECK(timed.look(0.2, {std::nullopt}, 4.9) == V::Compile);
  }
  SECTION("a lane that has read nothing yet is looked at again; one that reads nothing for 1 s compiles") {
    CompileDecision late;
    CHECK(late.look(0.1, {std::pair{0.2, 1.0}, std::pair{0.0, 1.0}}, std::nullopt) == V::Wait);
    CHECK(late.look(0.2, {std::pair{0.4, 1.0}, std::pair{0.25, 1.0}}, std::nullopt) == V::Decline);
    CHECK(late.expected_end() == Approx(0.5));  // the late lane: 0.75 left at 0.25 in 0.1 s
    CompileDecision stalled;
    for (int look = 1; look < CompileDecision::kMaxLooks; ++look)
      REQUIRE(stalled.look(0.1 * look, {std::pair{0.0, 1.0}}, std::nullopt) == V::Wait);
    CHECK(stalled.look(1.0, {std::pair{0.0, 1.0}}, std::nullopt) == V::Compile);
  }
}

namespace {
// A compiler that works until cancelled, and says at what priority it ran
// before and after.
struct StallingCompiler : ProgramCompiler {
  std::atomic<bool> started{false};
  std::atomic<int> nice_before{-100}, nice_after{-100};
  Result compile(SegmentRunner &, bool, const std::atomic<bool> *cancel) override {
    nice_before = getpriority(PRIO_PROCESS, 0);
    started = true;
    while (!cancel->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    nice_after = getpriority(PRIO_PROCESS, 0);
    return {nullptr, "cancelled", "", 0};
  }
  std::string describe() const override { return "stalling"; }
};
}  // namespace

// A background compilation runs at nice 19; cancelled (the run is over, a
// reload retires segments), it finishes at its canceller's priority: at 19,
// on a busy machine, the end of a short `run --jit` waited 400 ms for it
// (bench_startup.sh, LOAD). Lowering a nice value needs CAP_SYS_NICE: the
// test is skipped without it.
TEST_CASE("jit: a cancelled background compilation ends at the priority of the thread that waits for it",
          "[runtime]") {
  errno = 0;
  int mine = getpriority(PRIO_PROCESS, 0);
  REQUIRE(errno == 0);
  bool can_lower = false;  // a thread at 19 brought back to our value
  std::thread([&] {
    setpriority(PRIO_PROCESS, 0, 19);
    can_lower = setpriority(PRIO_PROCESS, 0, mine) == 0;
  }).join();
  if (mine >= 19 || !can_lower) {
    WARN("skipped: this process cannot lower a nice value");
    return;
  }
  auto compiler = std::make_shared<StallingCompiler>();
  Segment seg;
  SegmentRunner runner(seg);
  {
    ProgramCache cache;
    cache.set_compiler(compiler, -1, 19);
    cache.compile_in_background({&runner});
    for (int i = 0; i < 5000 && !compiler->started; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(compiler->started);
    cache.cancel();
    CHECK(cache.cancelled() == 1);
  }
  CHECK(compiler->nice_before == 19);
  CHECK(compiler->nice_after == mine);
}

namespace {
// A loop body that counts its passes and otherwise interprets.
struct CountingProgram : SegmentProgram {
  InterpretedProgram inner;
  std::atomic<uint64_t> steps{0};
  bool step(SegmentRunner &s) override {
    ++steps;
    return inner.step(s);
  }
  const char *kind() const override { return "counting"; }
};
}  // namespace

namespace {
// A loop body that is always busy, until told to stop.
struct SpinningProgram : SegmentProgram {
  std::atomic<bool> stop{false};
  bool step(SegmentRunner &) override {
    if (stop.load(std::memory_order_relaxed)) return false;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
         std::chrono::steady_clock::now() < until;) {
    }
    return true;
  }
  const char *kind() const override { return "spinning"; }
};
}  // namespace

// The compile decision reads a lane's pace by its own time: on a cpu it
// shares with another busy thread, a segment's own time is about half the
// wall's, not all of it (the time it waited for the cpu is not its own).
TEST_CASE("segment: its own time is what it ran or rested, not what it waited for a cpu", "[runtime]") {
  const int cpu = sched_getcpu();
  REQUIRE(cpu >= 0);
  Segment seg;
  SegmentRunner runner(seg);
  runner.set_site(ThreadSite{cpu, -1, 0, 0});
  SpinningProgram program;
  CHECK(runner.own_time_ns() == 0);  // before its loop began
  std::atomic<bool> hog_stop{false}, hog_pinned{false};
  std::thread hog([&] {  // no Catch assertion off the test's thread
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    hog_pinned = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
    while (!hog_stop.load(std::memory_order_relaxed)) {
    }
  });
  runner.start(&program);
  while (!runner.loop_started_ns()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const double own = double(runner.own_time_ns()), wall = double(mono_ns() - runner.loop_started_ns());
  program.stop = true;
  runner.join();
  hog_stop = true;
  hog.join();
  REQUIRE(hog_pinned);
  REQUIRE(runner.settlement().pinned);  // on the hog's cpu
  INFO("own " << own / 1e6 << " ms of " << wall / 1e6 << " ms");
  CHECK(own > 0.1 * wall);   // it ran
  CHECK(own < 0.75 * wall);  // about half: the hog had the rest
  CHECK(runner.own_time_ns() >= uint64_t(own));  // ended: what it used to its end
}

// A shared segment the plan lets float (no cpu of its own on a small
// machine) runs on any of its cpus; any other is pinned to its one cpu.
TEST_CASE("thread placement: a floating site may run on each of its cpus, a pinned one on its cpu alone", "[runtime]") {
  cpu_set_t mine;
  REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &mine)) cpus.push_back(c);
  if (cpus.size() < 2) {
    WARN("this process may use one cpu only: nothing to float over");
    return;
  }
  auto settle_on_thread = [](const ThreadSite &site, cpu_set_t &got) {
    ThreadSettlement out;
    std::thread t([&] {  // no Catch assertion off the test's thread
      out = settle_current_thread(site);
      CPU_ZERO(&got);
      sched_getaffinity(0, sizeof got, &got);
    });
    t.join();
    return out;
  };
  cpu_set_t got;
  ThreadSite floating{cpus[1], -1, 0, 0, cpus};
  ThreadSettlement f = settle_on_thread(floating, got);
  CHECK_FALSE(f.pinned);
  CHECK(f.note.empty());
  CHECK(CPU_COUNT(&got) == 2);
  CHECK(CPU_ISSET(cpus[0], &got));
  CHECK(CPU_ISSET(cpus[1], &got));
  ThreadSite pinned{cpus[1], -1, 0, 0};
  ThreadSettlement p = settle_on_thread(pinned, got);
  CHECK(p.pinned);
  CHECK(CPU_COUNT(&got) == 1);
  CHECK(CPU_ISSET(cpus[1], &got));
}

TEST_CASE("segment: the loop is swapped between batches, element state stays", "[runtime]") {
  auto c = test::compile_text(
      "TrafficGen(flows 100, duration 2s, rate 20Kpps) -> Timestamp(clock pcap) -> Ring(capacity 1K) -> "
      "cnt :: Counter -> Discard;");
  REQUIRE(c->ok);
  RunOptions o;
  o.eal_args = {"--no-huge"};
  o.status_line = false;
  o.duration_ns = 1'500'000'000ull;
  Runtime rt(c->pipe, o);
  std::string err;
  REQUIRE(rt.setup(&err));
  REQUIRE(rt.segments().size() == 2);
  CountingProgram programs[2];
  uint64_t before_swap = 0;
  std::thread swapper;
  rt.on_started([&] {
    swapper = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      before_swap = rt.find("cnt#0")->counters.in.get();
      for (size_t i = 0; i < rt.segments().size(); ++i) rt.segments()[i]->replace_program(&programs[i]);
    });
  });
  rt.run();
  swapper.join();
  // Both segments ran the new loop, the counter kept counting across the
  // swap, and every packet is accounted for.
  CHECK(programs[0].steps > 0);
  CHECK(programs[1].steps > 0);
  uint64_t total = rt.find("cnt#0")->counters.in.get();
  CHECK(before_swap > 1000);
  CHECK(total > before_swap);
  CHECK(total == rt.totals().received);
  CHECK(rt.totals().balanced());
}
