// Channels between segments (a Ring's buffer): a live lane drops what does
// not fit and counts it as "ring full" on the Ring; an offline lane waits
// for room, and gives up only when the run is aborted. Runs DPDK in this
// process (CTest gives each test case its own).
#include <rte_mbuf.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "engine/runtime/runtime.hh"
#include "frontend_fixture.hh"

using namespace sluice;

namespace {

struct RingFixture {
  std::unique_ptr<test::Compiled> c = test::compile_text(
      "TrafficGen(flows 10, duration 10ms) -> r :: Ring(capacity 64) -> Discard;");
  std::unique_ptr<Runtime> rt;
  PacketChannel *channel = nullptr;
  RuntimeElement *ring = nullptr;
  rte_mempool *pool = nullptr;

  RingFixture() {
    REQUIRE(c->ok);
    RunOptions o;
    o.eal_args = {"--no-huge"};
    rt = std::make_unique<Runtime>(c->lanes, o);
    std::string err;
    REQUIRE(rt->setup(&err));
    ring = rt->find("r#0");
    REQUIRE(ring);
    channel = ring->targets(0).at(0).channel;
    REQUIRE(channel);
    static int n = 0;
    pool = rte_pktmbuf_pool_create(("test" + std::to_string(n++)).c_str(), 1024, 0, kMbufPrivSize, 256,
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

TEST_CASE("channel: a live lane drops and counts what does not fit", "[channel]") {
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

TEST_CASE("channel: an offline lane waits for room instead of dropping", "[channel]") {
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
