// FlowCache, the flow table behind FlowTable, and FlowCacheSlicer, the
// schedule behind GCSlicer: whole generated traces against TrafficGen's
// ground truth (bi and uni), against a plain reference model of the rules
// (idle, active, end grace; with and without the GC running), conservation
// with small tables (evict and drop), SYN after the end, key subsets, VLAN,
// time going backwards, sliced expiry, batches, construction and limits; the
// keyed hash (SipHash test vectors, keys crafted against the former linear
// hash, records independent of the key) and the probe bound.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <set>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <string>
#include <cstring>
#include <map>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/flow/flow_cache.hh"
#include "engine/flow/flow_hash.hh"
#include "engine/flow/page_populator.hh"
#include "engine/packet/parse.hh"
#include "engine/traffic/traffic_model.hh"
#include "tests/unit/crafted_flow_keys.hh"

using namespace sluice;

namespace {

constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08, kAck = 0x10;
constexpr uint64_t kUs = 1'000, kMs = 1'000'000, kS = 1'000'000'000;
constexpr uint64_t kForever = 1'000'000 * kS;

using KeyBytes = std::array<uint8_t, sizeof(FlowKey)>;

KeyBytes bytes_of(const FlowKey &k) {
  KeyBytes b;
  std::memcpy(b.data(), &k, sizeof k);
  return b;
}

FlowKey make_key(const uint8_t *src, const uint8_t *dst, uint16_t sport, uint16_t dport, uint8_t proto,
                 bool v6, uint16_t vlan) {
  FlowKey k;
  std::memset(&k, 0, sizeof k);
  std::memcpy(k.src_addr, src, 16);
  std::memcpy(k.dst_addr, dst, 16);
  k.src_port = sport;
  k.dst_port = dport;
  k.proto = proto;
  k.is_ipv6 = v6;
  k.vlan = vlan;
  return k;
}

FlowKey reversed(const FlowKey &k) {
  FlowKey r = k;
  std::memcpy(r.src_addr, k.dst_addr, 16);
  std::memcpy(r.dst_addr, k.src_addr, 16);
  r.src_port = k.dst_port;
  r.dst_port = k.src_port;
  return r;
}

// A parsed trace, every lane merged in time order (stable: within a lane, in order).
struct Trace {
  GeneratedTraffic g;
  std::vector<PacketMeta> metas;
  std::vector<uint64_t> times;
};

// About 10000 flows and 150000 packets in 1 s of trace time.
TrafficConfig small_config() {
  TrafficConfig c;
  c.new_flows_per_s = 10000;
  c.duration_ns = 1'000'000'000;
  return c;
}

Trace make_trace(const TrafficConfig &c) {
  Trace t;
  t.g = generate_traffic(c);
  struct Ref {
    uint64_t ts;
    uint32_t lane;
    uint32_t i;
  };
  std::vector<Ref> order;
  order.reserve(t.g.packets);
  for (uint32_t l = 0; l < t.g.lanes.size(); ++l)
    for (uint32_t i = 0; i < t.g.lanes[l].size(); ++i) order.push_back({t.g.lanes[l].packets[i].ts_ns, l, i});
  std::stable_sort(order.begin(), order.end(), [](const Ref &a, const Ref &b) { return a.ts < b.ts; });
  t.metas.resize(order.size());
  t.times.resize(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const GeneratedLane &lane = t.g.lanes[order[k].lane];
    ParseStatus s = parse_packet(lane.frame(order[k].i), lane.packets[order[k].i].length, LinkType::Ethernet,
                                 t.metas[k]);
    REQUIRE(s == ParseStatus::Ok);
    t.times[k] = order[k].ts;
  }
  return t;
}

// Feeds packets, collects every record.
struct Feeder {
  FlowCache &cache;
  std::vector<FlowRecord> records;

  FlowPacketOutcome operator()(const PacketMeta &m, uint64_t t) {
    FlowRecord buf[FlowCache::kMaxRecordsPerPacket];
    unsigned n = 99;
    FlowPacketOutcome o = cache.account(m, t, buf, &n);
    REQUIRE(n <= FlowCache::kMaxRecordsPerPacket);
    records.insert(records.end(), buf, buf + n);
    return o;
  }
  void feed(const Trace &t) {
    for (size_t i = 0; i < t.metas.size(); ++i) (*this)(t.metas[i], t.times[i]);
  }
  // The trace with a GC slicer run after each packet, as GCSlicer does.
  void feed(const Trace &t, FlowCacheSlicer &gc) {
    FlowRecord buf[256];
    for (size_t i = 0; i < t.metas.size(); ++i) {
      (*this)(t.metas[i], t.times[i]);
      size_t n;
      while (!gc.run(cache, t.times[i], buf, 256, &n)) records.insert(records.end(), buf, buf + n);
      records.insert(records.end(), buf, buf + n);
    }
  }
  size_t expire(uint64_t now) {
    FlowRecord buf[64];
    size_t n, before = records.size();
    for (size_t pos = 0; pos < cache.slots();) {
      pos = cache.expire(now, pos, cache.slots(), buf, 64, &n);
      records.insert(records.end(), buf, buf + n);
    }
    return records.size() - before;
  }
  void flush() {
    FlowRecord buf[256];
    size_t n, left;
    do {
      left = cache.flush(buf, 256, &n);
      records.insert(records.end(), buf, buf + n);
    } while (left);
    CHECK(cache.active() == 0);
  }
};

uint64_t sum_packets(const std::vector<FlowRecord> &v) {
  uint64_t s = 0;
  for (const FlowRecord &r : v) s += r.packets();
  return s;
}

// Sorted by bytes, for comparing record sets that may leave in another order.
std::vector<FlowRecord> sorted(std::vector<FlowRecord> v) {
  std::sort(v.begin(), v.end(),
            [](const FlowRecord &a, const FlowRecord &b) { return std::memcmp(&a, &b, sizeof a) < 0; });
  return v;
}

bool same_records(const std::vector<FlowRecord> &a, const std::vector<FlowRecord> &b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof a[0]) == 0);
}

std::string describe(const FlowRecord &r) {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "%s %u.%u:%u -> %u.%u:%u p%u v6=%u | fwd %llu pk %llu B %llu..%llu f%02x | rev %llu pk %llu B %llu..%llu "
                "f%02x | len %u..%u %u..%u lane %u bi %u",
                flow_end_reason_name(r.reason), r.key.src_addr[14], r.key.src_addr[15], r.key.src_port,
                r.key.dst_addr[14], r.key.dst_addr[15], r.key.dst_port, r.key.proto, r.key.is_ipv6,
                (unsigned long long)r.fwd.packets, (unsigned long long)r.fwd.octets,
                (unsigned long long)r.fwd.first_ns, (unsigned long long)r.fwd.last_ns, r.fwd.tcp_flags,
                (unsigned long long)r.rev.packets, (unsigned long long)r.rev.octets,
                (unsigned long long)r.rev.first_ns, (unsigned long long)r.rev.last_ns, r.rev.tcp_flags,
                r.fwd.min_len, r.fwd.max_len, r.rev.min_len, r.rev.max_len, r.lane, r.biflow);
  return buf;
}

// Checks two sorted record sets are equal; on a difference, shows the first few on each side.
void check_same(const std::vector<FlowRecord> &got, const std::vector<FlowRecord> &want) {
  if (same_records(got, want)) return;
  auto less = [](const FlowRecord &a, const FlowRecord &b) { return std::memcmp(&a, &b, sizeof a) < 0; };
  std::vector<FlowRecord> extra, missing;
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra), less);
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing), less);
  std::string msg = std::to_string(got.size()) + " records, want " + std::to_string(want.size()) + "\n";
  for (size_t i = 0; i < extra.size() && i < 2; ++i) msg += "  extra:   " + describe(extra[i]) + "\n";
  for (size_t i = 0; i < missing.size() && i < 2; ++i) msg += "  missing: " + describe(missing[i]) + "\n";
  FAIL_CHECK(msg);
}

void check_invariants(const FlowCache &c, uint64_t fed, const std::vector<FlowRecord> &recs) {
  const FlowCache::Stats &s = c.stats();
  CHECK(s.packets + s.not_ip + s.dropped_full + s.dropped_probe_limit == fed);
  CHECK(sum_packets(recs) + s.not_ip + s.dropped_full + s.dropped_probe_limit == fed);
  CHECK(s.records() == recs.size());
  uint64_t by_reason[6] = {};
  for (const FlowRecord &r : recs) {
    REQUIRE(unsigned(r.reason) >= 1);
    REQUIRE(unsigned(r.reason) <= 5);
    ++by_reason[unsigned(r.reason)];
    CHECK(r.packets() > 0);
    for (const FlowCounters *d : {&r.fwd, &r.rev})
      if (d->packets) {
        CHECK(d->first_ns <= d->last_ns);
        CHECK(d->min_len <= d->max_len);
      }
  }
  for (int i = 0; i < 6; ++i) CHECK(by_reason[i] == s.ended[i]);
  if (c.active() == 0)
    CHECK(s.created == s.records() - s.ended[int(FlowEndReason::ActiveTimeout)] + s.ended_empty);
}

// The rules of flow_cache.hh, written plainly (a map, no capacity): the
// reference the cache is compared with.
struct Reference {
  FlowCacheConfig cfg;
  struct Flow {
    FlowRecord rec;
    bool ended = false;
    uint64_t last = 0;
  };
  std::map<KeyBytes, Flow> flows;  // by the key in forward order
  std::vector<FlowRecord> out;
  uint64_t now = 0;

  explicit Reference(const FlowCacheConfig &c) : cfg(c) {}

  FlowKey key_of(const PacketMeta &m) const {
    FlowKey k;
    std::memset(&k, 0, sizeof k);
    if (cfg.key_src) std::memcpy(k.src_addr, m.src_addr, 16);
    if (cfg.key_dst) std::memcpy(k.dst_addr, m.dst_addr, 16);
    if (cfg.key_sport && m.has_l4()) k.src_port = m.src_port;
    if (cfg.key_dport && m.has_l4()) k.dst_port = m.dst_port;
    if (cfg.key_proto) k.proto = m.ip_proto;
    k.is_ipv6 = m.is_ipv6();
    if (cfg.key_vlan) k.vlan = m.vlan_outer;
    return k;
  }
  static bool has_packets(const Flow &f) { return f.rec.packets() > 0; }
  static uint64_t start(const Flow &f) {
    if (!f.rec.fwd.packets) return f.rec.rev.first_ns;
    if (!f.rec.rev.packets) return f.rec.fwd.first_ns;
    return std::min(f.rec.fwd.first_ns, f.rec.rev.first_ns);
  }
  // What is due at now, in deadline order; true when the flow is over.
  bool settle(Flow &f) {
    uint64_t to = f.ended ? std::min(cfg.idle_ns, cfg.end_grace_ns) : cfg.idle_ns;
    bool idle_due = now - f.last >= to;
    if (has_packets(f) && now - start(f) >= cfg.active_ns &&
        (!idle_due || (unsigned __int128)start(f) + cfg.active_ns <= (unsigned __int128)f.last + to)) {
      leave(f, FlowEndReason::ActiveTimeout);
      return idle_due;
    }
    if (!idle_due) return false;
    if (has_packets(f)) leave(f, f.ended ? FlowEndReason::EndOfFlow : FlowEndReason::IdleTimeout);
    return true;
  }
  void leave(Flow &f, FlowEndReason r) {
    FlowRecord rec = f.rec;
    rec.reason = r;
    out.push_back(rec);
    std::memset(&f.rec.fwd, 0, sizeof f.rec.fwd);
    std::memset(&f.rec.rev, 0, sizeof f.rec.rev);
  }

  void packet(const PacketMeta &m, uint64_t t) {
    now = std::max(now, t);
    if (!m.is_ip()) return;
    FlowKey k = key_of(m);
    uint8_t flags = m.has_l4() && m.ip_proto == 6 ? m.tcp_flags : 0;
    auto it = flows.find(bytes_of(k));
    int dir = 0;
    if (it == flows.end() && cfg.bidirectional) {
      it = flows.find(bytes_of(reversed(k)));
      dir = 1;
    }
    if (it != flows.end()) {
      Flow &f = it->second;
      bool syn = (flags & kSyn) && (!(flags & kAck) || !cfg.bidirectional);
      bool gone = settle(f);
      if (!gone && f.ended && syn) {
        if (has_packets(f)) leave(f, FlowEndReason::EndOfFlow);
        gone = true;
      }
      if (gone) {
        flows.erase(it);
        it = flows.end();
      }
    }
    if (it == flows.end()) {
      Flow f;
      std::memset(&f.rec, 0, sizeof f.rec);
      f.rec.key = k;
      f.rec.biflow = cfg.bidirectional;
      f.rec.lane = cfg.lane;
      it = flows.emplace(bytes_of(k), f).first;
      dir = 0;
    }
    Flow &f = it->second;
    FlowCounters &d = dir ? f.rec.rev : f.rec.fwd;
    uint16_t len = uint16_t(std::min<uint32_t>(m.ip_total_length, 0xffff));
    if (d.packets++ == 0) {
      d.first_ns = d.last_ns = t;
      d.min_len = d.max_len = len;
    }
    d.first_ns = std::min(d.first_ns, t);
    d.last_ns = std::max(d.last_ns, t);
    d.min_len = std::min(d.min_len, len);
    d.max_len = std::max(d.max_len, len);
    d.octets += m.ip_total_length;
    d.tcp_flags |= flags;
    f.last = std::max(f.last, t);
    f.ended |= (flags & (kFin | kRst)) != 0;
  }

  void flush() {
    for (auto &[k, f] : flows)
      if (!settle(f) && has_packets(f)) leave(f, f.ended ? FlowEndReason::EndOfFlow : FlowEndReason::ForcedEnd);
    flows.clear();
  }
};

// A hand-made IPv4 packet: addresses 10.0.0.a (v4-mapped), ports, protocol, TCP flags, IP length.
PacketMeta pkt(uint8_t src, uint8_t dst, uint16_t sport, uint16_t dport, uint8_t flags = kAck,
               uint32_t len = 40, uint8_t proto = 6, uint16_t vlan = 0) {
  PacketMeta m;
  std::memset(&m, 0, sizeof m);
  for (uint8_t *a : {m.src_addr, m.dst_addr}) {
    a[10] = a[11] = 0xff;
    a[12] = 10;
  }
  m.src_addr[15] = src;
  m.dst_addr[15] = dst;
  m.src_port = sport;
  m.dst_port = dport;
  m.ip_proto = proto;
  m.status = ParseStatus::Ok;
  m.flags = PacketMeta::kIpv4 | PacketMeta::kHasL4;
  m.ip_total_length = len;
  m.tcp_flags = proto == 6 ? flags : 0;
  m.vlan_outer = vlan;
  m.vlan_count = vlan ? 1 : 0;
  return m;
}

FlowCacheConfig long_timeouts(bool bi) {
  FlowCacheConfig c;
  c.capacity = 1 << 16;
  c.idle_ns = kForever;
  c.active_ns = kForever;
  c.bidirectional = bi;
  c.lane = 3;
  return c;
}

}  // namespace

TEST_CASE("flowcache: bi, a whole trace gives the ground truth flows exactly", "[flowcache]") {
  TrafficConfig tc = small_config();
  tc.lanes = 2;
  tc.ipv6 = 0.3;
  Trace t = make_trace(tc);
  REQUIRE(t.g.flows.size() > 5000);
  FlowCache cache(long_timeouts(true));
  Feeder f{cache, {}};
  f.feed(t);
  CHECK(f.records.empty());  // nothing ends before the end of input
  CHECK(cache.active() == t.g.flows.size());
  f.flush();
  check_invariants(cache, t.metas.size(), f.records);
  REQUIRE(f.records.size() == t.g.flows.size());

  // min and max IP length per flow and direction, from the packets
  std::map<KeyBytes, std::pair<size_t, int>> index;
  for (size_t i = 0; i < t.g.flows.size(); ++i) {
    const TrafficFlow &g = t.g.flows[i];
    FlowKey k = make_key(g.src_addr, g.dst_addr, g.src_port, g.dst_port, g.proto, g.is_ipv6, g.vlan);
    index[bytes_of(k)] = {i, 0};
    index[bytes_of(reversed(k))] = {i, 1};
  }
  std::vector<std::array<uint16_t, 4>> lens(t.g.flows.size(), {0xffff, 0, 0xffff, 0});
  for (const PacketMeta &m : t.metas) {
    FlowKey k = make_key(m.src_addr, m.dst_addr, m.src_port, m.dst_port, m.ip_proto, m.is_ipv6(), m.vlan_outer);
    auto [i, dir] = index.at(bytes_of(k));
    auto &l = lens[i];
    l[2 * dir] = std::min<uint16_t>(l[2 * dir], uint16_t(m.ip_total_length));
    l[2 * dir + 1] = std::max<uint16_t>(l[2 * dir + 1], uint16_t(m.ip_total_length));
  }

  std::map<KeyBytes, FlowRecord> by_key;
  for (const FlowRecord &r : f.records) REQUIRE(by_key.emplace(bytes_of(r.key), r).second);
  uint64_t mismatches = 0;
  for (size_t i = 0; i < t.g.flows.size(); ++i) {
    const TrafficFlow &g = t.g.flows[i];
    auto it = by_key.find(bytes_of(make_key(g.src_addr, g.dst_addr, g.src_port, g.dst_port, g.proto, g.is_ipv6, g.vlan)));
    REQUIRE(it != by_key.end());  // keyed client -> server: the client sends first
    const FlowRecord &r = it->second;
    auto same_dir = [](const FlowCounters &c, const TrafficFlowDirection &d) {
      return c.packets == d.packets && c.octets == d.bytes && c.first_ns == d.first_ns && c.last_ns == d.last_ns &&
             c.tcp_flags == d.tcp_flags;
    };
    FlowEndReason want = g.end == FlowEnd::None ? FlowEndReason::ForcedEnd : FlowEndReason::EndOfFlow;
    bool ok = same_dir(r.fwd, g.fwd) && same_dir(r.rev, g.rev) && r.reason == want && r.biflow == 1 &&
              r.lane == 3 && r.fwd.min_len == lens[i][0] && r.fwd.max_len == lens[i][1] &&
              (g.rev.packets == 0 || (r.rev.min_len == lens[i][2] && r.rev.max_len == lens[i][3]));
    if (!ok && ++mismatches <= 3) {
      INFO("flow " << i);
      CHECK(r.fwd.packets == g.fwd.packets);
      CHECK(r.rev.packets == g.rev.packets);
      CHECK(r.fwd.octets == g.fwd.bytes);
      CHECK(r.rev.octets == g.rev.bytes);
      CHECK(r.fwd.first_ns == g.fwd.first_ns);
      CHECK(r.rev.last_ns == g.rev.last_ns);
      CHECK(int(r.fwd.tcp_flags) == int(g.fwd.tcp_flags));
      CHECK(int(r.reason) == int(want));
    }
  }
  CHECK(mismatches == 0);
  CHECK(cache.stats().created == t.g.flows.size());
  CHECK(cache.stats().ended[int(FlowEndReason::EndOfFlow)] > t.g.flows.size() / 2);
  CHECK(cache.stats().ended[int(FlowEndReason::ForcedEnd)] > 0);
}

TEST_CASE("flowcache: uni, a whole trace gives one flow per direction exactly", "[flowcache]") {
  TrafficConfig tc = small_config();
  tc.ipv6 = 0.3;
  tc.vlan = 100;
  Trace t = make_trace(tc);
  FlowCache cache(long_timeouts(false));
  Feeder f{cache, {}};
  f.feed(t);
  f.flush();
  check_invariants(cache, t.metas.size(), f.records);

  std::map<KeyBytes, FlowRecord> by_key;
  for (const FlowRecord &r : f.records) REQUIRE(by_key.emplace(bytes_of(r.key), r).second);
  size_t expected = 0;
  uint64_t mismatches = 0;
  for (const TrafficFlow &g : t.g.flows) {
    FlowKey k = make_key(g.src_addr, g.dst_addr, g.src_port, g.dst_port, g.proto, g.is_ipv6, g.vlan);
    REQUIRE(k.vlan == 100);
    for (int dir = 0; dir < 2; ++dir) {
      const TrafficFlowDirection &d = dir ? g.rev : g.fwd;
      auto it = by_key.find(bytes_of(dir ? reversed(k) : k));
      if (d.packets == 0) {
        CHECK(it == by_key.end());
        continue;
      }
      ++expected;
      REQUIRE(it != by_key.end());
      const FlowRecord &r = it->second;
      // each direction ends by its own FIN or RST
      FlowEndReason want = d.tcp_flags & (kFin | kRst) ? FlowEndReason::EndOfFlow : FlowEndReason::ForcedEnd;
      bool ok = r.fwd.packets == d.packets && r.fwd.octets == d.bytes && r.fwd.first_ns == d.first_ns &&
                r.fwd.last_ns == d.last_ns && r.fwd.tcp_flags == d.tcp_flags && r.rev.packets == 0 &&
                r.rev.octets == 0 && r.rev.first_ns == 0 && r.biflow == 0 && r.reason == want;
      if (!ok && ++mismatches <= 3) {
        CHECK(r.fwd.packets == d.packets);
        CHECK(r.fwd.octets == d.bytes);
        CHECK(int(r.reason) == int(want));
      }
    }
  }
  CHECK(mismatches == 0);
  CHECK(f.records.size() == expected);
}

TEST_CASE("flowcache: short timeouts split flows exactly as the rules say, GC or not", "[flowcache]") {
  TrafficConfig tc = small_config();
  tc.ipv6 = 0.2;
  tc.lanes = 2;
  Trace t = make_trace(tc);
  auto bi = GENERATE(true, false);
  FlowCacheConfig cfg = long_timeouts(bi);
  cfg.idle_ns = 1 * kMs;       // RTTs are 0.1..5 ms: some waits exceed it
  cfg.active_ns = 20 * kMs;    // the largest flows last ~150 ms
  cfg.end_grace_ns = 300 * kUs;
  INFO("bi " << bi);

  Reference ref(cfg);
  for (size_t i = 0; i < t.metas.size(); ++i) ref.packet(t.metas[i], t.times[i]);
  ref.flush();
  std::vector<FlowRecord> want = sorted(ref.out);
  uint64_t by_reason[6] = {};
  for (const FlowRecord &r : want) ++by_reason[int(r.reason)];
  REQUIRE(want.size() > t.g.flows.size());  // flows were split
  CHECK(by_reason[int(FlowEndReason::IdleTimeout)] > 100);
  CHECK(by_reason[int(FlowEndReason::ActiveTimeout)] > 10);
  CHECK(by_reason[int(FlowEndReason::EndOfFlow)] > 1000);
  CHECK(sum_packets(want) == t.metas.size());

  // no GC at all: account() and flush() apply the timeouts alone
  {
    FlowCache cache(cfg);
    Feeder f{cache, {}};
    f.feed(t);
    f.flush();
    check_invariants(cache, t.metas.size(), f.records);
    check_same(sorted(f.records), want);
  }
  // a GC slicer at two very different paces: the same records
  for (auto [period, slices] : {std::pair<uint64_t, uint64_t>{500 * kUs, 8}, {50 * kMs, 3}}) {
    INFO("period " << period << " slices " << slices);
    FlowCache cache(cfg);
    FlowCacheSlicer gc(period, slices);
    Feeder f{cache, {}};
    size_t by_gc = 0;
    for (size_t i = 0; i < t.metas.size(); ++i) {
      FlowRecord buf[16];
      size_t n;
      bool done;
      do {
        done = gc.run(cache, t.times[i], buf, 16, &n);
        f.records.insert(f.records.end(), buf, buf + n);
        by_gc += n;
      } while (!done);
      f(t.metas[i], t.times[i]);
    }
    f.flush();
    check_invariants(cache, t.metas.size(), f.records);
    CHECK(by_gc > 1000);
    check_same(sorted(f.records), want);
  }
}

TEST_CASE("flowcache: a small table conserves packets, evicting or dropping", "[flowcache]") {
  TrafficConfig tc = small_config();
  tc.duration_ns = 500 * kMs;
  tc.new_flows_per_s = 40000;
  Trace t = make_trace(tc);
  REQUIRE(t.g.flows.size() > 10000);
  // a few non-IP packets in the stream too
  PacketMeta arp;
  std::memset(&arp, 0, sizeof arp);
  arp.status = ParseStatus::NonIp;
  for (size_t i = 0; i < t.metas.size(); i += 1000) t.metas[i] = arp;

  SECTION("evict") {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.capacity = 256;
    FlowCache cache(cfg);
    Feeder f{cache, {}};
    f.feed(t);
    CHECK(cache.active() == 256);
    f.flush();
    check_invariants(cache, t.metas.size(), f.records);
    const FlowCache::Stats &s = cache.stats();
    CHECK(s.dropped_full == 0);
    CHECK(s.not_ip == (t.metas.size() + 999) / 1000);
    CHECK(s.evicted > 1000);
    CHECK(s.ended[int(FlowEndReason::LackOfResources)] > 1000);
    CHECK(s.ended[int(FlowEndReason::LackOfResources)] <= s.evicted);
    CHECK(s.created > t.g.flows.size());  // evicted flows come back as new ones
  }
  SECTION("drop") {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.capacity = 256;
    cfg.evict_when_full = false;
    FlowCache cache(cfg);
    Feeder f{cache, {}};
    uint64_t full = 0;
    for (size_t i = 0; i < t.metas.size(); ++i) full += f(t.metas[i], t.times[i]) == FlowPacketOutcome::TableFull;
    f.flush();
    check_invariants(cache, t.metas.size(), f.records);
    const FlowCache::Stats &s = cache.stats();
    CHECK(s.dropped_full == full);
    CHECK(full > 10000);
    CHECK(s.evicted == 0);
    CHECK(s.ended[int(FlowEndReason::LackOfResources)] == 0);
    CHECK(s.created == 256);  // long timeouts: nothing ever makes room
  }
  SECTION("drop, with timeouts making room") {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.capacity = 32;
    cfg.evict_when_full = false;
    cfg.idle_ns = 2 * kMs;
    FlowCache cache(cfg);
    Feeder f{cache, {}};
    f.feed(t);
    f.flush();
    check_invariants(cache, t.metas.size(), f.records);
    CHECK(cache.stats().dropped_full > 0);
    CHECK(cache.stats().created > 1000);  // due flows are reclaimed without a GC
    CHECK(cache.stats().ended[int(FlowEndReason::LackOfResources)] == 0);
  }
  SECTION("capacity 1") {
    for (bool bi : {true, false}) {
      FlowCacheConfig cfg = long_timeouts(bi);
      cfg.capacity = 1;
      FlowCache cache(cfg);
      Feeder f{cache, {}};
      f.feed(t);
      f.flush();
      check_invariants(cache, t.metas.size(), f.records);
    }
  }
}

TEST_CASE("flowcache: the victim: CLOCK second chance, ended flows first, else the oldest", "[flowcache]") {
  SECTION("a small table") {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.capacity = 4;
    FlowCache cache(cfg);
    Feeder f{cache, {}};
    for (uint8_t i = 1; i <= 4; ++i) f(pkt(1, 100 + i, 1000, 80), i);  // slots 0..3, all referenced
    f(pkt(1, 105, 1000, 80), 10);  // the hand clears every bit, comes round: slot 0 goes
    REQUIRE(f.records.size() == 1);
    CHECK(f.records[0].key.dst_addr[15] == 101);
    CHECK(f.records[0].reason == FlowEndReason::LackOfResources);
    f(pkt(1, 102, 1000, 80), 11);  // 102 and 104 used again; 103 not
    f(pkt(1, 104, 1000, 80), 12);
    f(pkt(1, 106, 1000, 80), 13);
    REQUIRE(f.records.size() == 2);
    CHECK(f.records[1].key.dst_addr[15] == 103);
    f(pkt(1, 104, 1000, 80, kFin | kAck), 14);  // ended: taken before live ones, with its own reason
    f(pkt(1, 107, 1000, 80), 15);
    REQUIRE(f.records.size() == 3);
    CHECK(f.records[2].key.dst_addr[15] == 104);
    CHECK(f.records[2].reason == FlowEndReason::EndOfFlow);
    CHECK(f.records[2].fwd.packets == 3);
    CHECK(cache.stats().evicted == 3);
    CHECK(cache.stats().ended[int(FlowEndReason::LackOfResources)] == 2);
  }
  SECTION("every entry swept was referenced: the least recently active of them") {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.capacity = 4 * FlowCache::kSweep;
    FlowCache cache(cfg);
    Feeder f{cache, {}};
    for (unsigned i = 0; i < cfg.capacity; ++i) f(pkt(1, 2, uint16_t(i), 80), 100 + i);
    for (unsigned i = 0; i < FlowCache::kSweep; ++i)  // the first kSweep slots again, the last one first
      f(pkt(1, 2, uint16_t(FlowCache::kSweep - 1 - i), 80), 1000 + i);
    f(pkt(1, 3, 1, 80), 2000);
    REQUIRE(f.records.size() == 1);
    CHECK(f.records[0].key.src_port == FlowCache::kSweep - 1);
    CHECK(f.records[0].last_ns() == 1000);
  }
}

TEST_CASE("flowcache: active timeouts give several records that add up to the flow", "[flowcache]") {
  SECTION("one long flow, in account() and in the scan") {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.active_ns = 100 * kMs;
    cfg.idle_ns = 50 * kMs;
    auto use_gc = GENERATE(false, true);
    FlowCache cache(cfg);
    Feeder f{cache, {}};
    uint64_t t0 = 5 * kS;
    for (int i = 0; i < 100; ++i) {
      uint64_t t = t0 + uint64_t(i) * 10 * kMs;
      f(i % 3 ? pkt(2, 1, 53, 5000, 0, 100 + i, 17) : pkt(1, 2, 5000, 53, 0, 1000, 17), t);
      if (use_gc) f.expire(t + 10 * kMs);  // the scan at the next packet's time
    }
    f.expire(t0 + 2 * kS);  // idle: the last record leaves
    CHECK(cache.active() == 0);
    check_invariants(cache, 100, f.records);
    REQUIRE(f.records.size() == 10);
    uint64_t fwd = 0, rev = 0, octets = 0;
    for (size_t i = 0; i < f.records.size(); ++i) {
      const FlowRecord &r = f.records[i];
      // the last record's active deadline (t0 + 1 s) came before its idle one (t0 + 1.04 s)
      CHECK(r.reason == FlowEndReason::ActiveTimeout);
      CHECK(r.key.src_addr[15] == 1);  // the orientation of the first packet, kept across records
      CHECK(r.key.src_port == 5000);
      fwd += r.fwd.packets;
      rev += r.rev.packets;
      octets += r.octets();
      CHECK(r.first_ns() == t0 + i * 100 * kMs);
      CHECK(r.last_ns() == t0 + i * 100 * kMs + 90 * kMs);
    }
    CHECK(fwd == 34);
    CHECK(rev == 66);
    uint64_t want_octets = 0;
    for (int i = 0; i < 100; ++i) want_octets += i % 3 ? 100 + i : 1000;
    CHECK(octets == want_octets);
    CHECK(cache.stats().ended_empty == 1);  // the rest of the flow after the last record
  }
  SECTION("a trace: records of one flow add up to the ground truth") {
    TrafficConfig tc = small_config();
    Trace t = make_trace(tc);
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.active_ns = 10 * kMs;
    FlowCache cache(cfg);
    Feeder f{cache, {}};
    f.feed(t);
    f.flush();
    check_invariants(cache, t.metas.size(), f.records);
    CHECK(cache.stats().ended[int(FlowEndReason::ActiveTimeout)] > 500);
    std::map<KeyBytes, FlowRecord> sum;
    for (const FlowRecord &r : f.records) {
      FlowRecord &s = sum[bytes_of(r.key)];
      if (s.packets() == 0) {
        s = r;
        continue;
      }
      for (auto [a, b] : {std::pair{&s.fwd, &r.fwd}, std::pair{&s.rev, &r.rev}}) {
        if (!b->packets) continue;
        if (!a->packets) a->first_ns = b->first_ns;
        a->packets += b->packets;
        a->octets += b->octets;
        a->last_ns = std::max(a->last_ns, b->last_ns);
        a->tcp_flags |= b->tcp_flags;
      }
    }
    REQUIRE(sum.size() == t.g.flows.size());
    uint64_t mismatches = 0;
    for (const TrafficFlow &g : t.g.flows) {
      const FlowRecord &s =
          sum.at(bytes_of(make_key(g.src_addr, g.dst_addr, g.src_port, g.dst_port, g.proto, g.is_ipv6, g.vlan)));
      mismatches += s.fwd.packets != g.fwd.packets || s.rev.packets != g.rev.packets ||
                    s.fwd.octets != g.fwd.bytes || s.rev.octets != g.rev.bytes ||
                    s.fwd.first_ns != g.fwd.first_ns || s.fwd.last_ns != g.fwd.last_ns ||
                    s.rev.last_ns != g.rev.last_ns || s.fwd.tcp_flags != g.fwd.tcp_flags ||
                    s.rev.tcp_flags != g.rev.tcp_flags;
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("flowcache: FIN/RST end a flow but keep its close, a SYN after the end starts a new one", "[flowcache]") {
  SECTION("bi") {
    FlowCache cache(long_timeouts(true));
    Feeder f{cache, {}};
    uint64_t t = 1000 * kS;
    auto conn = [&](uint16_t sport) {
      f(pkt(1, 2, sport, 443, kSyn, 60), t += kMs);
      f(pkt(2, 1, 443, sport, kSyn | kAck, 60), t += kMs);
      f(pkt(1, 2, sport, 443, kAck), t += kMs);
      f(pkt(1, 2, sport, 443, kPsh | kAck, 500), t += kMs);
      f(pkt(1, 2, sport, 443, kFin | kAck), t += kMs);
      f(pkt(2, 1, 443, sport, kFin | kAck), t += kMs);
      f(pkt(1, 2, sport, 443, kAck), t += kMs);  // the last ACK: still this flow
    };
    conn(40000);
    CHECK(f.records.empty());
    CHECK(cache.active() == 1);
    conn(40000);  // the same 5-tuple again: its SYN ends the first
    REQUIRE(f.records.size() == 1);
    const FlowRecord &r = f.records[0];
    CHECK(r.reason == FlowEndReason::EndOfFlow);
    CHECK(r.fwd.packets == 5);
    CHECK(r.rev.packets == 2);
    CHECK(int(r.fwd.tcp_flags) == (kSyn | kAck | kPsh | kFin));
    CHECK(int(r.rev.tcp_flags) == (kSyn | kAck | kFin));
    CHECK(r.fwd.min_len == 40);
    CHECK(r.fwd.max_len == 500);
    CHECK(r.octets() == 60 + 40 + 500 + 40 + 40 + 60 + 40);
    // a SYN from the other side reuses the entry with the new orientation
    f(pkt(2, 1, 443, 40000, kSyn, 60), t += kMs);
    REQUIRE(f.records.size() == 2);
    CHECK(f.records[1].fwd.packets == 5);
    f.flush();
    REQUIRE(f.records.size() == 3);
    CHECK(f.records[2].key.src_addr[15] == 2);
    CHECK(f.records[2].reason == FlowEndReason::ForcedEnd);
    CHECK(cache.stats().created == 3);
  }
  SECTION("bi: RST, stray packets within the grace stay, after it a new flow") {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.end_grace_ns = 100 * kMs;
    FlowCache cache(cfg);
    Feeder f{cache, {}};
    uint64_t t = 1000 * kS;
    f(pkt(1, 2, 1234, 80, kSyn), t);
    f(pkt(2, 1, 80, 1234, kSyn | kAck), t += kMs);
    f(pkt(2, 1, 80, 1234, kRst | kAck), t += kMs);
    f(pkt(1, 2, 1234, 80, kAck), t += 50 * kMs);  // within the grace: the same flow
    CHECK(f.records.empty());
    CHECK(f.expire(t + 99 * kMs) == 0);
    CHECK(f.expire(t + 100 * kMs) == 1);  // no packet for the grace: the scan ends it
    REQUIRE(f.records.size() == 1);
    CHECK(f.records[0].reason == FlowEndReason::EndOfFlow);
    CHECK(f.records[0].packets() == 4);
    // the same, found by account() without the scan
    f(pkt(1, 2, 1234, 80, kSyn), t += kS);
    f(pkt(1, 2, 1234, 80, kRst), t += kMs);
    f(pkt(1, 2, 1234, 80, kAck), t += 100 * kMs);
    REQUIRE(f.records.size() == 2);
    CHECK(f.records[1].reason == FlowEndReason::EndOfFlow);
    CHECK(f.records[1].packets() == 2);
    f.flush();
    REQUIRE(f.records.size() == 3);
    CHECK(f.records[2].reason == FlowEndReason::ForcedEnd);  // the ACK began a flow of its own
    CHECK(f.records[2].packets() == 1);
  }
  SECTION("uni: the responder's SYN|ACK starts its new flow too") {
    FlowCache cache(long_timeouts(false));
    Feeder f{cache, {}};
    uint64_t t = 1000 * kS;
    for (int round = 0; round < 2; ++round) {
      f(pkt(1, 2, 999, 22, kSyn), t += kMs);
      f(pkt(2, 1, 22, 999, kSyn | kAck), t += kMs);
      f(pkt(1, 2, 999, 22, kFin | kAck), t += kMs);
      f(pkt(2, 1, 22, 999, kFin | kAck), t += kMs);
      f(pkt(1, 2, 999, 22, kAck), t += kMs);
    }
    REQUIRE(f.records.size() == 2);
    CHECK(f.records[0].fwd.packets == 3);
    CHECK(f.records[1].fwd.packets == 2);
    CHECK(f.records[1].key.src_addr[15] == 2);
    f.flush();
    CHECK(f.records.size() == 4);
    for (const FlowRecord &r : f.records) CHECK(r.reason == FlowEndReason::EndOfFlow);
  }
  SECTION("a SYN|ACK after the end does not restart a biflow; a SYN on a live flow does not") {
    FlowCache cache(long_timeouts(true));
    Feeder f{cache, {}};
    f(pkt(1, 2, 5, 6, kSyn), 1 * kS);
    f(pkt(1, 2, 5, 6, kSyn), 2 * kS);  // retransmitted SYN
    f(pkt(1, 2, 5, 6, kFin), 3 * kS - 1);
    f(pkt(2, 1, 6, 5, kSyn | kAck), 3 * kS);
    CHECK(f.records.empty());
    f.flush();
    REQUIRE(f.records.size() == 1);
    CHECK(f.records[0].packets() == 4);
  }
}

TEST_CASE("flowcache: key subsets merge flows, zero what they leave out", "[flowcache]") {
  auto bi = GENERATE(true, false);
  FlowCacheConfig cfg = long_timeouts(bi);
  cfg.key_proto = cfg.key_sport = cfg.key_dport = false;  // key [src, dst, vlan]
  FlowCache cache(cfg);
  Feeder f{cache, {}};
  f(pkt(1, 2, 1000, 80), 1);
  f(pkt(1, 2, 1001, 443), 2);
  f(pkt(1, 2, 53, 53, 0, 80, 17), 3);
  f(pkt(2, 1, 80, 1000), 4);
  f(pkt(1, 3, 1000, 80), 5);
  f.flush();
  REQUIRE(f.records.size() == (bi ? 2u : 3u));
  for (const FlowRecord &r : f.records) {
    CHECK(r.key.src_port == 0);
    CHECK(r.key.dst_port == 0);
    CHECK(r.key.proto == 0);
    CHECK(r.key.is_ipv6 == 0);
    CHECK(r.key.src_addr[15] != 0);
  }
  uint64_t most = 0;
  for (const FlowRecord &r : f.records) most = std::max(most, r.packets());
  CHECK(most == (bi ? 4u : 3u));

  SECTION("asymmetric key: in bi mode the directions do not meet") {
    FlowCacheConfig c2 = long_timeouts(true);
    c2.key_src = c2.key_sport = false;  // [dst, proto, dport, vlan]
    FlowCache c(c2);
    Feeder g{c, {}};
    g(pkt(1, 2, 1000, 80), 1);
    g(pkt(3, 2, 1001, 80), 2);  // another client, same service: the same flow
    g(pkt(2, 1, 80, 1000), 3);
    g.flush();
    REQUIRE(g.records.size() == 2);
  }
}

TEST_CASE("flowcache: VLAN in the key separates flows unless left out", "[flowcache]") {
  auto key_vlan = GENERATE(true, false);
  FlowCacheConfig cfg = long_timeouts(true);
  cfg.key_vlan = key_vlan;
  FlowCache cache(cfg);
  Feeder f{cache, {}};
  f(pkt(1, 2, 1000, 80, kAck, 40, 6, 10), 1);
  f(pkt(2, 1, 80, 1000, kAck, 40, 6, 10), 2);
  f(pkt(1, 2, 1000, 80, kAck, 40, 6, 20), 3);
  f(pkt(1, 2, 1000, 80, kAck, 40, 6, 0), 4);
  f.flush();
  if (key_vlan) {
    REQUIRE(f.records.size() == 3);
    std::vector<uint16_t> vlans;
    for (const FlowRecord &r : f.records) vlans.push_back(r.key.vlan);
    std::sort(vlans.begin(), vlans.end());
    CHECK(vlans == std::vector<uint16_t>{0, 10, 20});
  } else {
    REQUIRE(f.records.size() == 1);
    CHECK(f.records[0].key.vlan == 0);
    CHECK(f.records[0].packets() == 4);
  }
}

// The canonical order of a biflow's two sides (prepare_key, without
// branches): the addresses compared word by word, high word first, then the
// ports. An order that looked at each word on its own would put the two
// directions of a conversation in different flows where the words disagree.
TEST_CASE("flowcache: bi: both directions are one flow, whichever side orders first and by what", "[flowcache]") {
  const bool batch = GENERATE(false, true);
  FlowCache cache(long_timeouts(true));
  Feeder f{cache, {}};
  auto v6 = [](uint8_t hi_src, uint8_t lo_src, uint8_t hi_dst, uint8_t lo_dst, uint16_t sport, uint16_t dport) {
    PacketMeta m = pkt(0, 0, sport, dport);
    std::memset(m.src_addr, 0, 16), std::memset(m.dst_addr, 0, 16);
    m.src_addr[0] = 0x20, m.src_addr[7] = hi_src, m.src_addr[15] = lo_src;
    m.dst_addr[0] = 0x20, m.dst_addr[7] = hi_dst, m.dst_addr[15] = lo_dst;
    m.flags = PacketMeta::kIpv6 | PacketMeta::kHasL4;
    return m;
  };
  auto reply = [](PacketMeta m) {
    std::swap_ranges(m.src_addr, m.src_addr + 16, m.dst_addr);
    std::swap(m.src_port, m.dst_port);
    return m;
  };
  const std::vector<PacketMeta> first = {
      pkt(1, 2, 1000, 80),           // the lower address first
      pkt(9, 3, 80, 1000),           // the higher first
      pkt(5, 5, 1000, 80),           // one address: the ports decide
      pkt(5, 5, 80, 1000),           // the same, the other way round
      v6(1, 9, 2, 1, 1000, 80),      // high words say lower, low words higher
      v6(2, 1, 1, 9, 1000, 80),      // the opposite
      pkt(7, 7, 443, 443),           // both sides alike: its reply is the same key
  };
  std::vector<PacketMeta> all;
  for (const PacketMeta &m : first) all.push_back(m), all.push_back(reply(m));
  uint64_t t = 1;
  if (batch) {
    std::vector<const PacketMeta *> ptrs;
    std::vector<uint64_t> times;
    for (const PacketMeta &m : all) ptrs.push_back(&m), times.push_back(t++);
    std::vector<FlowRecord> out(all.size() * FlowCache::kMaxRecordsPerPacket);
    unsigned n = 0;
    cache.account_batch(ptrs.data(), times.data(), unsigned(all.size()), nullptr, out.data(), &n);
    REQUIRE(n == 0);
  } else {
    for (const PacketMeta &m : all) f(m, t++);
  }
  f.flush();
  // pkt(5, 5, 1000, 80) and pkt(5, 5, 80, 1000) are one conversation seen twice.
  REQUIRE(f.records.size() == first.size() - 1);
  for (const FlowRecord &r : f.records) {
    INFO(describe(r));
    if (r.key.src_port == 443) {
      CHECK(r.fwd.packets + r.rev.packets == 2);
    } else if (r.key.src_addr[15] == 5) {
      CHECK(r.fwd.packets == 2);
      CHECK(r.rev.packets == 2);
    } else {
      CHECK(r.fwd.packets == 1);
      CHECK(r.rev.packets == 1);
    }
  }
}

TEST_CASE("flowcache: non-IP is not metered, IP without L4 is, with ports 0, ICMP by type", "[flowcache]") {
  FlowCache cache(long_timeouts(true));
  Feeder f{cache, {}};
  PacketMeta arp;
  std::memset(&arp, 0, sizeof arp);
  arp.status = ParseStatus::NonIp;
  CHECK(f(arp, 1) == FlowPacketOutcome::NotIp);
  PacketMeta bad = pkt(1, 2, 3, 4);
  bad.flags = 0;  // the IP header was not valid
  bad.status = ParseStatus::BadIpv4HeaderLength;
  CHECK(f(bad, 2) == FlowPacketOutcome::NotIp);
  CHECK(cache.stats().not_ip == 2);
  CHECK(cache.active() == 0);

  PacketMeta first_frag = pkt(1, 2, 5000, 53, 0, 1500, 17);
  first_frag.flags |= PacketMeta::kFragment | PacketMeta::kFirstFragment;
  PacketMeta frag = pkt(1, 2, 0, 0, 0, 600, 17);
  frag.flags = PacketMeta::kIpv4 | PacketMeta::kFragment;
  frag.src_port = 77;  // not valid without kHasL4: ignored
  frag.tcp_flags = kSyn;
  CHECK(f(first_frag, 3) == FlowPacketOutcome::Counted);
  CHECK(f(frag, 4) == FlowPacketOutcome::Counted);
  CHECK(f(frag, 5) == FlowPacketOutcome::Counted);
  // ICMP echo request and reply: dst_port type << 8 | code, two flows
  f(pkt(1, 2, 0, 0x0800, 0, 84, 1), 6);
  f(pkt(2, 1, 0, 0x0000, 0, 84, 1), 7);
  f.flush();
  check_invariants(cache, 7, f.records);
  REQUIRE(f.records.size() == 4);
  auto recs = f.records;
  std::sort(recs.begin(), recs.end(), [](const FlowRecord &a, const FlowRecord &b) { return a.first_ns() < b.first_ns(); });
  CHECK(recs[0].key.src_port == 5000);
  CHECK(recs[1].key.src_port == 0);
  CHECK(recs[1].key.dst_port == 0);
  CHECK(recs[1].key.proto == 17);
  CHECK(recs[1].fwd.packets == 2);
  CHECK(recs[1].fwd.tcp_flags == 0);
  CHECK(recs[1].octets() == 1200);
  CHECK(recs[2].key.dst_port == 0x0800);
  CHECK(recs[2].key.proto == 1);
  CHECK(recs[3].key.dst_port == 0);
  CHECK(recs[3].key.src_addr[15] == 2);
  CHECK(recs[3].rev.packets == 0);
}

TEST_CASE("flowcache: IPv6 and a v4-mapped IPv6 address are different flows, lengths clamp", "[flowcache]") {
  FlowCache cache(long_timeouts(true));
  Feeder f{cache, {}};
  PacketMeta v4 = pkt(1, 2, 10, 20, kAck, 70000 & 0xffff);
  PacketMeta v6 = v4;
  v6.flags = PacketMeta::kIpv6 | PacketMeta::kHasL4;
  v6.ip_total_length = 65575;  // IPv6 payload length 65535 + 40
  f(v4, 1);
  f(v6, 2);
  f.flush();
  REQUIRE(f.records.size() == 2);
  auto recs = sorted(f.records);
  CHECK(recs[0].key.is_ipv6 == 0);
  CHECK(recs[1].key.is_ipv6 == 1);
  CHECK(recs[1].fwd.octets == 65575);
  CHECK(recs[1].fwd.max_len == 65535);
}

TEST_CASE("flowcache: time going backwards breaks nothing", "[flowcache]") {
  SECTION("one flow") {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.idle_ns = 10 * kS;
    FlowCache cache(cfg);
    Feeder f{cache, {}};
    f(pkt(1, 2, 1, 2), 100 * kS);
    f(pkt(1, 2, 1, 2), 50 * kS);  // earlier than the first
    f(pkt(2, 1, 2, 1), 40 * kS);
    CHECK(cache.now() == 100 * kS);
    CHECK(f.expire(105 * kS) == 0);  // last is 100 s, not 40 s
    CHECK(f.expire(20 * kS) == 0);   // a GC time in the past changes nothing
    f.flush();
    REQUIRE(f.records.size() == 1);
    const FlowRecord &r = f.records[0];
    CHECK(r.fwd.first_ns == 50 * kS);
    CHECK(r.fwd.last_ns == 100 * kS);
    CHECK(r.rev.first_ns == 40 * kS);
    CHECK(r.first_ns() == 40 * kS);
    CHECK(r.last_ns() == 100 * kS);
    CHECK(r.reason == FlowEndReason::ForcedEnd);
  }
  SECTION("a jittered trace, short timeouts, a GC") {
    TrafficConfig tc = small_config();
    tc.duration_ns = 300 * kMs;
    Trace t = make_trace(tc);
    uint64_t lo = UINT64_MAX, hi = 0, x = 12345;
    for (uint64_t &ts : t.times) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      if ((x >> 60) == 0) ts -= (x >> 20) % (20 * kMs);  // 1 in 16 packets up to 20 ms early
      lo = std::min(lo, ts);
      hi = std::max(hi, ts);
    }
    t.times[t.times.size() / 2] = 0;  // and one packet from 1970
    lo = 0;
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.idle_ns = 2 * kMs;
    cfg.active_ns = 10 * kMs;
    cfg.capacity = 1024;
    FlowCache cache(cfg);
    FlowCacheSlicer gc(1 * kMs, 10);
    Feeder f{cache, {}};
    for (size_t i = 0; i < t.metas.size(); ++i) {
      FlowRecord buf[64];
      size_t n;
      while (!gc.run(cache, t.times[i], buf, 64, &n)) f.records.insert(f.records.end(), buf, buf + n);
      f.records.insert(f.records.end(), buf, buf + n);
      f(t.metas[i], t.times[i]);
    }
    f.flush();
    check_invariants(cache, t.metas.size(), f.records);
    for (const FlowRecord &r : f.records) {
      CHECK(r.first_ns() >= lo);
      CHECK(r.last_ns() <= hi);
    }
  }
}

TEST_CASE("flowcache: expire() in slices finds exactly what one full scan finds", "[flowcache]") {
  TrafficConfig tc = small_config();
  Trace t = make_trace(tc);
  FlowCacheConfig cfg = long_timeouts(GENERATE(true, false));
  cfg.idle_ns = 3 * kMs;
  cfg.active_ns = 30 * kMs;
  cfg.capacity = 20000;
  FlowCache whole(cfg), sliced(cfg);
  Feeder a{whole, {}}, b{sliced, {}};
  size_t half = t.metas.size() / 2;
  for (size_t i = 0; i < half; ++i) {
    a(t.metas[i], t.times[i]);
    b(t.metas[i], t.times[i]);
  }
  REQUIRE(same_records(a.records, b.records));
  size_t before = a.records.size();
  uint64_t now = t.times[half - 1] + 1 * kMs;
  a.expire(now);
  // 37 uneven slices, out holding 3 records at a time: resumed scans
  const size_t S = sliced.slots(), slices = 37;
  for (size_t j = 0; j < slices; ++j) {
    size_t end = (j + 1) * S / slices;
    for (size_t pos = j * S / slices; pos < end;) {
      FlowRecord buf[3];
      size_t n;
      pos = sliced.expire(now, pos, end, buf, 3, &n);
      CHECK(n <= 3);
      b.records.insert(b.records.end(), buf, buf + n);
    }
  }
  CHECK(a.records.size() - before > 100);
  CHECK(same_records(a.records, b.records));  // same order too: both go by slot
  CHECK(whole.active() == sliced.active());
  CHECK(b.expire(now) == 0);  // nothing left to find
  FlowRecord none[1];
  size_t n = 9;
  CHECK(sliced.expire(now, 0, S + 1000, none, 1, &n) == S + 1000);  // past slots(): ignored, range done
  CHECK(n == 0);
}

TEST_CASE("flowcache: the GC slicer scans a slice per period/slices, each slot once per period", "[flowcache]") {
  FlowCacheConfig cfg = long_timeouts(true);
  cfg.capacity = 1000;
  cfg.idle_ns = 500;
  FlowCache cache(cfg);
  FlowCacheSlicer gc(1000, 10);
  FlowRecord buf[8];
  size_t n;
  CHECK(gc.run(cache, 0, buf, 8, &n));
  CHECK(gc.slices_scanned() == 1);
  CHECK(gc.run(cache, 99, buf, 8, &n));
  CHECK(gc.slices_scanned() == 1);
  CHECK(gc.run(cache, 100, buf, 8, &n));
  CHECK(gc.slices_scanned() == 2);
  CHECK(gc.run(cache, 1000, buf, 8, &n));
  CHECK(gc.slices_scanned() == 11);  // slices 2..9 and slice 0 of the next round
  CHECK(gc.next_due_ns() == 1100);
  CHECK(gc.run(cache, 1'000'000, buf, 8, &n));  // a jump: one round, not ten thousand
  CHECK(gc.slices_scanned() == 21);
  CHECK(gc.next_due_ns() > 1'000'000);
  CHECK_THROWS_AS(FlowCacheSlicer(0, 1), std::invalid_argument);
  CHECK_THROWS_AS(FlowCacheSlicer(1, 0), std::invalid_argument);

  // flows expire at most a period after their timeout, and every one does
  FlowCache c2(cfg);
  FlowCacheSlicer gc2(1000, 10);
  Feeder f{c2, {}};
  for (int i = 0; i < 1000; ++i) f(pkt(1, 2, uint16_t(i), 80), 2000 + uint64_t(i));
  std::vector<uint64_t> left_at;
  for (uint64_t now = 3000; now < 6000; now += 10) {
    bool done;
    do {
      done = gc2.run(c2, now, buf, 8, &n);
      for (size_t k = 0; k < n; ++k) {
        CHECK(buf[k].reason == FlowEndReason::IdleTimeout);
        CHECK(now >= buf[k].last_ns() + 500);
        CHECK(now < buf[k].last_ns() + 500 + 1000 + 10);
      }
      left_at.insert(left_at.end(), n, now);
    } while (!done);
  }
  CHECK(left_at.size() == 1000);
  CHECK(c2.active() == 0);
}

TEST_CASE("flowcache: account_batch gives what account() gives", "[flowcache]") {
  TrafficConfig tc = small_config();
  tc.duration_ns = 300 * kMs;
  tc.ipv6 = 0.5;
  Trace t = make_trace(tc);
  PacketMeta arp;
  std::memset(&arp, 0, sizeof arp);
  for (size_t i = 7; i < t.metas.size(); i += 301) t.metas[i] = arp;
  FlowCacheConfig cfg = long_timeouts(true);
  cfg.capacity = 48;  // evictions too
  cfg.idle_ns = 3 * kMs;
  cfg.active_ns = 20 * kMs;
  FlowCache one(cfg);
  cfg.hash_key = one.hash_key();  // the same index layout: stats such as the longest probe depend on the key
  FlowCache batched(cfg);
  Feeder a{one, {}}, b{batched, {}};
  std::vector<FlowPacketOutcome> want;
  for (size_t i = 0; i < t.metas.size(); ++i) want.push_back(a(t.metas[i], t.times[i]));
  std::vector<FlowPacketOutcome> got(t.metas.size());
  std::vector<const PacketMeta *> ptrs;
  for (const PacketMeta &m : t.metas) ptrs.push_back(&m);
  std::vector<FlowRecord> buf(100 * FlowCache::kMaxRecordsPerPacket);
  for (size_t i = 0; i < t.metas.size();) {
    unsigned k = unsigned(std::min<size_t>(1 + (i * 7) % 100, t.metas.size() - i));  // 1..100 packets
    unsigned n = 0;
    batched.account_batch(ptrs.data() + i, t.times.data() + i, k, got.data() + i, buf.data(), &n);
    REQUIRE(n <= k * FlowCache::kMaxRecordsPerPacket);
    b.records.insert(b.records.end(), buf.begin(), buf.begin() + n);
    i += k;
  }
  CHECK(got == want);
  CHECK(same_records(a.records, b.records));
  a.flush();
  b.flush();
  CHECK(same_records(a.records, b.records));
  CHECK(std::memcmp(&one.stats(), &batched.stats(), sizeof(FlowCache::Stats)) == 0);
  CHECK(one.stats().evicted > 0);
}

TEST_CASE("flowcache: construction: 1K..1M quickly, memory per flow, limits", "[flowcache]") {
  for (uint64_t cap : {uint64_t(1000), uint64_t(65536), uint64_t(1'000'000)}) {
    FlowCacheConfig cfg;
    cfg.capacity = cap;
    auto t0 = std::chrono::steady_clock::now();
    FlowCache c(cfg);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    INFO("capacity " << cap << ": " << ms << " ms, " << c.bytes() << " bytes");
    CHECK(ms < 50);
    CHECK(c.capacity() == cap);
    CHECK(c.slots() == cap);
    CHECK(c.active() == 0);
    CHECK(c.bytes() >= cap * 148 + cap / 8);  // entries, index, home buckets, a bit per slot in use
    CHECK(c.bytes() <= cap * 148 + cap / 8 + 5 * 4096 + 4096);
  }
  FlowCacheConfig cfg;
  cfg.capacity = 0;
  CHECK_THROWS_AS(FlowCache(cfg), std::invalid_argument);
  cfg.capacity = 1ull << 32;
  CHECK_THROWS_AS(FlowCache(cfg), std::invalid_argument);
  cfg.capacity = 10;
  cfg.idle_ns = 0;
  CHECK_THROWS_AS(FlowCache(cfg), std::invalid_argument);
  cfg.idle_ns = 1;
  cfg.active_ns = 0;
  CHECK_THROWS_AS(FlowCache(cfg), std::invalid_argument);
  cfg.active_ns = 1;
  cfg.end_grace_ns = 0;
  CHECK_THROWS_AS(FlowCache(cfg), std::invalid_argument);
  cfg.end_grace_ns = 1;
  cfg.prefault = true;
  FlowCache small(cfg);
  CHECK(small.capacity() == 10);
}

TEST_CASE("flowcache: a flushed table is empty and works again", "[flowcache]") {
  FlowCacheConfig cfg = long_timeouts(true);
  cfg.capacity = 64;
  FlowCache cache(cfg);
  Feeder f{cache, {}};
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 200; ++i) f(pkt(1, uint8_t(i), uint16_t(round), 80), uint64_t(round * 1000 + i));
    CHECK(cache.active() == 64);
    // flush a few records at a time
    FlowRecord buf[5];
    size_t n, left;
    do {
      left = cache.flush(buf, 5, &n);
      CHECK(n <= 5);
      f.records.insert(f.records.end(), buf, buf + n);
    } while (left);
    CHECK(cache.active() == 0);
  }
  check_invariants(cache, 600, f.records);
  CHECK(cache.stats().ended[int(FlowEndReason::ForcedEnd)] == 3 * 64);
}

// flush() and expire() free the slots of flows that leave a few flows
// later (their buckets prefetched meanwhile): a flush that goes round the
// table within one call, past slots still to be freed, and an expiry scan
// cut short with slots still to be freed, give every flow once.
TEST_CASE("flowcache: flows that leave are freed later, yet each leaves once, across a flush's wrap and a cut scan",
          "[flowcache]") {
  FlowCacheConfig cfg = long_timeouts(true);
  cfg.capacity = 16;
  FlowCache cache(cfg);
  Feeder f{cache, {}};
  for (int i = 0; i < 16; ++i) f(pkt(1, uint8_t(i), 1000, 80), uint64_t(i + 1));
  REQUIRE(cache.active() == 16);
  FlowRecord buf[64];
  size_t n;
  CHECK(cache.flush(buf, 5, &n) == 11);  // slots 0-4 leave
  CHECK(n == 5);
  f.records.insert(f.records.end(), buf, buf + n);
  for (int i = 0; i < 3; ++i) f(pkt(2, uint8_t(i), 2000, 80), uint64_t(100 + i));  // into freed slots, behind the flush
  REQUIRE(cache.active() == 14);
  CHECK(cache.flush(buf, 64, &n) == 0);  // on from slot 5, round to the new flows
  CHECK(n == 14);
  f.records.insert(f.records.end(), buf, buf + n);
  CHECK(cache.active() == 0);
  std::set<std::pair<uint8_t, uint8_t>> keys;  // (src, dst) last octets
  for (const FlowRecord &r : f.records) keys.insert({r.key.src_addr[15], r.key.dst_addr[15]});
  CHECK(keys.size() == 19);
  CHECK(f.records.size() == 19);

  // an expiry scan that finds 16 flows due, one record at a time
  for (int i = 0; i < 16; ++i) f(pkt(3, uint8_t(i), 3000, 80), uint64_t(200 + i));
  const uint64_t later = 200 + cfg.idle_ns + 100;
  size_t got = 0;
  for (size_t pos = 0; pos < cache.slots();) {
    pos = cache.expire(later, pos, cache.slots(), buf, 1, &n);
    CHECK(n <= 1);
    got += n;
    f.records.insert(f.records.end(), buf, buf + n);
  }
  CHECK(got == 16);
  CHECK(cache.active() == 0);
  for (int i = 0; i < 16; ++i) f(pkt(4, uint8_t(i), 4000, 80), later + uint64_t(i));  // the freed slots work again
  CHECK(cache.active() == 16);
  f.flush();
  CHECK(f.records.size() == 16 + 3 + 16 + 16);
  check_invariants(cache, 16 + 3 + 16 + 16, f.records);
}

// A hot reload that replaces a table: the first half of a trace goes into
// one table, its flows move into a new one (another capacity, direction or
// key), the rest goes there. The records equal what the new table alone would
// have given on the whole trace, where the change allows it.
TEST_CASE("flowcache: adopt moves every flow into a table with another capacity or direction", "[flowcache]") {
  TrafficConfig tc = small_config();
  tc.ipv6 = 0.3;
  Trace t = make_trace(tc);
  const size_t half = t.metas.size() / 2;
  struct Change {
    bool bi_before, bi_after;
    uint64_t capacity_after;
  };
  auto change = GENERATE(Change{true, true, 1 << 17}, Change{true, false, 1 << 16}, Change{false, true, 1 << 16},
                         Change{false, false, 1 << 15});
  INFO("bi " << change.bi_before << " -> " << change.bi_after << ", capacity " << change.capacity_after);

  FlowCacheConfig before = long_timeouts(change.bi_before), after = long_timeouts(change.bi_after);
  after.capacity = change.capacity_after;
  FlowCache old_table(before), new_table(after), reference(after);
  Feeder f_old{old_table, {}}, f_new{new_table, {}}, f_ref{reference, {}};
  for (size_t i = 0; i < half; ++i) f_old(t.metas[i], t.times[i]);
  REQUIRE(old_table.active() > 1000);
  std::vector<FlowRecord> evicted;
  new_table.adopt(old_table, [&](const FlowRecord &r) { evicted.push_back(r); });
  CHECK(evicted.empty());
  CHECK(new_table.now() == old_table.now());
  for (size_t i = half; i < t.metas.size(); ++i) f_new(t.metas[i], t.times[i]);
  f_new.flush();
  f_ref.feed(t);
  f_ref.flush();
  std::vector<FlowRecord> got = f_old.records;
  got.insert(got.end(), f_new.records.begin(), f_new.records.end());
  check_same(sorted(got), sorted(f_ref.records));
  CHECK(sum_packets(got) == t.metas.size());
}

TEST_CASE("flowcache: adopt into a coarser key merges flows, into a small table evicts, all counted", "[flowcache]") {
  Trace t = make_trace(small_config());
  const size_t half = t.metas.size() / 2;
  FlowCache old_table(long_timeouts(true));
  Feeder f_old{old_table, {}};
  for (size_t i = 0; i < half; ++i) f_old(t.metas[i], t.times[i]);
  const size_t active = old_table.active();
  REQUIRE(active > 1000);

  SECTION("key [proto]: one flow per protocol and address family") {
    FlowCacheConfig c = long_timeouts(true);
    c.key_src = c.key_dst = c.key_sport = c.key_dport = c.key_vlan = false;
    FlowCache hosts(c);
    hosts.adopt(old_table, [](const FlowRecord &) { FAIL("no eviction expected"); });
    CHECK(hosts.active() == 4);  // TCP and UDP, over IPv4 and IPv6
    Feeder f{hosts, {}};
    f.flush();
    CHECK(sum_packets(f.records) + sum_packets(f_old.records) == half);
    for (const FlowRecord &r : f.records) {
      CHECK(r.key.src_port == 0);
      CHECK(r.key.src_addr[15] == 0);
      CHECK((r.key.proto == 6 || r.key.proto == 17));
      CHECK(r.fwd.first_ns <= (r.rev.packets ? r.rev.first_ns : UINT64_MAX));
    }
  }
  SECTION("a table too small: the rest leaves as lack of resources") {
    FlowCacheConfig c = long_timeouts(true);
    c.capacity = 1000;
    FlowCache small(c);
    std::vector<FlowRecord> evicted;
    small.adopt(old_table, [&](const FlowRecord &r) { evicted.push_back(r); });
    CHECK(small.active() == 1000);
    REQUIRE(!evicted.empty());
    for (const FlowRecord &r : evicted) {
      CHECK(r.reason == FlowEndReason::LackOfResources);
      CHECK(r.rev.packets == 0);  // each direction that found no room leaves on its own
    }
    CHECK(small.stats().evicted == evicted.size());
    Feeder f{small, {}};
    f.flush();
    CHECK(sum_packets(f.records) + sum_packets(evicted) + sum_packets(f_old.records) == half);
  }
}

TEST_CASE("flowcache: flow_hash_batch gives each key's flow_hash, on every vector path or one at a time", "[flowcache][hash]") {
  // Each path the CPU has (AVX2, AVX-512: groups of eight; the rest, n % 8,
  // one at a time) and the one flow_hash_batch() takes: every count from 0
  // to 41 covers groups and rest, with the reference vector's 40 bytes at
  // every place in a group.
  const FlowHashKey key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  uint64_t vector_words[5];
  for (int i = 0; i < 5; ++i) vector_words[i] = 0x0706050403020100ull + 0x0808080808080808ull * uint64_t(i);
  REQUIRE(flow_hash(key, vector_words) == 0xc1d2363299e41531ull);
  const std::pair<FlowHashPath, const char *> paths[] = {
      {FlowHashPath::Scalar, "one at a time"}, {FlowHashPath::Avx2, "AVX2"}, {FlowHashPath::Avx512, "AVX-512"}};
  std::mt19937_64 rng(7);
  for (auto [path, name] : paths) {
    for (unsigned n = 0; n <= 41; ++n) {
      std::vector<std::array<uint64_t, 5>> w(n + 1);
      for (auto &k : w)
        for (auto &x : k) x = rng();
      if (n) std::memcpy(w[n - 1].data(), vector_words, sizeof vector_words);
      std::vector<uint64_t> h(n + 1, 0x5a5a5a5a5a5a5a5aull), best(n + 1, 0x5a5a5a5a5a5a5a5aull);
      const auto *words = reinterpret_cast<const uint64_t(*)[5]>(w.data());
      if (!flow_hash_batch_on(path, key, words, n, h.data())) {
        WARN(name << ": not on this CPU, not checked");
        CHECK(h[0] == 0x5a5a5a5a5a5a5a5aull);  // nothing written
        break;
      }
      flow_hash_batch(key, words, n, best.data());
      for (unsigned i = 0; i < n; ++i) {
        INFO(name << ": n " << n << " key " << i);
        CHECK(h[i] == flow_hash(key, w[i].data()));
        CHECK(best[i] == h[i]);
      }
      CHECK(h[n] == 0x5a5a5a5a5a5a5a5aull);  // nothing written past n
      CHECK(best[n] == 0x5a5a5a5a5a5a5a5aull);
    }
  }
}

TEST_CASE("flowcache: the flow hash is SipHash-1-3, keyed per table", "[flowcache][hash]") {
  // The reference implementation's test vectors for 40 bytes 00 01 .. 27
  // under the key 00 01 .. 0f (SipHash paper; SipHash-1-3: the same vectors
  // as Rust's SipHasher13).
  const FlowHashKey key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  uint8_t bytes[40];
  for (int i = 0; i < 40; ++i) bytes[i] = uint8_t(i);
  uint64_t w[5];
  std::memcpy(w, bytes, sizeof w);
  CHECK(siphash_40<2, 4>(key, w) == 0x0e3ea96b5304a7d0ull);
  CHECK(siphash_40<1, 3>(key, w) == 0xc1d2363299e41531ull);
  CHECK(flow_hash(key, w) == siphash_40<1, 3>(key, w));

  FlowHashKey parsed;
  REQUIRE(parse_flow_hash_key("000102030405060708090a0B0c0d0e0F", parsed));
  CHECK(parsed == key);
  CHECK_FALSE(parse_flow_hash_key("000102030405060708090a0b0c0d0e", parsed));    // short
  CHECK_FALSE(parse_flow_hash_key("000102030405060708090a0b0c0d0e0f0", parsed)); // long
  CHECK_FALSE(parse_flow_hash_key("000102030405060708090a0b0c0d0e0g", parsed));

  SECTION("each table draws its own key from the OS, unless given one") {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.capacity = 1024;
    FlowCache a(cfg), b(cfg);
    CHECK_FALSE(a.hash_key() == b.hash_key());
    CHECK_FALSE(a.hash_key() == FlowHashKey{});
    cfg.hash_key = key;
    FlowCache c(cfg);
    CHECK(c.hash_key() == key);
  }
  SECTION("SLUICE_FLOW_HASH_KEY fixes it; a malformed one is an error that says what is wrong") {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.capacity = 1024;
    REQUIRE(setenv("SLUICE_FLOW_HASH_KEY", "000102030405060708090a0b0c0d0e0f", 1) == 0);
    FlowCache a(cfg);
    CHECK(a.hash_key() == key);
    REQUIRE(setenv("SLUICE_FLOW_HASH_KEY", "not a key", 1) == 0);
    CHECK_THROWS_WITH(FlowCache(cfg), Catch::Contains("SLUICE_FLOW_HASH_KEY must be 32 hex digits"));
    unsetenv("SLUICE_FLOW_HASH_KEY");
  }
}

// Issue 13, finding 9: keys an attacker on the wire can craft so that, under
// the former fixed linear hash, every one has the same home bucket and tag
// (a packet then compared its key with all of them: ~110 us at 60K flows).
// Under the keyed hash they spread like any keys: no insert reaches the
// bound, nothing is evicted or refused, every packet counts in its own flow.
TEST_CASE("flowcache: 60K IPv6 flows crafted to collide under the old hash spread, all metered", "[flowcache][hash]") {
  constexpr size_t kFlows = 60000;
  std::vector<PacketMeta> metas = crafted::colliding_packets(kFlows);
  REQUIRE(metas.size() == kFlows);
  // They are what the attack needs: all distinct, one old hash, and kept in
  // this order by direction bi.
  uint64_t w0[5];
  std::memcpy(w0, &metas[0], sizeof w0);
  w0[4] = (w0[4] & 0xffffffffffull) | 1ull << 40;  // is_ipv6 in place of status/flags, as the table keys it
  const uint64_t old0 = crafted::old_hash(w0);
  std::vector<KeyBytes> keys;
  for (const PacketMeta &m : metas) {
    uint64_t w[5];
    std::memcpy(w, &m, sizeof w);
    w[4] = (w[4] & 0xffffffffffull) | 1ull << 40;
    REQUIRE(crafted::old_hash(w) == old0);
    REQUIRE(std::memcmp(m.src_addr, m.dst_addr, 16) < 0);
    keys.push_back(bytes_of(make_key(m.src_addr, m.dst_addr, m.src_port, m.dst_port, 6, true, 0)));
  }
  std::sort(keys.begin(), keys.end());
  REQUIRE(std::adjacent_find(keys.begin(), keys.end()) == keys.end());

  for (bool evict : {true, false}) {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.capacity = 1 << 16;
    cfg.evict_when_full = evict;
    FlowCache cache(cfg);
    INFO("hash key " << std::hex << cache.hash_key().k0 << " " << cache.hash_key().k1 << std::dec
                     << ", evict " << evict);
    Feeder f{cache, {}};
    uint64_t t = 1;
    for (int round = 0; round < 2; ++round)
      for (const PacketMeta &m : metas) REQUIRE(f(m, t++) == FlowPacketOutcome::Counted);
    const FlowCache::Stats &s = cache.stats();
    INFO("longest probe " << s.longest_probe << " buckets, probe limit reached " << s.probe_limit << " times");
    CHECK(s.probe_limit == 0);
    // Random keys at this load go 3 to 5 buckets, 8 about once in 3000 tables
    // (simulated); the former hash went 7500.
    CHECK(s.longest_probe < FlowCache::kMaxProbe);
    CHECK(s.evicted == 0);
    CHECK(s.created == kFlows);
    CHECK(cache.active() == kFlows);
    f.flush();
    check_invariants(cache, 2 * kFlows, f.records);
    REQUIRE(f.records.size() == kFlows);
    for (const FlowRecord &r : f.records) {
      CHECK(r.fwd.packets == 2);
      CHECK(r.rev.packets == 0);
      CHECK(r.reason == FlowEndReason::ForcedEnd);
    }
  }
}

namespace {

// The home bucket of a uni-mode IPv4 TCP key in a table of nbuckets buckets,
// as FlowCache computes it (flow_cache.cc, prepare()).
uint32_t home_of(const PacketMeta &m, const FlowHashKey &key, uint32_t nbuckets) {
  uint64_t w[5];
  std::memcpy(w, &m, sizeof w);
  w[4] = (w[4] & 0xffffffffffull) | uint64_t(m.vlan_outer) << 48;  // IPv4: is_ipv6 0
  return uint32_t((flow_hash(key, w) >> 32) * nbuckets >> 32);
}

// count packets whose key has its home in bucket 0 (found by trying ports)
std::vector<PacketMeta> homed_at_bucket_0(size_t count, const FlowHashKey &key, uint32_t nbuckets) {
  std::vector<PacketMeta> out;
  for (uint32_t i = 0; out.size() < count; ++i) {
    PacketMeta m = pkt(uint8_t(1 + i / 60000), 2, uint16_t(1024 + i % 60000), 80);
    if (home_of(m, key, nbuckets) == 0) out.push_back(m);
  }
  return out;
}

}  // namespace

// What the probe bound does when a window does fill (found by search under a
// known key): the new flow takes a place in its home bucket like a new flow
// in a full table, and nothing is lost uncounted. A table of 1024 flows has
// 256 buckets; kMaxProbe * 8 = 128 flows homed at bucket 0 fill buckets
// 0..15.
TEST_CASE("flowcache: a new flow whose buckets are full is handled like a full table", "[flowcache][hash]") {
  const FlowHashKey key{0x0123456789abcdefull, 0xfedcba9876543210ull};
  FlowCacheConfig cfg = long_timeouts(false);
  cfg.capacity = 1024;
  cfg.hash_key = key;
  constexpr unsigned kWindow = FlowCache::kMaxProbe * 8;
  std::vector<PacketMeta> homed = homed_at_bucket_0(kWindow + 2, key, 256);

  SECTION("on_full evict: the least recently active flow of the home bucket leaves, lack of resources") {
    FlowCache cache(cfg);
    Feeder f{cache, {}};
    for (unsigned i = 0; i < kWindow; ++i) REQUIRE(f(homed[i], 100 + i) == FlowPacketOutcome::Counted);
    CHECK(cache.stats().longest_probe == FlowCache::kMaxProbe);
    CHECK(cache.stats().probe_limit == 0);
    // every flow is still found, however far from home
    for (unsigned i = 0; i < kWindow; ++i) REQUIRE(f(homed[i], 1000 + i) == FlowPacketOutcome::Counted);
    CHECK(cache.stats().created == kWindow);
    f(homed[3], 1999);  // flow 0 is now the least recently active in bucket 0 (flows 0..7)
    REQUIRE(f(homed[kWindow], 2000) == FlowPacketOutcome::Counted);
    CHECK(cache.stats().probe_limit == 1);
    CHECK(cache.stats().evicted == 1);
    REQUIRE(f.records.size() == 1);
    CHECK(f.records[0].reason == FlowEndReason::LackOfResources);
    CHECK(f.records[0].key.src_port == homed[0].src_port);
    CHECK(f.records[0].fwd.packets == 2);
    // an ended flow there goes first, with its own reason
    PacketMeta fin = homed[5];
    fin.tcp_flags = kFin | kAck;
    f(fin, 2002);
    REQUIRE(f(homed[kWindow + 1], 2003) == FlowPacketOutcome::Counted);
    REQUIRE(f.records.size() == 2);
    CHECK(f.records[1].reason == FlowEndReason::EndOfFlow);
    CHECK(f.records[1].key.src_port == homed[5].src_port);
    CHECK(cache.stats().probe_limit == 2);
    CHECK(cache.stats().longest_probe == FlowCache::kMaxProbe);
    f.flush();
    check_invariants(cache, 2 * kWindow + 4, f.records);
  }
  SECTION("on_full drop: the packet is refused and counted; a due flow there makes room") {
    cfg.evict_when_full = false;
    cfg.idle_ns = 10 * kS;
    FlowCache cache(cfg);
    Feeder f{cache, {}};
    for (unsigned i = 0; i < kWindow; ++i) REQUIRE(f(homed[i], kS + i) == FlowPacketOutcome::Counted);
    CHECK(f(homed[kWindow], 2 * kS) == FlowPacketOutcome::ProbeLimit);
    CHECK(cache.stats().dropped_probe_limit == 1);
    CHECK(cache.stats().dropped_full == 0);
    CHECK(cache.active() == kWindow);  // the table is far from full
    // flows 1..127 stay active; flow 0 is idle by 12 s and leaves with its reason
    for (unsigned i = 1; i < kWindow; ++i) f(homed[i], 10 * kS + i);
    CHECK(f(homed[kWindow], 12 * kS) == FlowPacketOutcome::Counted);
    REQUIRE(f.records.size() == 1);
    CHECK(f.records[0].reason == FlowEndReason::IdleTimeout);
    CHECK(f.records[0].key.src_port == homed[0].src_port);
    CHECK(cache.stats().probe_limit == 2);
    f.flush();
    check_invariants(cache, 2 * kWindow + 1, f.records);
  }
  SECTION("adopt: a flow that finds its buckets full leaves at once, lack of resources") {
    FlowCache from(cfg), to(cfg);
    Feeder f{from, {}}, g{to, {}};
    for (unsigned i = 0; i < kWindow; ++i) REQUIRE(f(homed[i], 100 + i) == FlowPacketOutcome::Counted);
    REQUIRE(g(homed[kWindow], 50) == FlowPacketOutcome::Counted);  // one place taken already
    std::vector<FlowRecord> left;
    to.adopt(from, [&](const FlowRecord &r) { left.push_back(r); });
    CHECK(to.active() == kWindow);
    CHECK(to.stats().probe_limit == 1);
    CHECK(to.stats().evicted == 1);
    REQUIRE(left.size() == 1);
    CHECK(left[0].reason == FlowEndReason::LackOfResources);
    CHECK(left[0].key.src_port == homed[kWindow - 1].src_port);  // slots move in order: the last finds no room
  }
}

// The index's layout is all the key changes: slots are handed out, swept,
// scanned and flushed in an order of their own. So two tables with different
// keys give the same records in the same order, evicting (CLOCK) and flushing
// included; a replay does not depend on the key.
TEST_CASE("flowcache: records and their order do not depend on the hash key", "[flowcache][hash]") {
  TrafficConfig tc = small_config();
  tc.duration_ns = 500 * kMs;
  tc.new_flows_per_s = 40000;
  Trace t = make_trace(tc);
  for (uint64_t capacity : {uint64_t(1) << 16, uint64_t(300)}) {
    for (bool bi : {true, false}) {
      std::vector<FlowRecord> runs[2];
      for (int k = 0; k < 2; ++k) {
        FlowCacheConfig cfg = long_timeouts(bi);
        cfg.capacity = capacity;
        cfg.idle_ns = 50 * kMs;
        cfg.hash_key = FlowHashKey{0x1111ull * (k + 1), 0x2222ull * (k + 1)};
        FlowCache cache(cfg);
        Feeder f{cache, {}};
        FlowCacheSlicer gc(20 * kMs, 8);
        f.feed(t, gc);
        f.flush();
        CHECK(cache.stats().probe_limit == 0);
        runs[k] = std::move(f.records);
      }
      INFO("capacity " << capacity << ", bi " << bi);
      CHECK(runs[0].size() > 1000);
      CHECK(same_records(runs[0], runs[1]));
    }
  }
}

namespace {
// Two extension fields laid out as the registry would: a text at 0, a number after it.
constexpr FlowExtSlot kNameSlot{0, 20, FlowExtKind::Text}, kIdSlot{21, 4, FlowExtKind::Number};
PacketLabels labels_with(const char *name, uint32_t id) {
  PacketLabels l{};
  if (name) set_packet_label(l, kNameSlot, name, strlen(name));
  uint8_t be[4] = {uint8_t(id >> 24), uint8_t(id >> 16), uint8_t(id >> 8), uint8_t(id)};
  if (id) set_packet_label(l, kIdSlot, be, 4);
  return l;
}
std::string name_of(const FlowRecord &r) { return std::string(flow_ext_value(r, kNameSlot)); }
}  // namespace

TEST_CASE("flowcache: labels give a flow its extension fields, the first value of each kept", "[flowcache][labels]") {
  FlowCacheConfig cfg = long_timeouts(true);
  cfg.active_ns = 10 * kS;
  FlowCache cache(cfg);
  CHECK(cache.bytes() == FlowCache(cfg).bytes());  // nothing mapped for fields before a label
  size_t before = cache.bytes();
  uint64_t t = 1000 * kS;
  FlowRecord out[1];
  unsigned n;
  // A flow without labels, then one that gets a name from its second
  // packet and a second name later (ignored), an id from the reply.
  cache.account(pkt(1, 2, 1000, 53, kAck, 40, 17), t, out, &n);
  PacketLabels first = labels_with("example.com", 0), second = labels_with("other.example", 7);
  cache.account(pkt(3, 4, 2000, 443), t += kMs, out, &n);
  cache.account(pkt(3, 4, 2000, 443), t += kMs, out, &n, &first);
  CHECK(cache.bytes() > before);
  cache.account(pkt(4, 3, 443, 2000), t += kMs, out, &n, &second);
  // An active timeout: the next record of the flow keeps its fields.
  cache.account(pkt(3, 4, 2000, 443), t += 11 * kS, out, &n);
  REQUIRE(n == 1);
  CHECK(out[0].reason == FlowEndReason::ActiveTimeout);
  CHECK(name_of(out[0]) == "example.com");
  CHECK(flow_ext_value(out[0], kIdSlot) == std::string_view("\0\0\0\7", 4));
  // FIN, then a SYN: a new connection starts without the old one's fields.
  cache.account(pkt(3, 4, 2000, 443, kFin | kAck), t += kMs, out, &n);
  cache.account(pkt(3, 4, 2000, 443, kSyn), t += kMs, out, &n);
  REQUIRE(n == 1);
  CHECK(out[0].reason == FlowEndReason::EndOfFlow);
  CHECK(name_of(out[0]) == "example.com");
  FlowRecord flushed[8];
  size_t got = 0;
  REQUIRE(cache.flush(flushed, 8, &got) == 0);
  REQUIRE(got == 2);
  for (size_t i = 0; i < got; ++i) {
    CAPTURE(i);
    for (uint8_t b : flushed[i].ext) CHECK(b == 0);  // the UDP flow and the restarted one: none
  }
}

TEST_CASE("flowcache: labels: batches, a cut name, a full packet, and adopt keep the rules", "[flowcache][labels]") {
  SECTION("a text longer than its field is cut; a packet holds kMax labels") {
    PacketLabels l{};
    std::string long_name(30, 'a');
    CHECK(set_packet_label(l, kNameSlot, long_name.data(), long_name.size()) == LabelResult::Cut);
    CHECK(set_packet_label(l, kNameSlot, "", 0) == LabelResult::Empty);
    for (unsigned i = 1; i < PacketLabels::kMax; ++i) CHECK(set_packet_label(l, kIdSlot, "\0\0\0\1", 4) == LabelResult::Set);
    CHECK(set_packet_label(l, kIdSlot, "\0\0\0\2", 4) == LabelResult::NoRoom);
    uint8_t ext[kFlowExtBytes] = {};
    apply_packet_labels(l, ext, sizeof ext);
    CHECK(ext[0] == 20);
    CHECK(std::string(reinterpret_cast<char *>(ext + 1), 20) == std::string(20, 'a'));
    CHECK(ext[21] == 4);
    CHECK(ext[25] == 1);  // the first of the three ids
    // A label that does not fit the octets given, or points outside its
    // packet's values (a source that never reset them), is skipped.
    PacketLabels bad{};
    bad.count = 2;
    bad.label[0] = {uint16_t(kFlowExtBytes - 2), 4, 0};
    bad.label[1] = {40, 200, 100};
    uint8_t clean[kFlowExtBytes] = {};
    apply_packet_labels(bad, clean, sizeof clean);
    for (uint8_t b : clean) CHECK(b == 0);
  }
  SECTION("a buffer back from the pool: count 0 empties the labels whatever `used` says") {
    PacketLabels l{};
    l.used = PacketLabels::kBytes;  // the last packet's; sources reset only the count
    CHECK(packet_labels_free(l) == PacketLabels::kMax);
    CHECK(packet_label_octets_free(l) == PacketLabels::kBytes);
    CHECK(set_packet_label(l, kNameSlot, "example.com", 11) == LabelResult::Set);
    CHECK(l.used == 11);
    CHECK(packet_label_octets_free(l) == PacketLabels::kBytes - 11);
  }
  SECTION("account_batch applies each packet's labels as account() does") {
    FlowCache a(long_timeouts(false)), b(long_timeouts(false));
    std::vector<PacketMeta> metas;
    std::vector<PacketLabels> labels;
    for (int i = 0; i < 100; ++i) {
      metas.push_back(pkt(uint8_t(i % 7), 9, uint16_t(1000 + i % 13), 80));
      labels.push_back(i % 3 ? PacketLabels{} : labels_with(("n" + std::to_string(i)).c_str(), uint32_t(i)));
    }
    std::vector<const PacketMeta *> mp;
    std::vector<const PacketLabels *> lp;
    std::vector<uint64_t> times;
    FlowRecord out[200];
    unsigned n;
    for (size_t i = 0; i < metas.size(); ++i) {
      mp.push_back(&metas[i]);
      lp.push_back(&labels[i]);
      times.push_back(1000 * kS + i);
      a.account(metas[i], times[i], out, &n, &labels[i]);
    }
    b.account_batch(mp.data(), times.data(), unsigned(mp.size()), nullptr, out, &n, lp.data());
    std::vector<FlowRecord> ra, rb;
    for (FlowCache *c : {&a, &b}) {
      FlowRecord buf[256];
      size_t got;
      c->flush(buf, 256, &got);
      (c == &a ? ra : rb).assign(buf, buf + got);
    }
    REQUIRE(ra.size() == rb.size());
    size_t named = 0;
    for (size_t i = 0; i < ra.size(); ++i) {
      CHECK(std::memcmp(&ra[i], &rb[i], sizeof(FlowRecord)) == 0);
      named += !name_of(ra[i]).empty();
    }
    CHECK(named > 0);
  }
  SECTION("adopt moves a flow's fields into the new table") {
    FlowCache from(long_timeouts(true));
    FlowRecord out[1];
    unsigned n;
    PacketLabels l = labels_with("moved.example", 42);
    from.account(pkt(1, 2, 5000, 443), 1000 * kS, out, &n, &l);
    from.account(pkt(5, 6, 5000, 443), 1000 * kS, out, &n);
    FlowCacheConfig uni = long_timeouts(false);
    uni.capacity = 1024;
    FlowCache to(uni);
    to.adopt(from, [](const FlowRecord &) { FAIL("no room?"); });
    FlowRecord buf[8];
    size_t got;
    to.flush(buf, 8, &got);
    REQUIRE(got == 2);
    int named = 0;
    for (size_t i = 0; i < got; ++i)
      if (buf[i].key.src_addr[15] == 1) {
        ++named;
        CHECK(name_of(buf[i]) == "moved.example");
      } else {
        CHECK(name_of(buf[i]).empty());
      }
    CHECK(named == 1);
  }
}

namespace {
// A packet as pkt() makes it, with what the optional fields read: ToS,
// TTL, an inner VLAN, the top MPLS entry.
PacketMeta pkt_with(uint8_t src, uint8_t dst, uint16_t sport, uint16_t dport, uint8_t tos, uint8_t ttl,
                    uint8_t flags = kAck) {
  PacketMeta m = pkt(src, dst, sport, dport, flags);
  m.tos = tos, m.ttl = ttl;
  m.flags |= PacketMeta::kEthernet;
  m.vlan_inner = 300;
  m.mpls_top[0] = 0x01, m.mpls_top[1] = 0x23, m.mpls_top[2] = 0x41;
  return m;
}
size_t round_up_to_page(size_t n) { return (n + 4095) / 4096 * 4096; }
// The frame start of a packet from MAC ..:src to MAC ..:dst.
std::array<uint8_t, 12> macs(uint8_t src, uint8_t dst) {
  return {2, 0, 0, 0, 0, dst, 2, 0, 0, 0, 0, src};
}
}  // namespace

TEST_CASE("flowcache: optional fields: per direction from its first packet, TTL min and max, a new record starts over",
          "[flowcache][record-fields]") {
  FlowCacheConfig cfg = long_timeouts(true);
  cfg.active_ns = 10 * kS;
  cfg.fields = kAllFlowFields;
  FlowCache cache(cfg);
  FlowCacheConfig bare = long_timeouts(true);
  CHECK(cache.bytes() == FlowCache(bare).bytes() + round_up_to_page(cfg.capacity * 64));
  uint64_t t = 1000 * kS;
  FlowRecord out[1];
  unsigned n;
  auto a = macs(1, 2), b = macs(2, 1), c = macs(9, 9);
  FlowPacketSource in5{a.data(), 5, 1}, in6{b.data(), 6, 0}, in9{c.data(), 9, 0};
  // forward: ToS 0x28, TTL 64, 60, 62; from interface 5, egress
  cache.account(pkt_with(1, 2, 1000, 80, 0x28, 64), t, out, &n, nullptr, &in5);
  cache.account(pkt_with(1, 2, 1000, 80, 0x00, 60), t += kMs, out, &n, nullptr, &in9);  // not the first: ignored but TTL
  cache.account(pkt_with(1, 2, 1000, 80, 0x10, 62), t += kMs, out, &n, nullptr, &in5);
  // reverse: from interface 6, TTL 128 then 120, ToS 0
  cache.account(pkt_with(2, 1, 80, 1000, 0x00, 128), t += kMs, out, &n, nullptr, &in6);
  cache.account(pkt_with(2, 1, 80, 1000, 0x08, 120), t += kMs, out, &n, nullptr, &in6);
  // an active timeout: the record leaves, the next starts its fields over
  PacketMeta later = pkt_with(2, 1, 80, 1000, 0x04, 77);
  later.vlan_inner = 301;
  cache.account(later, t += 11 * kS, out, &n, nullptr, &in9);
  REQUIRE(n == 1);
  const FlowRecord &r = out[0];
  CHECK(r.reason == FlowEndReason::ActiveTimeout);
  CHECK(r.fwd.if_index == 5);
  CHECK(r.rev.if_index == 6);
  CHECK(r.fwd.tos == 0x28);
  CHECK(r.rev.tos == 0x00);
  CHECK(r.fwd.min_ttl == 60);
  CHECK(r.fwd.max_ttl == 64);
  CHECK(r.rev.min_ttl == 120);
  CHECK(r.rev.max_ttl == 128);
  CHECK(std::memcmp(r.fwd.dst_mac, a.data(), 6) == 0);
  CHECK(std::memcmp(r.fwd.src_mac, a.data() + 6, 6) == 0);
  CHECK(std::memcmp(r.rev.dst_mac, b.data(), 6) == 0);
  CHECK(std::memcmp(r.rev.src_mac, b.data() + 6, 6) == 0);
  CHECK(r.flow_direction == 1);
  CHECK(r.vlan_inner == 300);
  CHECK(r.mpls_top[0] == 0x01);
  CHECK(r.mpls_top[2] == 0x41);
  FlowRecord rest[2];
  size_t got = 0;
  REQUIRE(cache.flush(rest, 2, &got) == 0);
  REQUIRE(got == 1);
  // the fresh record: its first packet went the reverse way, from interface 9
  CHECK(rest[0].fwd.packets == 0);
  CHECK(rest[0].fwd.if_index == 0);
  CHECK(rest[0].fwd.max_ttl == 0);
  CHECK(rest[0].rev.if_index == 9);
  CHECK(rest[0].rev.tos == 0x04);
  CHECK(rest[0].rev.min_ttl == 77);
  CHECK(rest[0].rev.max_ttl == 77);
  CHECK(rest[0].flow_direction == 0);
  CHECK(rest[0].vlan_inner == 301);
}

TEST_CASE("flowcache: optional fields: only those asked for, none without a source, batches and adopt keep them",
          "[flowcache][record-fields]") {
  uint64_t t = 1000 * kS;
  auto a = macs(1, 2);
  FlowPacketSource src{a.data(), 5, 1};
  SECTION("fields leave the others zero; icmp alone maps nothing") {
    FlowCacheConfig cfg = long_timeouts(false);
    cfg.fields = flow_field_bit(FlowField::Ttl) | flow_field_bit(FlowField::SrcMac);
    FlowCache cache(cfg);
    FlowRecord out[1];
    unsigned n;
    cache.account(pkt_with(1, 2, 1000, 80, 0x28, 64), t, out, &n, nullptr, &src);
    FlowRecord rec[1];
    size_t got = 0;
    cache.flush(rec, 1, &got);
    REQUIRE(got == 1);
    CHECK(rec[0].fwd.min_ttl == 64);
    CHECK(std::memcmp(rec[0].fwd.src_mac, a.data() + 6, 6) == 0);
    CHECK(rec[0].fwd.tos == 0);
    CHECK(rec[0].fwd.if_index == 0);
    CHECK(rec[0].vlan_inner == 0);
    CHECK(rec[0].fwd.dst_mac[5] == 0);
    FlowCacheConfig icmp = long_timeouts(false);
    icmp.fields = flow_field_bit(FlowField::Icmp);
    CHECK(FlowCache(icmp).bytes() == FlowCache(long_timeouts(false)).bytes());
  }
  SECTION("a frame that is not Ethernet, or no source: no MAC addresses, interface 0") {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.fields = kAllFlowFields;
    FlowCache cache(cfg);
    FlowRecord out[1];
    unsigned n;
    PacketMeta raw = pkt_with(1, 2, 1000, 80, 0x28, 64);
    raw.flags &= uint16_t(~PacketMeta::kEthernet);
    cache.account(raw, t, out, &n, nullptr, &src);
    cache.account(pkt_with(2, 1, 80, 1000, 0, 9), t + kMs, out, &n);
    FlowRecord rec[1];
    size_t got = 0;
    cache.flush(rec, 1, &got);
    REQUIRE(got == 1);
    for (uint8_t x : rec[0].fwd.src_mac) CHECK(x == 0);
    CHECK(rec[0].fwd.if_index == 5);
    CHECK(rec[0].rev.if_index == 0);
    CHECK(rec[0].rev.min_ttl == 9);
  }
  SECTION("account_batch gives what account() gives; adopt keeps the fields") {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.fields = kAllFlowFields;
    FlowCache one(cfg), batch(cfg);
    std::vector<PacketMeta> metas;
    for (int i = 0; i < 200; ++i)
      metas.push_back(pkt_with(uint8_t(i % 7), uint8_t(100 + i % 5), uint16_t(1000 + i % 3), 80, uint8_t(i), uint8_t(i)));
    std::vector<const PacketMeta *> ptrs;
    std::vector<uint64_t> times;
    std::vector<FlowPacketSource> sources;
    for (size_t i = 0; i < metas.size(); ++i) {
      ptrs.push_back(&metas[i]);
      times.push_back(t + i);
      sources.push_back({a.data(), uint32_t(i), uint8_t(i % 2)});
      FlowRecord o[1];
      unsigned n;
      one.account(metas[i], t + i, o, &n, nullptr, &sources[i]);
    }
    std::vector<FlowRecord> o(metas.size());
    unsigned n = 0;
    batch.account_batch(ptrs.data(), times.data(), unsigned(metas.size()), nullptr, o.data(), &n, nullptr,
                        sources.data());
    FlowCacheConfig bigger = cfg;
    bigger.capacity = 1 << 17;
    FlowCache moved(bigger);
    moved.adopt(batch, [](const FlowRecord &) { FAIL("no eviction expected"); });
    auto all = [](FlowCache &c) {
      std::vector<std::string> v;
      FlowRecord rec[64];
      for (size_t left = 1; left;) {
        size_t got = 0;
        left = c.flush(rec, 64, &got);
        for (size_t i = 0; i < got; ++i) {
          const FlowRecord &r = rec[i];
          v.push_back(std::to_string(r.key.src_addr[15]) + ">" + std::to_string(r.key.dst_addr[15]) + ":" +
                      std::to_string(r.key.src_port) + " if " + std::to_string(r.fwd.if_index) + "/" +
                      std::to_string(r.rev.if_index) + " tos " + std::to_string(r.fwd.tos) + " ttl " +
                      std::to_string(r.fwd.min_ttl) + ".." + std::to_string(r.fwd.max_ttl) + " dir " +
                      std::to_string(r.flow_direction) + " mac " + std::to_string(r.fwd.src_mac[5]));
        }
      }
      std::sort(v.begin(), v.end());
      return v;
    };
    std::vector<std::string> a1 = all(one), a3 = all(moved);
    CHECK(a1.size() > 10);
    CHECK(a1 == a3);
    CHECK(all(batch) == a1);  // adopt leaves `from` as it was
  }
}

// The table with its memory brought in beside it (PagePopulator) meters
// exactly as one that faults its pages in itself, and the thread brings in
// the index and the slots ahead of those handed out.
TEST_CASE("flowcache: memory brought in on a thread of its own changes no record", "[flowcache][populate]") {
  TrafficConfig tc = small_config();
  tc.duration_ns = 1000 * kMs;
  tc.new_flows_per_s = 80000;  // slots handed out past the populator's first lead (16K)
  Trace t = make_trace(tc);
  std::vector<FlowRecord> runs[2];
  size_t handed_out = 0;
  for (int k = 0; k < 2; ++k) {
    FlowCacheConfig cfg = long_timeouts(true);
    cfg.capacity = 1 << 18;
    cfg.idle_ns = cfg.end_grace_ns = 5000 * kMs;  // none ends before the flush: slots are not reused
    cfg.fields = ~FlowFieldSet(0);
    cfg.hash_key = FlowHashKey{0x1234, 0x5678};
    bool setup_ran = false;
    cfg.populate_on_thread = k == 1;
    cfg.populate_setup = [&setup_ran] { setup_ran = true; };
    FlowCache cache(cfg);
    REQUIRE((cache.populator() != nullptr) == (k == 1));
    Feeder f{cache, {}};
    FlowCacheSlicer gc(20 * kMs, 8);
    f.feed(t, gc);
    handed_out = cache.slots_used_ever();
    f.flush();
    runs[k] = std::move(f.records);
    if (k == 1) {
      const PagePopulator &pop = *cache.populator();
      for (int i = 0; i < 5000 && !(pop.at_once_done() && pop.ahead_done() >= handed_out); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      CHECK(setup_ran);
      if (pop.supported()) {  // Linux 5.14 on
        CHECK(pop.at_once_done());
        CHECK(pop.ahead_done() >= handed_out);
        // The index (a quarter of capacity in 64-byte buckets) and at least
        // the entries of the slots handed out.
        CHECK(pop.bytes_brought_in() >= (cfg.capacity / 4) * 64 + handed_out * 128);
      }
    }
  }
  CHECK(handed_out > 40000);
  CHECK(runs[0].size() > 60000);
  CHECK(same_records(runs[0], runs[1]));
}
