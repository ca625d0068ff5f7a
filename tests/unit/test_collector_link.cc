// CollectorLink over UDP: messages batched into one send each (UDP_SEGMENT)
// still reach the collector as datagrams of their own, whole and in order;
// the pace bounds a batch; a refused batch counts its records refused.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/base/clock.hh"
#include "engine/export/collector_link.hh"
#include "run_fixture.hh"

using namespace sluice;

namespace {

// A UDP socket bound to a free loopback port: the collector.
struct Collector {
  int fd = -1, port = 0;
  Collector() {
    fd = test::bind_loopback(SOCK_DGRAM, &port);
    int big = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  }
  ~Collector() { close(fd); }
  // The datagrams that arrived, each as it arrived.
  std::vector<std::vector<uint8_t>> received() {
    std::vector<std::vector<uint8_t>> out;
    std::vector<uint8_t> buf(70000);
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) break;
      ssize_t n = recv(fd, buf.data(), buf.size(), 0);
      if (n < 0) break;
      out.emplace_back(buf.begin(), buf.begin() + n);
    }
    return out;
  }
};

// Message i: `size` octets, each the low byte of i + its position.
std::vector<uint8_t> message(size_t i, size_t size) {
  std::vector<uint8_t> m(size);
  for (size_t k = 0; k < size; ++k) m[k] = uint8_t(i + k);
  return m;
}

}  // namespace

TEST_CASE("collector link: messages sent in batches arrive as datagrams of their own, whole and in order",
          "[export][collectors]") {
  Collector c;
  CollectorLink link("127.0.0.1", uint16_t(c.port), CollectorLink::Transport::Udp, {});
  REQUIRE(link.take_new_connection());
  // 150 messages of 1,400 octets with shorter ones among them: a shorter
  // one ends a batch (the kernel may cut only the last datagram short).
  std::vector<std::vector<uint8_t>> sent;
  for (size_t i = 0; i < 150; ++i) sent.push_back(message(i, i % 50 == 49 ? 333 : 1400));
  for (size_t i = 0; i < sent.size(); ++i) REQUIRE(link.send(sent[i], 1) == CollectorLink::Refused::No);
  link.poll(mono_ns());
  CHECK(link.idle());
  std::vector<std::vector<uint8_t>> got = c.received();
  REQUIRE(got.size() == sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    INFO("datagram " << i);
    CHECK(got[i] == sent[i]);
  }
  CHECK(link.messages() == 150);
  CHECK(link.bytes() == 147 * 1400 + 3 * 333);
  CHECK(link.take_outcome().sent == 150);
  if (!link.batching()) {
    WARN("this kernel refused UDP_SEGMENT: the messages went one a call");
    return;
  }
  // Batches of at most kGsoSegments, none across a shorter message.
  CHECK(link.batched_datagrams() == 150);
  CHECK(link.batches() >= 3 + 150 / CollectorLink::kGsoSegments);
  CHECK(link.batches() < 20);
}

// The pace: a batch takes no more than the tokens allow (a datagram may
// take them below zero, as one alone did).
TEST_CASE("collector link: at a pace, a batch holds what the tokens allow and the rest waits", "[export][collectors]") {
  Collector c;
  CollectorLink::Options o;
  o.rate_bps = 8'000'000;  // a bucket of 5 ms: 5,000 octets, three messages of 1,400 and a fourth into debt
  CollectorLink link("127.0.0.1", uint16_t(c.port), CollectorLink::Transport::Udp, o);
  for (size_t i = 0; i < 20; ++i) REQUIRE(link.send(message(i, 1400), 2) == CollectorLink::Refused::No);
  link.poll(mono_ns());
  CHECK(link.messages() == 4);
  CHECK(link.queued_records() == 32);
  uint64_t deadline = mono_ns() + 2'000'000'000ull;
  while (!link.idle() && mono_ns() < deadline) link.poll(mono_ns());
  CHECK(link.idle());
  std::vector<std::vector<uint8_t>> got = c.received();
  REQUIRE(got.size() == 20);
  for (size_t i = 0; i < 20; ++i) CHECK(got[i] == message(i, 1400));
}

// No collector on the port: the kernel's port unreachable comes back as an
// error of a later send; that send's messages, a batch or one, are counted
// refused, never sent, and nothing is left queued.
TEST_CASE("collector link: to a port no one listens on, the records of refused batches count refused",
          "[export][collectors]") {
  uint16_t port;
  {
    Collector gone;  // a port that was free a moment ago
    port = uint16_t(gone.port);
  }
  CollectorLink link("127.0.0.1", port, CollectorLink::Transport::Udp, {});
  uint64_t refused = 0, sent = 0;
  for (int round = 0; round < 20; ++round) {
    for (size_t i = 0; i < 10; ++i) REQUIRE(link.send(message(i, 1000), 3) == CollectorLink::Refused::No);
    link.poll(mono_ns());
    usleep(2000);  // the ICMP answer arrives
    CollectorLink::Outcome o = link.take_outcome();
    refused += o.refused, sent += o.sent;
  }
  CHECK(link.idle());
  CHECK(refused + sent == 600);
  CHECK(refused > 0);
  CHECK(link.errors() > 0);
}
