// The traffic model behind TrafficGen: determinism (and a pinned digest, so a
// machine or library that generates other bytes is caught), every packet
// parsed and checked, the ground truth re-derived from the packets, TCP
// conversations, lanes, sizes, shares, the heavy tail, the arrival rate and
// the concurrency limit.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "engine/packet/parse.hh"
#include "engine/packet/rss_hash.hh"
#include "engine/traffic/traffic_model.hh"

using namespace sluice;

namespace {

constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08, kAck = 0x10;

// About 10000 flows and 150000 packets: quick to generate and to check.
TrafficConfig small_config() {
  TrafficConfig c;
  c.new_flows_per_s = 10000;
  c.duration_ns = 1'000'000'000;
  return c;
}

uint32_t be16(const uint8_t *p) { return uint32_t(p[0] << 8 | p[1]); }
uint32_t be32(const uint8_t *p) { return be16(p) << 16 | be16(p + 2); }

// Folded ones' complement sum; a valid checksum makes it 0xffff.
uint32_t sum16(const uint8_t *p, size_t n, uint32_t acc = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) acc += be16(p + i);
  if (n & 1) acc += uint32_t(p[n - 1]) << 8;
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return acc;
}

bool ipv4_checksum_ok(const uint8_t *frame, const PacketMeta &m) {
  return sum16(frame + m.l3_offset, 20) == 0xffff;
}

bool l4_checksum_ok(const uint8_t *frame, const PacketMeta &m) {
  uint32_t l4_len = m.l3_offset + m.ip_total_length - m.l4_offset;
  uint32_t acc = m.ip_proto + l4_len;
  if (m.is_ipv6())
    acc = sum16(m.src_addr, 16, sum16(m.dst_addr, 16, acc));
  else
    acc = sum16(m.src_addr + 12, 4, sum16(m.dst_addr + 12, 4, acc));
  return sum16(frame + m.l4_offset, l4_len, acc) == 0xffff;
}

// Bytes of L4 payload (inside the IP datagram, padding excluded).
uint32_t payload_len(const PacketMeta &m) {
  return m.l3_offset + m.ip_total_length - m.payload_offset;
}

uint32_t header_len(bool v6, bool tcp, bool vlan) {
  return (vlan ? 18 : 14) + (v6 ? 40 : 20) + (tcp ? 20 : 8);
}

// Directional 5-tuple + family, as parsed.
using Key = std::tuple<std::array<uint8_t, 16>, std::array<uint8_t, 16>, uint16_t, uint16_t, uint8_t, bool>;

Key key_of(const uint8_t *src, const uint8_t *dst, uint16_t sport, uint16_t dport, uint8_t proto,
           bool v6) {
  Key k;
  std::memcpy(std::get<0>(k).data(), src, 16);
  std::memcpy(std::get<1>(k).data(), dst, 16);
  std::get<2>(k) = sport;
  std::get<3>(k) = dport;
  std::get<4>(k) = proto;
  std::get<5>(k) = v6;
  return k;
}

// Both directions of every ground-truth flow -> (flow index, direction).
std::map<Key, std::pair<size_t, int>> index_flows(const GeneratedTraffic &g) {
  std::map<Key, std::pair<size_t, int>> idx;
  for (size_t i = 0; i < g.flows.size(); ++i) {
    const TrafficFlow &f = g.flows[i];
    bool fresh = idx.emplace(key_of(f.src_addr, f.dst_addr, f.src_port, f.dst_port, f.proto, f.is_ipv6),
                             std::pair{i, 0})
                     .second;
    fresh &= idx.emplace(key_of(f.dst_addr, f.src_addr, f.dst_port, f.src_port, f.proto, f.is_ipv6),
                         std::pair{i, 1})
                 .second;
    REQUIRE(fresh);  // 5-tuples never repeat
  }
  return idx;
}

// Calls fn(lane, index, meta) for every packet, requiring that it parses.
template <class Fn>
void for_each_packet(const GeneratedTraffic &g, Fn fn) {
  for (uint32_t l = 0; l < g.lanes.size(); ++l) {
    const GeneratedLane &lane = g.lanes[l];
    for (size_t i = 0; i < lane.size(); ++i) {
      PacketMeta m;
      ParseStatus s = parse_packet(lane.frame(i), lane.packets[i].length, LinkType::Ethernet, m);
      if (s != ParseStatus::Ok) FAIL("lane " << l << " packet " << i << ": " << parse_status_name(s));
      fn(l, i, m);
    }
  }
}

uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
  const uint8_t *p = static_cast<const uint8_t *>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// Digest of everything generated, field by field (no padding bytes; the
// integers in host byte order, so the pinned value is for little-endian).
uint64_t digest(const GeneratedTraffic &g) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const GeneratedLane &lane : g.lanes) {
    h = fnv1a(h, lane.bytes.data(), lane.bytes.size());
    for (const GeneratedPacket &p : lane.packets) {
      uint64_t v[3] = {p.ts_ns, p.offset, p.length};
      h = fnv1a(h, v, sizeof v);
    }
  }
  for (const TrafficFlow &f : g.flows) {
    h = fnv1a(h, f.src_addr, 16);
    h = fnv1a(h, f.dst_addr, 16);
    uint64_t v[] = {f.src_port, f.dst_port, f.proto, f.is_ipv6, f.vlan, f.lane, uint64_t(f.end)};
    h = fnv1a(h, v, sizeof v);
    for (const TrafficFlowDirection *d : {&f.fwd, &f.rev}) {
      uint64_t w[] = {d->packets, d->bytes, d->first_ns, d->last_ns, d->tcp_flags};
      h = fnv1a(h, w, sizeof w);
    }
  }
  return h;
}

bool same_traffic(const GeneratedTraffic &a, const GeneratedTraffic &b) {
  if (a.lanes.size() != b.lanes.size() || a.flows != b.flows || a.packets != b.packets ||
      a.bytes != b.bytes)
    return false;
  for (size_t l = 0; l < a.lanes.size(); ++l) {
    const GeneratedLane &x = a.lanes[l], &y = b.lanes[l];
    if (x.bytes.size() != y.bytes.size() || x.size() != y.size()) return false;
    if (x.bytes.size() && std::memcmp(x.bytes.data(), y.bytes.data(), x.bytes.size())) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (x.packets[i].ts_ns != y.packets[i].ts_ns || x.packets[i].offset != y.packets[i].offset ||
          x.packets[i].length != y.packets[i].length)
        return false;
  }
  return true;
}

}  // namespace

TEST_CASE("traffic: the same config gives the same bytes, another seed other ones", "[traffic]") {
  TrafficConfig c = small_config();
  c.duration_ns = 500'000'000;
  c.lanes = 2;
  GeneratedTraffic a = generate_traffic(c), b = generate_traffic(c);
  REQUIRE(a.packets > 50000);
  CHECK(same_traffic(a, b));

  c.seed = 2;
  GeneratedTraffic other = generate_traffic(c);
  CHECK_FALSE(same_traffic(a, other));
  CHECK(a.flows[1] != other.flows[1]);
}

// The digest of a small trace, pinned: the model must give these bytes on
// every machine and standard library. Update it (with the header comment)
// only when the model changes on purpose.
TEST_CASE("traffic: a pinned digest of a small trace", "[traffic]") {
  TrafficConfig c;
  c.new_flows_per_s = 5000;
  c.duration_ns = 200'000'000;
  c.lanes = 3;
  c.ipv6 = 0.3;
  c.vlan = 42;
  c.seed = 7;
  GeneratedTraffic g = generate_traffic(c);
  CHECK(g.flows.size() == 1035);
  CHECK(g.packets == 13422);
  CHECK(digest(g) == 0x65087bc3ebc5c505ull);
}

TEST_CASE("traffic: every packet parses, with valid checksums, lengths, order and RSS hash", "[traffic]") {
  TrafficConfig c = small_config();
  c.ipv6 = 0.5;
  c.udp = 0.4;
  c.lanes = 3;
  auto vlan = GENERATE(uint16_t(0), uint16_t(123));
  c.vlan = vlan;
  GeneratedTraffic g = generate_traffic(c);
  REQUIRE(g.lanes.size() == 3);
  const uint64_t end = c.start_ns + c.duration_ns;
  uint64_t packets = 0, bytes = 0, bad_ip_csum = 0, bad_l4_csum = 0;
  std::vector<uint64_t> last(3, 0);
  for_each_packet(g, [&](uint32_t l, size_t i, const PacketMeta &m) {
    const GeneratedLane &lane = g.lanes[l];
    const GeneratedPacket &p = lane.packets[i];
    ++packets;
    bytes += p.length;
    // frames back to back, time order within the lane, inside the trace
    REQUIRE(p.offset == (i ? lane.packets[i - 1].offset + lane.packets[i - 1].length : 0));
    REQUIRE(p.ts_ns >= last[l]);
    REQUIRE(p.ts_ns >= c.start_ns);
    REQUIRE(p.ts_ns <= end);
    last[l] = p.ts_ns;
    // the hash a replay hands on is the parsed headers' (TrafficGen sets it, not computes it)
    REQUIRE(p.rss_hash == symmetric_hash(m));
    REQUIRE(lane_for(symmetric_hash(m), c.lanes) == l);

    REQUIRE(m.has_l4());
    REQUIRE((m.ip_proto == 6 || m.ip_proto == 17));
    REQUIRE(m.vlan_count == (vlan ? 1 : 0));
    REQUIRE(m.vlan_outer == vlan);
    REQUIRE(m.ethertype == (m.is_ipv6() ? 0x86dd : 0x0800));
    const uint32_t l2 = vlan ? 18 : 14;
    REQUIRE(m.l3_offset == l2);
    const uint32_t hdr = header_len(m.is_ipv6(), m.ip_proto == 6, vlan);
    REQUIRE(m.payload_offset == hdr);
    if (payload_len(m) > 0) {
      REQUIRE(m.ip_total_length == p.length - l2);  // data: the IP datagram fills the frame
    } else {
      REQUIRE(m.ip_total_length == hdr - l2);       // control: headers only, padded to 60
      REQUIRE(p.length == std::max(60u, hdr));
    }
    if (m.ip_proto == 17) REQUIRE(be16(lane.frame(i) + m.l4_offset + 4) == m.ip_total_length - (m.l4_offset - m.l3_offset));
    if (m.is_ipv4() && !ipv4_checksum_ok(lane.frame(i), m)) ++bad_ip_csum;
    if (!l4_checksum_ok(lane.frame(i), m)) ++bad_l4_csum;
  });
  CHECK(packets == g.packets);
  CHECK(bytes == g.bytes);
  CHECK(bad_ip_csum == 0);
  CHECK(bad_l4_csum == 0);
  // the first flow starts the trace
  REQUIRE(!g.flows.empty());
  CHECK(g.flows[0].first_ns() == c.start_ns);
}

TEST_CASE("traffic: flows re-derived from the packets equal the ground truth", "[traffic]") {
  TrafficConfig c = small_config();
  c.lanes = 4;
  c.ipv6 = 0.3;
  GeneratedTraffic g = generate_traffic(c);
  auto index = index_flows(g);
  std::vector<TrafficFlow> derived(g.flows.size());
  std::vector<bool> seen(g.flows.size(), false);
  for_each_packet(g, [&](uint32_t l, size_t i, const PacketMeta &m) {
    auto it = index.find(key_of(m.src_addr, m.dst_addr, m.src_port, m.dst_port, m.ip_proto, m.is_ipv6()));
    REQUIRE(it != index.end());
    auto [fi, dir] = it->second;
    const TrafficFlow &truth = g.flows[fi];
    REQUIRE(truth.lane == l);
    TrafficFlow &f = derived[fi];
    if (!seen[fi]) {
      seen[fi] = true;
      f = truth;  // key, vlan, lane
      f.fwd = f.rev = {};
      f.end = FlowEnd::None;
      REQUIRE(dir == 0);  // the client speaks first
    }
    TrafficFlowDirection &d = dir ? f.rev : f.fwd;
    uint64_t ts = g.lanes[l].packets[i].ts_ns;
    if (d.packets == 0) d.first_ns = ts;
    d.last_ns = ts;
    ++d.packets;
    d.bytes += m.ip_total_length;
    d.tcp_flags |= m.ip_proto == 6 ? m.tcp_flags : 0;
    REQUIRE(m.vlan_outer == truth.vlan);
  });
  uint64_t mismatches = 0;
  for (size_t i = 0; i < g.flows.size(); ++i) {
    REQUIRE(seen[i]);  // every flow in the truth sent packets
    TrafficFlow &f = derived[i];
    uint8_t flags = f.fwd.tcp_flags | f.rev.tcp_flags;
    f.end = flags & kRst ? FlowEnd::Rst : flags & kFin ? FlowEnd::Fin : FlowEnd::None;
    if (!(f == g.flows[i])) {
      if (++mismatches <= 3) {
        INFO("flow " << i);
        CHECK(f.fwd.packets == g.flows[i].fwd.packets);
        CHECK(f.rev.packets == g.flows[i].rev.packets);
        CHECK(f.fwd.bytes == g.flows[i].fwd.bytes);
        CHECK(f.rev.bytes == g.flows[i].rev.bytes);
        CHECK(f.end == g.flows[i].end);
      }
    }
  }
  CHECK(mismatches == 0);
  uint64_t total = 0;
  for (const TrafficFlow &f : g.flows) total += f.packets();
  CHECK(total == g.packets);
}

TEST_CASE("traffic: TCP conversations are well formed", "[traffic]") {
  TrafficConfig c = small_config();
  c.udp = 0.1;
  c.ipv6 = 0.2;
  GeneratedTraffic g = generate_traffic(c);
  auto index = index_flows(g);
  struct State {
    uint32_t n = 0;        // packets so far
    uint32_t next[2] = {}; // next sequence number per direction
    int fins = 0;
    bool rst = false, final_ack = false;
  };
  std::vector<State> st(g.flows.size());
  uint64_t data_packets = 0, s2c_data = 0, fin_closes = 0;
  for_each_packet(g, [&](uint32_t l, size_t i, const PacketMeta &m) {
    auto [fi, dir] = index.at(key_of(m.src_addr, m.dst_addr, m.src_port, m.dst_port, m.ip_proto, m.is_ipv6()));
    if (m.ip_proto != 6) {
      REQUIRE((st[fi].n++ > 0 || dir == 0));
      return;
    }
    const uint8_t *tcp = g.lanes[l].frame(i) + m.l4_offset;
    const uint32_t seq = be32(tcp + 4), ack = be32(tcp + 8), len = payload_len(m);
    const uint8_t flags = m.tcp_flags;
    State &s = st[fi];
    INFO("flow " << fi << " packet " << s.n << " dir " << dir << " flags " << int(flags));
    REQUIRE((tcp[12] >> 4) == 5);
    REQUIRE_FALSE(s.rst);         // nothing after an RST
    REQUIRE_FALSE(s.final_ack);   // nothing after the last ACK of the close
    if (s.n == 0) {
      REQUIRE(dir == 0);
      REQUIRE(flags == kSyn);
      REQUIRE(ack == 0);
      REQUIRE(len == 0);
      s.next[0] = seq + 1;
    } else if (s.n == 1) {
      REQUIRE(dir == 1);
      REQUIRE(flags == (kSyn | kAck));
      REQUIRE(ack == s.next[0]);
      s.next[1] = seq + 1;
    } else {
      REQUIRE(seq == s.next[dir]);
      REQUIRE(ack == s.next[dir ^ 1]);
      REQUIRE((flags & kAck));
      REQUIRE_FALSE((flags & kSyn));
      if (s.n == 2) REQUIRE((dir == 0 && flags == kAck && len == 0));
      if (len > 0) {
        REQUIRE((flags == kAck || flags == (kAck | kPsh)));
        ++data_packets;
        s2c_data += dir;
      }
      if (flags & kRst) {
        REQUIRE(flags == (kRst | kAck));
        s.rst = true;
      }
      if (flags & kFin) {
        REQUIRE(flags == (kFin | kAck));
        ++s.fins;
      } else if (s.fins == 2) {
        REQUIRE(flags == kAck);
        s.final_ack = true;
        ++fin_closes;
      }
      s.next[dir] += len + (flags & kFin ? 1 : 0);
    }
    ++s.n;
  });
  // The ground truth's end agrees, and most data goes server -> client.
  for (size_t i = 0; i < g.flows.size(); ++i) {
    const TrafficFlow &f = g.flows[i];
    if (f.proto != 6) continue;
    if (st[i].rst) CHECK(f.end == FlowEnd::Rst);
    else if (st[i].fins) CHECK(f.end == FlowEnd::Fin);
    else CHECK(f.end == FlowEnd::None);
  }
  CHECK(fin_closes > 0);
  CHECK(double(s2c_data) / double(data_packets) > 0.7);
}

TEST_CASE("traffic: ends: most TCP flows FIN, some RST, a few left open", "[traffic]") {
  TrafficConfig c = small_config();
  c.udp = 0.2;
  GeneratedTraffic g = generate_traffic(c);
  uint64_t tcp = 0, fin = 0, rst = 0, none = 0, udp_not_none = 0;
  const uint64_t end = c.start_ns + c.duration_ns;
  for (const TrafficFlow &f : g.flows) {
    if (f.proto == 17) {
      udp_not_none += f.end != FlowEnd::None;
      continue;
    }
    if (f.first_ns() > end - c.duration_ns / 5) continue;  // may be cut
    ++tcp;
    fin += f.end == FlowEnd::Fin;
    rst += f.end == FlowEnd::Rst;
    none += f.end == FlowEnd::None;
  }
  CHECK(udp_not_none == 0);
  REQUIRE(tcp > 4000);
  CHECK(double(fin) / double(tcp) == Approx(0.90).margin(0.02));
  CHECK(double(rst) / double(tcp) == Approx(0.05).margin(0.015));
  CHECK(double(none) / double(tcp) == Approx(0.05).margin(0.015));
  CHECK(std::string(flow_end_name(FlowEnd::Rst)) == "rst");
}

TEST_CASE("traffic: the lanes split the same flows", "[traffic]") {
  TrafficConfig c = small_config();
  GeneratedTraffic one = generate_traffic(c);
  c.lanes = 4;
  GeneratedTraffic four = generate_traffic(c);
  REQUIRE(one.flows.size() == four.flows.size());
  CHECK(one.packets == four.packets);
  CHECK(one.bytes == four.bytes);
  std::vector<uint64_t> per_lane(4, 0);
  for (size_t i = 0; i < one.flows.size(); ++i) {
    TrafficFlow f = four.flows[i];
    REQUIRE(f.lane < 4);
    per_lane[f.lane] += f.packets();
    f.lane = 0;
    REQUIRE(f == one.flows[i]);
  }
  for (uint32_t l = 0; l < 4; ++l) {
    CHECK(four.lanes[l].size() == per_lane[l]);
    CHECK(per_lane[l] > 0);
  }
}

TEST_CASE("traffic: fixed frame sizes, raised to what the headers need", "[traffic]") {
  SECTION("one size") {
    TrafficConfig c = small_config();
    c.sizes = {200};
    GeneratedTraffic g = generate_traffic(c);
    uint64_t data = 0;
    for_each_packet(g, [&](uint32_t l, size_t i, const PacketMeta &m) {
      uint32_t len = g.lanes[l].packets[i].length;
      if (payload_len(m) > 0) {
        REQUIRE(len == 200);
        ++data;
      } else {
        REQUIRE(len == (m.is_ipv6() ? 74u : 60u));  // control: max(60, headers)
      }
    });
    CHECK(data > 0);
  }
  SECTION("60 bytes with IPv6 and a VLAN tag") {
    TrafficConfig c = small_config();
    c.duration_ns = 200'000'000;
    c.sizes = {60};
    c.ipv6 = 1;
    c.vlan = 7;
    GeneratedTraffic g = generate_traffic(c);
    uint64_t tcp_data = 0, udp_data = 0, control = 0;
    for_each_packet(g, [&](uint32_t l, size_t i, const PacketMeta &m) {
      uint32_t len = g.lanes[l].packets[i].length;
      REQUIRE(m.is_ipv6());
      if (m.ip_proto == 17) {
        REQUIRE(len == 18 + 40 + 8 + 1);  // 67: headers plus one payload byte
        ++udp_data;
      } else if (payload_len(m) > 0) {
        REQUIRE(len == 18 + 40 + 20 + 1);  // 79
        ++tcp_data;
      } else {
        REQUIRE(len == 18 + 40 + 20);  // 78
        ++control;
      }
    });
    CHECK(tcp_data > 0);
    CHECK(udp_data > 0);
    CHECK(control > 0);
  }
  SECTION("a list picks each size alike") {
    TrafficConfig c = small_config();
    c.sizes = {128, 1500};
    GeneratedTraffic g = generate_traffic(c);
    uint64_t n128 = 0, n1500 = 0;
    for_each_packet(g, [&](uint32_t l, size_t i, const PacketMeta &m) {
      if (payload_len(m) == 0) return;
      uint32_t len = g.lanes[l].packets[i].length;
      REQUIRE((len == 128 || len == 1500));
      (len == 128 ? n128 : n1500)++;
    });
    CHECK(double(n128) / double(n128 + n1500) == Approx(0.5).margin(0.02));
  }
}

TEST_CASE("traffic: IMIX data packets come 7:4:1", "[traffic]") {
  TrafficConfig c = small_config();
  c.ipv6 = 0.5;
  GeneratedTraffic g = generate_traffic(c);
  uint64_t small = 0, medium = 0, large = 0;
  for_each_packet(g, [&](uint32_t l, size_t i, const PacketMeta &m) {
    if (payload_len(m) == 0) return;
    uint32_t len = g.lanes[l].packets[i].length;
    uint32_t min_data = std::max(60u, header_len(m.is_ipv6(), m.ip_proto == 6, false) + 1);
    if (len == min_data) ++small;
    else if (len == 590) ++medium;
    else if (len == 1514) ++large;
    else FAIL("data frame of " << len << " bytes");
  });
  double n = double(small + medium + large);
  REQUIRE(n > 50000);
  // tolerance: +-0.015 absolute, > 5 standard deviations at this count
  CHECK(small / n == Approx(7.0 / 12).margin(0.015));
  CHECK(medium / n == Approx(4.0 / 12).margin(0.015));
  CHECK(large / n == Approx(1.0 / 12).margin(0.015));
}

TEST_CASE("traffic: IPv6 and UDP shares follow the config", "[traffic]") {
  TrafficConfig c = small_config();
  c.ipv6 = 0.25;
  c.udp = 0.6;
  GeneratedTraffic g = generate_traffic(c);
  double v6 = 0, udp = 0;
  for (const TrafficFlow &f : g.flows) {
    v6 += f.is_ipv6;
    udp += f.proto == 17;
  }
  double n = double(g.flows.size());
  CHECK(v6 / n == Approx(0.25).margin(0.02));
  CHECK(udp / n == Approx(0.6).margin(0.02));

  c.ipv6 = 0;
  c.udp = 1;
  c.duration_ns = 100'000'000;
  g = generate_traffic(c);
  for (const TrafficFlow &f : g.flows) REQUIRE((!f.is_ipv6 && f.proto == 17 && f.end == FlowEnd::None));
}

TEST_CASE("traffic: flow sizes are heavy-tailed", "[traffic]") {
  TrafficConfig c = small_config();
  c.new_flows_per_s = 20000;
  GeneratedTraffic g = generate_traffic(c);
  std::vector<uint64_t> sizes;
  for (const TrafficFlow &f : g.flows) sizes.push_back(f.packets());
  std::sort(sizes.rbegin(), sizes.rend());
  uint64_t total = 0, top = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    total += sizes[i];
    if (i < sizes.size() / 10) top += sizes[i];
  }
  INFO("top 10% of " << sizes.size() << " flows carry " << top << " of " << total << " packets");
  CHECK(double(top) / double(total) > 0.5);
  CHECK(sizes[sizes.size() / 2] <= 12);  // the median flow is short
  CHECK(sizes[0] > 2000);                // and some are large
}

TEST_CASE("traffic: flows arrive at new_flows_per_s", "[traffic]") {
  TrafficConfig c = small_config();
  c.new_flows_per_s = 20000;
  GeneratedTraffic g = generate_traffic(c);
  CHECK(g.delayed_flows == 0);
  CHECK(double(g.flows.size()) == Approx(20000).epsilon(0.03));
  // starts are in order, and as many start in each half of the trace
  uint64_t first_half = 0;
  for (size_t i = 0; i < g.flows.size(); ++i) {
    if (i) REQUIRE(g.flows[i].first_ns() >= g.flows[i - 1].first_ns());
    first_half += g.flows[i].first_ns() < c.start_ns + c.duration_ns / 2;
  }
  CHECK(double(first_half) / double(g.flows.size()) == Approx(0.5).margin(0.02));
  CHECK(double(traffic_packet_count_estimate(c)) == Approx(double(g.packets)).epsilon(0.2));
}

TEST_CASE("traffic: at most `flows` flows are active at once", "[traffic]") {
  TrafficConfig c = small_config();
  c.flows = 10;
  c.new_flows_per_s = 20000;
  c.duration_ns = 500'000'000;
  GeneratedTraffic g = generate_traffic(c);
  CHECK(g.delayed_flows > 0);
  // max overlap of the closed intervals [first, last]: at equal times starts
  // count before ends
  std::vector<std::pair<uint64_t, int>> ev;
  for (const TrafficFlow &f : g.flows) {
    ev.push_back({f.first_ns(), 0});
    ev.push_back({f.last_ns(), 1});
  }
  std::sort(ev.begin(), ev.end());
  int cur = 0, peak = 0;
  for (auto &[t, kind] : ev) {
    cur += kind == 0 ? 1 : -1;
    peak = std::max(peak, cur);
  }
  CHECK(peak <= 10);
  CHECK(peak == 10);  // and the limit was reached
  CHECK(g.flows.size() < 10000 / 2);  // demand was well above what 10 slots carry
}

TEST_CASE("traffic: with flow_span, flows last about the span and that many are active at once", "[traffic]") {
  TrafficConfig c = small_config();
  c.flows = 2000;
  c.new_flows_per_s = 200000;  // the first 2000 start within 10 ms; later ones as earlier ones end
  c.duration_ns = 2'000'000'000;
  c.flow_span_ns = 1'000'000'000;
  GeneratedTraffic g = generate_traffic(c);
  // a flow with a few data packets or more spreads them over about the span
  // (a flow cut at the end of the trace excepted)
  std::vector<uint64_t> spans;
  for (const TrafficFlow &f : g.flows)
    if (f.packets() >= 6 && f.last_ns() < c.start_ns + c.duration_ns - c.flow_span_ns / 2)
      spans.push_back(f.last_ns() - f.first_ns());
  REQUIRE(spans.size() > 500);
  std::sort(spans.begin(), spans.end());
  CHECK(double(spans[spans.size() / 2]) == Approx(1e9).epsilon(0.35));
  CHECK(spans[spans.size() / 10] > 400'000'000);
  // in the middle of the trace, close to `flows` flows are active at once
  const uint64_t mid = c.start_ns + c.duration_ns / 2;
  uint64_t active = 0;
  for (const TrafficFlow &f : g.flows) active += f.first_ns() <= mid && mid <= f.last_ns();
  CHECK(active > 1800);
  CHECK(active <= 2000);
  // without it, the same flows last a few round trips (1..10 ms here)
  c.flow_span_ns = 0;
  GeneratedTraffic d = generate_traffic(c);
  uint64_t long_ones = 0;
  for (const TrafficFlow &f : d.flows) long_ones += f.last_ns() - f.first_ns() > 400'000'000;
  CHECK(long_ones < d.flows.size() / 100);
  CHECK_THROWS_AS(generate_traffic([] {
                    TrafficConfig t;
                    t.flow_span_ns = 9'000'000'000;
                    return t;
                  }()),
                  std::invalid_argument);
  c.flow_span_ns = 1'000'000'000;
  CHECK(describe(c).find(", flows spread over 1 s") != std::string::npos);
}

TEST_CASE("traffic: invalid configs are rejected, describe", "[traffic]") {
  auto with = [](auto change) {
    TrafficConfig c;
    change(c);
    return c;
  };
  CHECK_THROWS_AS(generate_traffic(with([](TrafficConfig &c) { c.sizes = {59}; })), std::invalid_argument);
  CHECK_THROWS_AS(generate_traffic(with([](TrafficConfig &c) { c.sizes = {9217}; })), std::invalid_argument);
  CHECK_THROWS_AS(generate_traffic(with([](TrafficConfig &c) { c.lanes = 0; })), std::invalid_argument);
  CHECK_THROWS_AS(generate_traffic(with([](TrafficConfig &c) { c.flows = 0; })), std::invalid_argument);
  CHECK_THROWS_AS(generate_traffic(with([](TrafficConfig &c) { c.vlan = 4095; })), std::invalid_argument);
  CHECK_THROWS_AS(generate_traffic(with([](TrafficConfig &c) { c.ipv6 = 1.5; })), std::invalid_argument);
  CHECK_THROWS_AS(generate_traffic(with([](TrafficConfig &c) { c.new_flows_per_s = 0; })), std::invalid_argument);
  CHECK(describe(TrafficConfig{}) ==
        "1K flows/s up to 10K active, 10 s, imix, ipv6 10%, udp 30%, untagged, 1 lane, seed 1, "
        "flow sizes pareto(1, max 10000)");
}
