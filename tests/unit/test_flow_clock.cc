// FlowClock, the clock a FlowTable meters on: packet times that go back or
// leap are dated at the clock and said so; real jumps (two packets agree)
// are followed; capture gaps of hours are ordinary time.
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "engine/flow/flow_clock.hh"

using namespace sluice;
using Dating = FlowClock::Dating;

namespace {

constexpr uint64_t kS = 1'000'000'000ull;
constexpr uint64_t kHour = 3600 * kS, kDay = 24 * kHour;
constexpr uint64_t kT0 = 1'500'000'000ull * kS;     // 2017
constexpr uint64_t k2036 = 2'082'758'400ull * kS;  // 2036-01-01

struct Dated {
  uint64_t t;
  Dating how;
};

std::vector<Dated> date_all(FlowClock &c, const std::vector<uint64_t> &times) {
  std::vector<Dated> out;
  for (uint64_t t : times) {
    Dating how;
    uint64_t d = c.date(t, &how);
    out.push_back({d, how});
  }
  return out;
}

}  // namespace

TEST_CASE("flow clock: ordered times are kept as they are, gaps of hours included", "[flow_clock]") {
  FlowClock c;
  std::vector<uint64_t> times = {kT0, kT0 + 1, kT0 + 1, kT0 + 5 * kS, kT0 + 5 * kS + 3 * kHour, kT0 + 5 * kS + 23 * kHour};
  auto d = date_all(c, times);
  for (size_t i = 0; i < times.size(); ++i) {
    INFO("packet " << i);
    CHECK(d[i].t == times[i]);
    CHECK(d[i].how == Dating::OnTime);
  }
  CHECK(c.now() == times.back());
  CHECK(c.shift() == 0);
}

TEST_CASE("flow clock: one packet dated years ahead is dated at the clock, the rest as they are", "[flow_clock]") {
  FlowClock c;
  auto d = date_all(c, {kT0, kT0 + kS, k2036, kT0 + 2 * kS, kT0 + 3 * kS});
  CHECK(d[2].how == Dating::Far);
  CHECK(d[2].t == kT0 + kS);
  CHECK(d[3].how == Dating::OnTime);
  CHECK(d[3].t == kT0 + 2 * kS);
  CHECK(d[4].t == kT0 + 3 * kS);
  CHECK(c.now() == kT0 + 3 * kS);
  // two far packets that disagree are two lone far packets
  auto e = date_all(c, {k2036, k2036 + 40 * kDay, kT0 + 4 * kS});
  CHECK(e[0].how == Dating::Far);
  CHECK(e[1].how == Dating::Far);
  CHECK(e[2].how == Dating::OnTime);
  CHECK(c.now() == kT0 + 4 * kS);
}

TEST_CASE("flow clock: a packet dated back is dated at the clock, so is one without a time", "[flow_clock]") {
  FlowClock c;
  auto d = date_all(c, {kT0 + 10 * kS, kT0 + 9 * kS, kT0 + 10 * kS - 30 * 60 * kS, 0, kT0 - 2 * kDay, kT0 + 11 * kS});
  CHECK(d[1].how == Dating::Behind);
  CHECK(d[1].t == kT0 + 10 * kS);
  CHECK(d[2].how == Dating::Behind);  // half an hour back (real traces do that)
  CHECK(d[2].t == kT0 + 10 * kS);
  CHECK(d[3].how == Dating::NoTime);
  CHECK(d[3].t == kT0 + 10 * kS);
  CHECK(d[4].how == Dating::Far);  // two days back, alone
  CHECK(d[4].t == kT0 + 10 * kS);
  CHECK(d[5].how == Dating::OnTime);
  CHECK(d[5].t == kT0 + 11 * kS);
}

TEST_CASE("flow clock: a jump forward of days that the next packet confirms is followed", "[flow_clock]") {
  FlowClock c;
  uint64_t later = kT0 + 3 * kDay;
  auto d = date_all(c, {kT0, kT0 + kS, later, later + kS, later + 2 * kS});
  CHECK(d[2].how == Dating::Far);  // alone so far: dated at the clock
  CHECK(d[2].t == kT0 + kS);
  CHECK(d[3].how == Dating::Followed);
  CHECK(d[3].t == later + kS);
  CHECK(d[4].how == Dating::OnTime);
  CHECK(d[4].t == later + 2 * kS);
  CHECK(c.shift() == 0);  // forward: the real times
}

TEST_CASE("flow clock: a jump back for good is followed by shifting later times, spacing kept", "[flow_clock]") {
  FlowClock c;
  uint64_t before = kT0 - 10 * kDay;  // the next file of a list, ten days older
  auto d = date_all(c, {kT0, kT0 + kS, before, before + 2 * kS, before + 5 * kS, before + 4 * kS});
  CHECK(d[2].how == Dating::Far);
  CHECK(d[2].t == kT0 + kS);
  CHECK(d[3].how == Dating::Followed);
  CHECK(d[3].t == kT0 + kS + 2 * kS);  // the far packet at the clock, this one 2 s after it
  CHECK(d[4].how == Dating::OnTime);
  CHECK(d[4].t == kT0 + kS + 5 * kS);
  CHECK(d[5].how == Dating::Behind);
  CHECK(c.shift() == kT0 + kS - before);
  // and a packet from before the jump is now far behind, alone
  auto e = date_all(c, {kT0 + 2 * kS, before + 6 * kS});
  CHECK(e[0].how == Dating::Far);
  CHECK(e[1].how == Dating::OnTime);
  CHECK(e[1].t == kT0 + kS + 6 * kS);
}

TEST_CASE("flow clock: dated times never go back, a far packet is as if it were not there, but for its own time", "[flow_clock]") {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    // a trace with jitter backwards, gaps of up to hours, and one far packet
    std::vector<uint64_t> times;
    uint64_t t = kT0;
    for (int i = 0; i < 300; ++i) {
      uint64_t r = rng() % 100;
      if (r < 10) times.push_back(t - rng() % (60 * kS));  // reordered
      else times.push_back(t += r < 12 ? rng() % (5 * kHour) : rng() % kS);
    }
    // the far packet in place of one, against the trace without that one
    std::vector<uint64_t> rogue = times, without = times;
    size_t at = 1 + rng() % (times.size() - 2);
    rogue[at] = rng() % 2 ? k2036 + rng() % kDay : 1 + rng() % (kT0 / 2);  // years ahead, or back
    without.erase(without.begin() + long(at));
    FlowClock a, b;
    auto da = date_all(a, without), db = date_all(b, rogue);
    INFO("round " << round << ", far packet at " << at);
    for (size_t i = 0; i < rogue.size(); ++i) {
      if (i) REQUIRE(db[i].t >= db[i - 1].t);
      if (i != at) REQUIRE(db[i].t == da[i < at ? i : i - 1].t);
    }
    CHECK(db[at].how == Dating::Far);
    CHECK(db[at].t == db[at - 1].t);
  }
}
