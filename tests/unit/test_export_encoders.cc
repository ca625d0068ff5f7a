// The IPFIX (RFC 7011, RFC 5103) and NetFlow v9 (RFC 3954) encoders: message
// structure read back by a reader written here from the RFCs, and the same
// messages written as UDP payloads into a pcap and decoded by tshark, which
// nobody here wrote: no expert info, no malformed set, no data without a
// template, and every decoded field equal to the records that went in.
#include <arpa/inet.h>
#include <pcap/pcap.h>
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/export/ipfix_encoder.hh"
#include "engine/export/netflow_v9_encoder.hh"
#include "engine/flow/flow_record.hh"

using namespace sluice;
namespace fs = std::filesystem;

namespace {

using Messages = std::vector<std::vector<uint8_t>>;

std::string export_scratch(const std::string &name) {
  fs::path d = fs::path(SLUICE_TEST_PLUGIN_DIR) / "export" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// ---------------------------------------------------------------- records

void set_v4(uint8_t *a, uint32_t v) {
  std::memset(a, 0, 16);
  a[10] = a[11] = 0xff;
  a[12] = uint8_t(v >> 24), a[13] = uint8_t(v >> 16), a[14] = uint8_t(v >> 8), a[15] = uint8_t(v);
}

constexpr uint64_t kBaseNs = 1'700'000'000'000'000'000ull;  // Nov 2023

// Varied records: IPv4 and IPv6, uniflows and biflows (some with an empty
// reverse direction), TCP, UDP, SCTP, GRE, ICMP, ICMPv6, 64-bit counters,
// zero and sub-millisecond durations, times off millisecond boundaries.
std::vector<FlowRecord> make_records(size_t n, uint64_t seed, uint64_t base_ns = kBaseNs,
                                     uint64_t spread_ns = 3600'000'000'000ull) {
  std::mt19937_64 rng(seed);
  auto u = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); };
  std::vector<FlowRecord> v(n);
  std::memset(v.data(), 0, n * sizeof(FlowRecord));
  for (size_t i = 0; i < n; ++i) {
    FlowRecord &r = v[i];
    int kind = i < 4 ? int(i) : int(u(0, 3));
    r.key.is_ipv6 = kind & 1;
    r.biflow = kind >> 1;
    if (r.key.is_ipv6) {
      for (uint8_t *a : {r.key.src_addr, r.key.dst_addr}) {
        a[0] = 0x20, a[1] = 0x01, a[2] = 0x0d, a[3] = 0xb8;
        for (int b = 4; b < 16; ++b) a[b] = uint8_t(u(0, 255));
        if (u(0, 3) == 0) std::memset(a + 6, 0, 6);  // a run of zero groups: "::"
      }
    } else {
      set_v4(r.key.src_addr, uint32_t(u(0x01000000, 0xdfffffff)));
      set_v4(r.key.dst_addr, uint32_t(u(0x01000000, 0xdfffffff)));
    }
    static const uint8_t protos[] = {6, 6, 17, 17, 132, 47, 1};
    r.key.proto = protos[u(0, 6)];
    if (r.key.proto == 1 && r.key.is_ipv6) r.key.proto = 58;
    if (r.key.proto == 1 || r.key.proto == 58) {
      r.key.dst_port = uint16_t(u(0, 255) << 8 | u(0, 15));
    } else if (r.key.proto != 47) {
      r.key.src_port = uint16_t(u(0, 65535));
      r.key.dst_port = uint16_t(u(0, 65535));
    }
    r.key.vlan = u(0, 2) ? 0 : uint16_t(u(1, 4095));
    auto counters = [&](FlowCounters &c, uint64_t first) {
      c.packets = u(0, 3) ? u(1, 5000) : u(1, 1ull << 40);
      c.octets = c.packets * u(20, 1500) + u(0, 1ull << 20);
      c.first_ns = first;
      switch (u(0, 3)) {
        case 0: c.last_ns = first; break;                           // one packet
        case 1: c.last_ns = first + u(0, 999'999); break;           // within a millisecond
        case 2: c.last_ns = first + u(0, 120'000'000'000); break;   // up to 2 min
        default: c.last_ns = first + u(0, 7200'000'000'000); break;  // up to 2 h
      }
      c.min_len = uint16_t(u(20, 1500));
      c.max_len = uint16_t(u(c.min_len, 65535));
      c.tcp_flags = r.key.proto == 6 ? uint8_t(u(0, 255)) : 0;
      c.tos = uint8_t(u(0, 255));
      c.min_ttl = uint8_t(u(1, 255));
      c.max_ttl = uint8_t(u(c.min_ttl, 255));
      c.if_index = u(0, 3) ? uint32_t(u(1, 64)) : uint32_t(u(0, 0xffffffffull));
      for (uint8_t *m : {c.src_mac, c.dst_mac})
        for (int b = 0; b < 6; ++b) m[b] = uint8_t(u(0, 255));
    };
    counters(r.fwd, base_ns + u(0, spread_ns));
    if (u(0, 4) == 0) r.fwd.first_ns -= r.fwd.first_ns % 1'000'000;  // on a millisecond boundary
    if (r.biflow && u(0, 3) != 0) counters(r.rev, r.fwd.first_ns + u(0, 5'000'000'000));
    r.reason = FlowEndReason(u(1, 5));
    r.lane = uint16_t(u(0, 3));
    r.flow_direction = uint8_t(u(0, 1));
    r.vlan_inner = u(0, 2) ? 0 : uint16_t(u(1, 4095));
    if (u(0, 2) == 0) {  // an MPLS label stack entry: label, traffic class, bottom of stack
      uint32_t lse = uint32_t(u(16, 0xfffff)) << 4 | uint32_t(u(0, 7)) << 1 | uint32_t(u(0, 1));
      r.mpls_top[0] = uint8_t(lse >> 16), r.mpls_top[1] = uint8_t(lse >> 8), r.mpls_top[2] = uint8_t(lse);
    }
  }
  return v;
}

// ------------------------------------------------- what a record says

std::string addr_str(const uint8_t *a, bool v6) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(v6 ? AF_INET6 : AF_INET, v6 ? a : a + 12, buf, sizeof buf);
  return buf;
}

struct Dir {
  uint64_t packets = 0, octets = 0, start_ms = 0, end_ms = 0;
  unsigned flags = 0, min_len = 0, max_len = 0;
  unsigned tos = 0, min_ttl = 0, max_ttl = 0;  // optional fields
};

// One exported record, as a collector sees it.
struct Norm {
  std::string src, dst;
  unsigned sport = 0, dport = 0, proto = 0, vlan = 0, reason = 0;
  Dir fwd;
  bool bi = false;
  Dir rev;
  // optional fields
  uint64_t in_if = 0, out_if = 0;
  unsigned direction = 0, inner_vlan = 0, icmp = 0, mpls = 0;
  std::string src_mac = "00:00:00:00:00:00", dst_mac = "00:00:00:00:00:00";
};

std::string mac_str(const uint8_t *m) {
  char buf[18];
  snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return buf;
}

std::string str(const Dir &d) {
  std::ostringstream s;
  s << "pkts " << d.packets << " octs " << d.octets << " ms " << d.start_ms << ".." << d.end_ms << " flags "
    << d.flags << " len " << d.min_len << ".." << d.max_len;
  if (d.tos || d.min_ttl || d.max_ttl) s << " tos " << d.tos << " ttl " << d.min_ttl << ".." << d.max_ttl;
  return s.str();
}

std::string str(const Norm &n) {
  std::ostringstream s;
  s << n.src << " " << n.sport << " > " << n.dst << " " << n.dport << " proto " << n.proto << " vlan " << n.vlan
    << " reason " << n.reason;
  const std::string zero_mac = "00:00:00:00:00:00";
  if (n.in_if || n.out_if || n.direction || n.src_mac != zero_mac || n.dst_mac != zero_mac || n.inner_vlan ||
      n.icmp || n.mpls)  // (so that records without optional fields read as before)
    s << " if " << n.in_if << ">" << n.out_if << " dir " << n.direction << " mac " << n.src_mac << ">" << n.dst_mac
      << " cvlan " << n.inner_vlan << " icmp " << n.icmp << " mpls " << n.mpls;
  s << " | " << str(n.fwd);
  if (n.bi) s << " | rev " << str(n.rev);
  return s.str();
}

Dir dir_of(const FlowCounters &c) {
  Dir d{c.packets, c.octets, c.first_ns / 1'000'000, c.last_ns / 1'000'000, c.tcp_flags, c.min_len, c.max_len,
        c.tos, c.min_ttl, c.max_ttl};
  d.end_ms = std::max(d.start_ms, d.end_ms);
  return d;
}

// The record's optional fields in an exported record whose direction is `c`.
void set_optional(Norm &n, const FlowRecord &r, const FlowCounters &c, const FlowCounters &other) {
  n.in_if = c.if_index, n.out_if = other.if_index;
  n.direction = r.flow_direction, n.inner_vlan = r.vlan_inner;
  n.src_mac = mac_str(c.src_mac), n.dst_mac = mac_str(c.dst_mac);
  n.icmp = r.key.proto == 1 || r.key.proto == 58 ? r.key.dst_port : 0;
  n.mpls = unsigned(r.mpls_top[0]) << 16 | unsigned(r.mpls_top[1]) << 8 | r.mpls_top[2];
}

// IPFIX: one record per flow record; non-reverse counters = fwd, reverse =
// rev; the times are the whole flow's, and there are no reverse times.
std::string ipfix_expect(const FlowRecord &r) {
  Norm n;
  n.src = addr_str(r.key.src_addr, r.key.is_ipv6);
  n.dst = addr_str(r.key.dst_addr, r.key.is_ipv6);
  n.sport = r.key.src_port, n.dport = r.key.dst_port, n.proto = r.key.proto, n.vlan = r.key.vlan;
  n.reason = unsigned(r.reason);
  set_optional(n, r, r.fwd, r.rev);
  n.fwd = dir_of(r.fwd);
  n.fwd.start_ms = r.first_ns() / 1'000'000;
  n.fwd.end_ms = std::max(n.fwd.start_ms, r.last_ns() / 1'000'000);
  n.bi = r.biflow;
  if (r.biflow) {
    n.rev = dir_of(r.rev);
    n.rev.start_ms = n.rev.end_ms = 0;
    n.rev.tos = 0;  // not sent
  }
  return str(n);
}

// NetFlow v9: a biflow is a forward record and, when the reverse direction
// saw packets, a reverse one with the endpoints swapped (ICMP ports stay).
std::vector<std::string> v9_expect(const FlowRecord &r, bool end_reason = true) {
  std::vector<std::string> v;
  for (int d = 0; d < (r.biflow && r.rev.packets ? 2 : 1); ++d) {
    Norm n;
    bool icmp = r.key.proto == 1 || r.key.proto == 58;
    n.src = addr_str(d ? r.key.dst_addr : r.key.src_addr, r.key.is_ipv6);
    n.dst = addr_str(d ? r.key.src_addr : r.key.dst_addr, r.key.is_ipv6);
    n.sport = d && !icmp ? r.key.dst_port : r.key.src_port;
    n.dport = d && !icmp ? r.key.src_port : r.key.dst_port;
    n.proto = r.key.proto, n.vlan = r.key.vlan;
    n.reason = end_reason ? unsigned(r.reason) : 0;
    set_optional(n, r, d ? r.rev : r.fwd, d ? r.fwd : r.rev);
    n.fwd = dir_of(d ? r.rev : r.fwd);
    v.push_back(str(n));
  }
  return v;
}

// Equal as multisets; on a difference, shows a few of each side.
void check_same_records(std::vector<std::string> got, std::vector<std::string> want) {
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  CHECK(got.size() == want.size());
  std::vector<std::string> missing, extra;
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing));
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
  for (size_t i = 0; i < std::min<size_t>(missing.size(), 3); ++i) FAIL_CHECK("not decoded: " << missing[i]);
  for (size_t i = 0; i < std::min<size_t>(extra.size(), 3); ++i) FAIL_CHECK("decoded, not sent: " << extra[i]);
  CHECK(missing.empty());
  CHECK(extra.empty());
}

// ----------------------------------------- readers written from the RFCs

uint64_t be(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}

struct Field {
  uint16_t id, len;
  uint32_t pen;
  bool operator==(const Field &) const = default;
};

struct SetInfo {
  uint16_t id;
  size_t offset, length, records;
  size_t record_len = 0;  // data sets: octets per record
};

struct MsgInfo {
  uint32_t time = 0, seq = 0, domain = 0, uptime = 0, count = 0;
  size_t size = 0, data_records = 0, template_records = 0;
  std::vector<SetInfo> sets;
};

// The optional fields that are not per direction, IPFIX and NetFlow v9 alike.
void decode_optional(Norm &n, const Field &f, const uint8_t *p, uint64_t v) {
  switch (f.id) {
    case 10: n.in_if = v; break;
    case 14: n.out_if = v; break;
    case 61: n.direction = unsigned(v); break;
    case 56: n.src_mac = mac_str(p); break;
    case 80: n.dst_mac = mac_str(p); break;
    case 245: n.inner_vlan = unsigned(v); break;
    case 32: n.icmp = unsigned(v); break;  // IPFIX: IPv4 records only; NetFlow v9: both
    case 139: CHECK(n.src.find(':') != std::string::npos); n.icmp = unsigned(v); break;
    case 70: CHECK(f.len == 3); n.mpls = unsigned(v); break;
    default: FAIL("unexpected element " << f.id);
  }
}

// RFC 7011: messages in the order sent, templates kept across messages.
struct IpfixReader {
  std::map<uint16_t, std::vector<Field>> templates;
  std::vector<MsgInfo> msgs;
  std::vector<std::string> flows;

  void read(const std::vector<uint8_t> &m) {
    INFO("IPFIX message " << msgs.size());
    REQUIRE(m.size() >= 16);
    MsgInfo mi;
    mi.size = m.size();
    REQUIRE(be(&m[0], 2) == 10);
    REQUIRE(be(&m[2], 2) == m.size());  // the length field
    mi.time = uint32_t(be(&m[4], 4)), mi.seq = uint32_t(be(&m[8], 4)), mi.domain = uint32_t(be(&m[12], 4));
    size_t off = 16;
    while (off < m.size()) {
      REQUIRE(off + 4 <= m.size());
      SetInfo s{uint16_t(be(&m[off], 2)), off, be(&m[off + 2], 2), 0};
      INFO("set " << s.id << " at " << off << " length " << s.length);
      REQUIRE(s.length > 4);  // never an empty set
      REQUIRE(off + s.length <= m.size());
      const uint8_t *p = &m[off + 4], *end = &m[off + s.length];
      if (s.id == 2) {
        while (p < end) {
          REQUIRE(end - p >= 4);
          uint16_t tid = uint16_t(be(p, 2)), nf = uint16_t(be(p + 2, 2));
          REQUIRE(tid >= 256);
          p += 4;
          std::vector<Field> f;
          for (unsigned i = 0; i < nf; ++i) {
            REQUIRE(end - p >= 4);
            Field x{uint16_t(be(p, 2) & 0x7fff), uint16_t(be(p + 2, 2)), 0};
            bool ent = be(p, 2) & 0x8000;
            p += 4;
            if (ent) {
              REQUIRE(end - p >= 4);
              x.pen = uint32_t(be(p, 4));
              p += 4;
            }
            f.push_back(x);
          }
          templates[tid] = f;
          ++s.records, ++mi.template_records;
        }
      } else {
        REQUIRE(s.id >= 256);
        auto t = templates.find(s.id);
        REQUIRE(t != templates.end());  // the template came first
        size_t len = 0;
        for (const Field &f : t->second) len += f.len;
        s.record_len = len;
        REQUIRE((s.length - 4) % len == 0);  // no padding
        for (; p < end; p += len) {
          flows.push_back(decode(p, t->second));
          ++s.records, ++mi.data_records;
        }
      }
      mi.sets.push_back(s);
      off += s.length;
    }
    REQUIRE(off == m.size());
    msgs.push_back(mi);
  }

  static std::string decode(const uint8_t *p, const std::vector<Field> &fields) {
    Norm n;
    for (const Field &f : fields) {
      Dir &d = f.pen == 29305 ? n.rev : n.fwd;
      if (f.pen == 29305) n.bi = true;
      else REQUIRE(f.pen == 0);
      uint64_t v = f.len <= 8 ? be(p, f.len) : 0;
      switch (f.id) {
        case 8: n.src = addr_str(p - 12, false); break;
        case 12: n.dst = addr_str(p - 12, false); break;
        case 27: n.src = addr_str(p, true); break;
        case 28: n.dst = addr_str(p, true); break;
        case 7: n.sport = unsigned(v); break;
        case 11: n.dport = unsigned(v); break;
        case 4: n.proto = unsigned(v); break;
        case 58: n.vlan = unsigned(v); break;
        case 136: n.reason = unsigned(v); break;
        case 2: d.packets = v; break;
        case 1: d.octets = v; break;
        case 152: d.start_ms = v; break;
        case 153: d.end_ms = v; break;
        case 6: d.flags = unsigned(v); break;
        case 25: d.min_len = unsigned(v); break;
        case 26: d.max_len = unsigned(v); break;
        case 5: d.tos = unsigned(v); break;
        case 52: d.min_ttl = unsigned(v); break;
        case 53: d.max_ttl = unsigned(v); break;
        default: CHECK(f.pen == 0); decode_optional(n, f, p, v); break;
      }
      p += f.len;
    }
    CHECK(n.fwd.start_ms <= n.fwd.end_ms);
    CHECK(n.rev.start_ms <= n.rev.end_ms);
    return str(n);
  }
};

// RFC 3954: export packets in the order sent.
struct V9Reader {
  std::map<uint16_t, std::vector<Field>> templates;
  std::vector<MsgInfo> msgs;
  std::vector<std::string> flows;

  void read(const std::vector<uint8_t> &m) {
    INFO("v9 packet " << msgs.size());
    REQUIRE(m.size() >= 20);
    MsgInfo mi;
    mi.size = m.size();
    REQUIRE(be(&m[0], 2) == 9);
    mi.count = uint32_t(be(&m[2], 2));
    mi.uptime = uint32_t(be(&m[4], 4)), mi.time = uint32_t(be(&m[8], 4));
    mi.seq = uint32_t(be(&m[12], 4)), mi.domain = uint32_t(be(&m[16], 4));
    CHECK(mi.uptime <= netflow_v9::kMaxUptimeMs);
    int64_t boot = int64_t(mi.time) * 1000 - int64_t(mi.uptime);  // where SWITCHED values count from
    size_t off = 20;
    while (off < m.size()) {
      REQUIRE(off + 4 <= m.size());
      SetInfo s{uint16_t(be(&m[off], 2)), off, be(&m[off + 2], 2), 0};
      INFO("FlowSet " << s.id << " at " << off << " length " << s.length);
      REQUIRE(s.length > 4);
      REQUIRE(s.length % 4 == 0);  // padded to 32 bits
      REQUIRE(off + s.length <= m.size());
      const uint8_t *p = &m[off + 4], *end = &m[off + s.length];
      if (s.id == 0) {
        while (p < end) {
          REQUIRE(end - p >= 4);
          uint16_t tid = uint16_t(be(p, 2)), nf = uint16_t(be(p + 2, 2));
          REQUIRE(tid >= 256);
          p += 4;
          std::vector<Field> f;
          for (unsigned i = 0; i < nf; ++i, p += 4) f.push_back({uint16_t(be(p, 2)), uint16_t(be(p + 2, 2)), 0});
          REQUIRE(p <= end);
          templates[tid] = f;
          ++s.records, ++mi.template_records;
        }
      } else {
        REQUIRE(s.id >= 256);
        auto t = templates.find(s.id);
        REQUIRE(t != templates.end());
        size_t len = 0;
        for (const Field &f : t->second) len += f.len;
        s.record_len = len;
        size_t k = (s.length - 4) / len, pad = s.length - 4 - k * len;
        REQUIRE(pad < 4);
        for (size_t i = 0; i < pad; ++i) CHECK(end[-1 - ptrdiff_t(i)] == 0);
        for (size_t i = 0; i < k; ++i, p += len) {
          flows.push_back(decode(p, t->second, boot));
          ++s.records, ++mi.data_records;
        }
      }
      mi.sets.push_back(s);
      off += s.length;
    }
    REQUIRE(off == m.size());
    CHECK(mi.count == mi.template_records + mi.data_records);
    msgs.push_back(mi);
  }

  static std::string decode(const uint8_t *p, const std::vector<Field> &fields, int64_t boot) {
    Norm n;
    uint64_t first = 0, last = 0;
    for (const Field &f : fields) {
      uint64_t v = f.len <= 8 ? be(p, f.len) : 0;
      switch (f.id) {
        case 8: n.src = addr_str(p - 12, false); break;
        case 12: n.dst = addr_str(p - 12, false); break;
        case 27: n.src = addr_str(p, true); break;
        case 28: n.dst = addr_str(p, true); break;
        case 7: n.sport = unsigned(v); break;
        case 11: n.dport = unsigned(v); break;
        case 4: n.proto = unsigned(v); break;
        case 58: n.vlan = unsigned(v); break;
        case 136: n.reason = unsigned(v); break;
        case 2: n.fwd.packets = v; break;
        case 1: n.fwd.octets = v; break;
        case 22: first = v; break;
        case 21: last = v; break;
        case 6: n.fwd.flags = unsigned(v); break;
        case 25: n.fwd.min_len = unsigned(v); break;
        case 26: n.fwd.max_len = unsigned(v); break;
        case 5: n.fwd.tos = unsigned(v); break;
        case 52: n.fwd.min_ttl = unsigned(v); break;
        case 53: n.fwd.max_ttl = unsigned(v); break;
        default: decode_optional(n, f, p, v); break;
      }
      p += f.len;
    }
    CHECK(first <= last);
    CHECK(last <= netflow_v9::kMaxUptimeMs);
    n.fwd.start_ms = uint64_t(boot + int64_t(first));
    n.fwd.end_ms = uint64_t(boot + int64_t(last));
    return str(n);
  }
};

std::vector<std::string> all_ipfix_expect(const std::vector<FlowRecord> &recs) {
  std::vector<std::string> v;
  for (const FlowRecord &r : recs) v.push_back(ipfix_expect(r));
  return v;
}

std::vector<std::string> all_v9_expect(const std::vector<FlowRecord> &recs, bool end_reason = true) {
  std::vector<std::string> v;
  for (const FlowRecord &r : recs)
    for (std::string &s : v9_expect(r, end_reason)) v.push_back(std::move(s));
  return v;
}

// Feeds records in batches of varied sizes, one export second apart,
// templates with the first.
template <class Encoder>
void encode_batches(Encoder &e, const std::vector<FlowRecord> &recs, uint32_t t0, Messages &out) {
  static const size_t sizes[] = {1, 7, 50, 3, 200};
  size_t i = 0, k = 0;
  while (i < recs.size()) {
    size_t n = std::min(sizes[k % 5], recs.size() - i);
    e.encode(recs.data() + i, n, t0 + uint32_t(k), k == 0, out);
    i += n, ++k;
  }
}

// Message i is full: the first thing of message i + 1 would not have fitted.
template <class Reader>
void check_packed(const Reader &rd, const Messages &msgs, size_t max, size_t set_header, bool pad4) {
  for (size_t i = 0; i + 1 < rd.msgs.size(); ++i) {
    const MsgInfo &a = rd.msgs[i], &b = rd.msgs[i + 1];
    if (b.time != a.time) continue;  // another batch
    const SetInfo &last = a.sets.back(), &next = b.sets.front();
    if (next.id == 0 || next.id == 2) continue;  // template lengths vary
    size_t first_len = next.record_len;          // a record of the next set
    size_t grown = last.id == next.id ? a.size + first_len : a.size + set_header + first_len;
    if (pad4 && last.id == next.id) {
      size_t body = last.length - set_header;  // data + padding of the last set
      size_t used = body - body % first_len;
      grown = a.size - last.length + set_header + used + first_len;
      grown += (4 - (set_header + used + first_len) % 4) % 4;
    } else if (pad4) {
      grown += (4 - (set_header + first_len) % 4) % 4;
    }
    INFO("message " << i << " of " << msgs.size() << ": " << a.size << " octets");
    CHECK(grown > max);
  }
}

// ----------------------------------------------------------- pcap, tshark

uint16_t ip_checksum(const uint8_t *p, size_t n) {
  uint32_t s = 0;
  for (size_t i = 0; i + 1 < n; i += 2) s += uint32_t(p[i] << 8 | p[i + 1]);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return uint16_t(~s);
}

// Each message as the payload of one Ethernet/IPv4/UDP packet to `dport`.
void write_udp_pcap(const std::string &path, const Messages &msgs, const std::vector<uint32_t> &times,
                    uint16_t dport) {
  pcap_t *pd = pcap_open_dead(DLT_EN10MB, 65535);
  REQUIRE(pd);
  pcap_dumper_t *d = pcap_dump_open(pd, path.c_str());
  REQUIRE(d);
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::vector<uint8_t> &m = msgs[i];
    REQUIRE(m.size() <= 65535 - 28);
    std::vector<uint8_t> f(14 + 20 + 8 + m.size(), 0);
    static const uint8_t eth[14] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00};
    std::memcpy(f.data(), eth, 14);
    uint8_t *ip = f.data() + 14, *udp = ip + 20;
    size_t tl = 20 + 8 + m.size();
    ip[0] = 0x45, ip[2] = uint8_t(tl >> 8), ip[3] = uint8_t(tl), ip[4] = uint8_t(i >> 8), ip[5] = uint8_t(i);
    ip[6] = 0x40, ip[8] = 64, ip[9] = 17;
    ip[12] = 192, ip[13] = 0, ip[14] = 2, ip[15] = 1;   // 192.0.2.1, the probe
    ip[16] = 192, ip[17] = 0, ip[18] = 2, ip[19] = 99;  // 192.0.2.99, the collector
    uint16_t ck = ip_checksum(ip, 20);
    ip[10] = uint8_t(ck >> 8), ip[11] = uint8_t(ck);
    udp[0] = 0xc3, udp[1] = 0x50;  // 50000
    udp[2] = uint8_t(dport >> 8), udp[3] = uint8_t(dport);
    udp[4] = uint8_t((8 + m.size()) >> 8), udp[5] = uint8_t(8 + m.size());  // checksum 0: none (IPv4)
    std::memcpy(udp + 8, m.data(), m.size());
    pcap_pkthdr h{};
    h.ts.tv_sec = times[i];
    h.ts.tv_usec = long(i % 1000);
    h.caplen = h.len = uint32_t(f.size());
    pcap_dump(reinterpret_cast<u_char *>(d), &h, f.data());
  }
  pcap_dump_close(d);
  pcap_close(pd);
}

bool have_tshark() { return std::system("command -v tshark > /dev/null 2>&1") == 0; }

std::string run_capture(const std::string &cmd, int *status) {
  FILE *p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

std::string attr(const std::string &line, const char *name) {
  std::string key = std::string(" ") + name + "=\"";
  size_t a = line.find(key);
  if (a == std::string::npos) return "";
  a += key.size();
  return line.substr(a, line.find('"', a) - a);
}

struct TsFlow {
  std::vector<std::pair<std::string, std::string>> fields;  // name, show
  std::vector<std::string> shownames;
  std::vector<std::string> all(const std::string &name) const {
    std::vector<std::string> v;
    for (auto &[n, s] : fields)
      if (n == name) v.push_back(s);
    return v;
  }
  std::string one(const std::string &name, size_t i = 0) const {
    auto v = all(name);
    return i < v.size() ? v[i] : "";
  }
};

struct TsPacket {
  std::map<std::string, std::string> header;  // the first cflow.* of each name outside records
  std::vector<TsFlow> flows;
};

struct Tshark {
  std::vector<TsPacket> packets;
  std::vector<std::string> problems;  // expert infos, malformed sets, data without a template
};

// tshark -T pdml: one element per line, nested by indentation.
Tshark run_tshark(const std::string &pcap) {
  int st = 0;
  std::string out = run_capture("TZ=UTC tshark -n -r '" + pcap +
                                    "' -d udp.port==4739,cflow -d udp.port==2055,cflow -T pdml 2>/dev/null",
                                &st);
  REQUIRE(st == 0);
  Tshark ts;
  std::istringstream in(out);
  std::string line;
  TsFlow *flow = nullptr;
  size_t flow_indent = 0;
  while (std::getline(in, line)) {
    size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos) continue;
    if (flow && indent <= flow_indent) flow = nullptr;
    if (line.compare(indent, 7, "<packet") == 0) {
      ts.packets.emplace_back();
      flow = nullptr;
      continue;
    }
    std::string name = attr(line, "name"), show = attr(line, "show");
    if (name == "_ws.expert" || name == "_ws.malformed" || name == "cflow.no_template_found" ||
        show.find("no template") != std::string::npos || show.rfind("Data (", 0) == 0) {
      std::string what = attr(line, "showname");
      ts.problems.push_back("packet " + std::to_string(ts.packets.size()) + ": " + (what.empty() ? show : what));
    }
    if (ts.packets.empty()) continue;
    TsPacket &pk = ts.packets.back();
    if (name.empty() && show.rfind("Flow ", 0) == 0) {
      pk.flows.emplace_back();
      flow = &pk.flows.back();
      flow_indent = indent;
      continue;
    }
    if (name.rfind("cflow.", 0) != 0) continue;
    if (flow) {
      flow->fields.emplace_back(name, show);
      flow->shownames.push_back(attr(line, "showname"));
    } else {
      pk.header.emplace(name, show);
    }
  }
  return ts;
}

uint64_t num(const std::string &s) {
  REQUIRE(!s.empty());
  return std::stoull(s, nullptr, 0);
}

// "Nov 14, 2023 22:13:20.123000000 UTC" -> UNIX ms (whole ms: the rest is zero).
uint64_t abs_ms(const std::string &s) {
  char mon[4] = {}, frac[10] = {}, zone[8] = {};
  int day, year, h, m, sec;
  REQUIRE(std::sscanf(s.c_str(), "%3s %d, %d %d:%d:%d.%9[0-9] %7s", mon, &day, &year, &h, &m, &sec, frac, zone) ==
          8);
  REQUIRE(std::string(zone) == "UTC");
  static const char *months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  int mi = int(std::find_if(std::begin(months), std::end(months), [&](const char *x) { return mon == std::string(x); }) -
               std::begin(months));
  REQUIRE(mi < 12);
  std::tm tm{};
  tm.tm_year = year - 1900, tm.tm_mon = mi, tm.tm_mday = day, tm.tm_hour = h, tm.tm_min = m, tm.tm_sec = sec;
  std::string f = std::string(frac) + std::string(9 - std::strlen(frac), '0');
  REQUIRE(f.substr(3) == "000000");
  return uint64_t(timegm(&tm)) * 1000 + std::stoull(f.substr(0, 3));
}

// "3600.100000000" (seconds, relative) -> ms.
uint64_t rel_ms(const std::string &s) {
  size_t dot = s.find('.');
  REQUIRE(dot != std::string::npos);
  std::string f = s.substr(dot + 1) + std::string(9, '0');
  REQUIRE(f.substr(3, 6) == "000000");
  return std::stoull(s.substr(0, dot)) * 1000 + std::stoull(f.substr(0, 3));
}

std::string addr_of(const TsFlow &f, const char *v4, const char *v6) {
  std::string a = f.one(v4);
  return a.empty() ? f.one(v6) : a;
}

// The optional fields, as tshark names them; per direction: the i-th of each.
void optional_from_tshark(const TsFlow &f, Norm &n) {
  auto opt = [&](const char *name, size_t i = 0) {
    std::string v = f.one(name, i);
    return v.empty() ? 0 : num(v);
  };
  n.in_if = opt("cflow.inputint"), n.out_if = opt("cflow.outputint");
  n.direction = unsigned(opt("cflow.direction"));
  if (!f.one("cflow.srcmac").empty()) n.src_mac = f.one("cflow.srcmac");
  if (!f.one("cflow.dstmac").empty()) n.dst_mac = f.one("cflow.dstmac");
  n.inner_vlan = unsigned(opt("cflow.dot1q_customer_vlan_id"));
  n.icmp = f.one("cflow.icmp_type_code_ipv4").empty()
               ? unsigned(opt("cflow.icmp_ipv6_type") << 8 | opt("cflow.icmp_ipv6_code"))
               : unsigned(opt("cflow.icmp_type_code_ipv4"));
  n.mpls = unsigned(opt("cflow.mpls_label") << 4 | opt("cflow.mpls_exp") << 1 | opt("cflow.mpls_bos"));
  n.fwd.tos = unsigned(opt("cflow.tos"));
  for (size_t i = 0; i < (n.bi ? 2 : 1); ++i) {
    Dir &d = i ? n.rev : n.fwd;
    d.min_ttl = unsigned(opt("cflow.ttl_min", i));
    d.max_ttl = unsigned(opt("cflow.ttl_max", i));
  }
}

// A tshark IPFIX record, non-reverse fields first, reverse ones (PEN 29305) second.
std::string ipfix_from_tshark(const TsFlow &f) {
  Norm n;
  n.src = addr_of(f, "cflow.srcaddr", "cflow.srcaddrv6");
  n.dst = addr_of(f, "cflow.dstaddr", "cflow.dstaddrv6");
  n.sport = unsigned(num(f.one("cflow.srcport"))), n.dport = unsigned(num(f.one("cflow.dstport")));
  n.proto = unsigned(num(f.one("cflow.protocol"))), n.vlan = unsigned(num(f.one("cflow.vlanid")));
  n.reason = unsigned(num(f.one("cflow.flow_end_reason")));
  size_t dirs = f.all("cflow.packets").size();
  REQUIRE((dirs == 1 || dirs == 2));
  n.bi = dirs == 2;
  for (size_t i = 0; i < dirs; ++i) {
    Dir &d = i ? n.rev : n.fwd;
    d.packets = num(f.one("cflow.packets", i));
    d.octets = num(f.one("cflow.octets", i));
    if (i == 0) {  // no reverse times
      d.start_ms = abs_ms(f.one("cflow.abstimestart", i));
      d.end_ms = abs_ms(f.one("cflow.abstimeend", i));
    }
    d.flags = unsigned(num(f.one("cflow.tcpflags", i)));
    d.min_len = unsigned(num(f.one("cflow.length_min", i)));
    d.max_len = unsigned(num(f.one("cflow.length_max", i)));
  }
  if (n.bi) {  // tshark marks the PEN 29305 fields as reverse
    size_t reverse = 0;
    for (const std::string &s : f.shownames) reverse += s.find("(Reverse") != std::string::npos;
    CHECK(reverse == 7);
  }
  optional_from_tshark(f, n);
  return str(n);
}

std::string v9_from_tshark(const TsFlow &f, const TsPacket &pk) {
  Norm n;
  n.src = addr_of(f, "cflow.srcaddr", "cflow.srcaddrv6");
  n.dst = addr_of(f, "cflow.dstaddr", "cflow.dstaddrv6");
  n.sport = unsigned(num(f.one("cflow.srcport"))), n.dport = unsigned(num(f.one("cflow.dstport")));
  n.proto = unsigned(num(f.one("cflow.protocol"))), n.vlan = unsigned(num(f.one("cflow.vlanid")));
  std::string reason = f.one("cflow.flow_end_reason");
  n.reason = reason.empty() ? 0 : unsigned(num(reason));
  REQUIRE(f.all("cflow.packets").size() == 1);
  n.fwd.packets = num(f.one("cflow.packets"));
  n.fwd.octets = num(f.one("cflow.octets"));
  n.fwd.flags = unsigned(num(f.one("cflow.tcpflags")));
  n.fwd.min_len = unsigned(num(f.one("cflow.length_min")));
  n.fwd.max_len = unsigned(num(f.one("cflow.length_max")));
  // tshark shows FIRST/LAST_SWITCHED as time since boot; the header says when boot was.
  int64_t boot = int64_t(num(pk.header.at("cflow.unix_secs"))) * 1000 - int64_t(rel_ms(pk.header.at("cflow.sysuptime")));
  n.fwd.start_ms = uint64_t(boot + int64_t(rel_ms(f.one("cflow.timestart"))));
  n.fwd.end_ms = uint64_t(boot + int64_t(rel_ms(f.one("cflow.timeend"))));
  optional_from_tshark(f, n);
  return str(n);
}

void check_no_problems(const Tshark &ts) {
  for (size_t i = 0; i < std::min<size_t>(ts.problems.size(), 5); ++i) FAIL_CHECK("tshark: " << ts.problems[i]);
  CHECK(ts.problems.empty());
}

}  // namespace

// ============================================================== IPFIX

TEST_CASE("ipfix: the four templates, field by field", "[ipfix]") {
  using ipfix::FieldSpec;
  const uint32_t R = ipfix::kReversePen;
  std::vector<FieldSpec> common = {{7, 2, 0},   {11, 2, 0},  {4, 1, 0},  {58, 2, 0}, {2, 8, 0},
                                   {1, 8, 0},   {152, 8, 0}, {153, 8, 0}, {6, 1, 0}, {25, 2, 0},
                                   {26, 2, 0},  {136, 1, 0}};
  std::vector<FieldSpec> rev = {{2, 8, R}, {1, 8, R}, {6, 1, R}, {25, 2, R}, {26, 2, R}};
  // the optional fields (FlowTable's default: all), the ICMP one by IP version
  std::vector<FieldSpec> optional = {{10, 4, 0}, {14, 4, 0}, {61, 1, 0}, {56, 6, 0}, {80, 6, 0}, {5, 1, 0},
                                     {52, 1, 0}, {53, 1, 0}, {245, 2, 0}};
  std::vector<FieldSpec> rev_optional = {{52, 1, R}, {53, 1, R}};  // no reverse ToS (nfdump)
  auto cat = [](std::vector<FieldSpec> a, const std::vector<FieldSpec> &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  std::vector<FieldSpec> v4 = cat({{8, 4, 0}, {12, 4, 0}}, common), v6 = cat({{27, 16, 0}, {28, 16, 0}}, common);
  std::vector<FieldSpec> v4_all = cat(cat(v4, optional), {{32, 2, 0}, {70, 3, 0}}),
                         v6_all = cat(cat(v6, optional), {{139, 2, 0}, {70, 3, 0}});
  // none: 256 + 8 * (every optional field left out)
  const uint16_t none = uint16_t(256 + 8 * kAllFlowFields);
  std::map<uint16_t, std::vector<FieldSpec>> want = {
      {ipfix::kTemplateV4, v4_all},        {ipfix::kTemplateV6, v6_all},
      {ipfix::kTemplateV4Bi, cat(cat(v4_all, rev), rev_optional)},
      {ipfix::kTemplateV6Bi, cat(cat(v6_all, rev), rev_optional)},
      {none, v4}, {uint16_t(none + 1), v6}, {uint16_t(none + 2), cat(v4, rev)}, {uint16_t(none + 3), cat(v6, rev)}};
  std::map<uint16_t, size_t> lengths = {{256, 84}, {257, 108}, {258, 107}, {259, 131},
                                        {none, 53}, {uint16_t(none + 1), 77}, {uint16_t(none + 2), 74}, {uint16_t(none + 3), 98}};
  for (auto &[id, fields] : want) {
    INFO("template " << id);
    auto got = ipfix::template_fields(id);
    REQUIRE(got.size() == fields.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].id == fields[i].id);
      CHECK(got[i].length == fields[i].length);
      CHECK(got[i].pen == fields[i].pen);
    }
    CHECK(ipfix::record_length(id) == lengths[id]);
  }
  // each set of optional fields its own ids
  CHECK(ipfix::template_id(0, kAllFlowFields, false) == 256);
  CHECK(ipfix::template_id(3, 0, false) == none + 3);
  CHECK(ipfix::template_id(1, kAllFlowFields, true) == 261);
  CHECK(ipfix::template_id(0, flow_field_bit(FlowField::Ttl), false) ==
        256 + 8 * (kAllFlowFields & ~flow_field_bit(FlowField::Ttl)));
  CHECK(ipfix::template_fields(ipfix::template_id(0, flow_field_bit(FlowField::Ttl), false)) ==
        cat(v4, {{52, 1, 0}, {53, 1, 0}}));
  CHECK_THROWS_AS(ipfix::template_fields(260), std::invalid_argument);

  // As sent: the template set of a refresh carries exactly these.
  ipfix::IpfixEncoder e({5, 1472});
  Messages out;
  e.templates(1'700'000'000, out);
  REQUIRE(out.size() == 1);
  IpfixReader rd;
  rd.read(out[0]);
  CHECK(rd.msgs[0].data_records == 0);
  CHECK(rd.msgs[0].template_records == 4);
  CHECK(rd.msgs[0].seq == 0);
  CHECK(rd.msgs[0].domain == 5);
  CHECK(rd.msgs[0].time == 1'700'000'000u);
  for (auto &[id, fields] : want) {
    if (id >= none) continue;  // not this encoder's
    REQUIRE(rd.templates.count(id));
    std::vector<Field> f;
    for (const FieldSpec &s : fields) f.push_back({s.id, s.length, s.pen});
    CHECK(rd.templates[id] == f);
  }
}

TEST_CASE("ipfix: message and set lengths, no padding, sequence numbers count data records", "[ipfix]") {
  auto recs = make_records(500, 1);
  ipfix::IpfixEncoder e({42, 1472});
  Messages out;
  encode_batches(e, recs, 1'700'000'100, out);
  IpfixReader rd;
  for (const auto &m : out) rd.read(m);
  uint32_t seq = 0;
  size_t last_time = 0;
  for (size_t i = 0; i < rd.msgs.size(); ++i) {
    INFO("message " << i);
    const MsgInfo &m = rd.msgs[i];
    CHECK(m.seq == seq);  // data records sent before this message
    CHECK(m.domain == 42u);
    CHECK(m.time >= last_time);
    CHECK(m.size <= 1472);
    last_time = m.time;
    seq += uint32_t(m.data_records);
    size_t sum = 16;
    for (const SetInfo &s : m.sets) sum += s.length;
    CHECK(sum == m.size);
    // one data set per template per message: grouped by template
    std::map<uint16_t, int> data_sets;
    for (const SetInfo &s : m.sets)
      if (s.id != 2) CHECK(++data_sets[s.id] == 1);
  }
  CHECK(e.sequence() == 500u);
  CHECK(seq == 500u);
  check_same_records(rd.flows, all_ipfix_expect(recs));
  check_packed(rd, out, 1472, 4, false);
}

TEST_CASE("ipfix: every message within max_message, down to one record per message", "[ipfix]") {
  auto recs = make_records(300, 2);
  const size_t sizes[] = {ipfix::min_message_size(), ipfix::min_message_size() + 1, 200, 576 - 20 - 8,
                          1500 - 40 - 8, 1500 - 20 - 20, 1472, 9000 - 20 - 8, 65535};
  for (size_t max : sizes) {
    INFO("max_message " << max);
    ipfix::IpfixEncoder e({1, max});
    Messages out;
    encode_batches(e, recs, 1'700'000'000, out);
    e.encode(recs.data(), recs.size(), 1'700'001'000, true, out);  // everything again, after a refresh
    IpfixReader rd;
    for (const auto &m : out) {
      CHECK(m.size() <= max);
      rd.read(m);
    }
    std::vector<std::string> want = all_ipfix_expect(recs);
    {
      std::vector<std::string> twice = want;
      want.insert(want.end(), twice.begin(), twice.end());
    }
    check_same_records(rd.flows, want);
    CHECK(e.sequence() == 600u);
    check_packed(rd, out, max, 4, false);
    if (max == ipfix::min_message_size()) {
      // The largest records (IPv6 biflow, 98 octets) go one per message.
      for (const MsgInfo &m : rd.msgs)
        for (const SetInfo &s : m.sets)
          if (s.id == ipfix::kTemplateV6Bi) CHECK(s.records == 1);
    }
  }
  CHECK_THROWS_AS(ipfix::IpfixEncoder({1, ipfix::min_message_size() - 1}), std::invalid_argument);
  CHECK_THROWS_AS(ipfix::IpfixEncoder({1, 65536}), std::invalid_argument);
}

TEST_CASE("ipfix: templates precede the data that uses them, refresh and reset", "[ipfix]") {
  auto recs = make_records(40, 3);
  ipfix::IpfixEncoder e({9, 1472});
  IpfixReader rd;  // fails on a data set whose template it has not seen
  auto template_ids = [](const std::vector<uint8_t> &m) {
    std::vector<uint16_t> ids;
    for (size_t off = 16; off < m.size(); off += be(&m[off + 2], 2))
      if (be(&m[off], 2) == 2)
        for (size_t p = off + 4; p < off + be(&m[off + 2], 2);) {
          ids.push_back(uint16_t(be(&m[p], 2)));
          auto f = ipfix::template_fields(uint16_t(be(&m[p], 2)));
          p += 4;
          for (const auto &x : f) p += x.pen ? 8 : 4;
        }
    return ids;
  };

  // IPv4 uniflows only: only their template goes, right before their data.
  std::vector<FlowRecord> v4;
  for (const FlowRecord &r : recs)
    if (!r.key.is_ipv6 && !r.biflow) v4.push_back(r);
  REQUIRE(v4.size() >= 2);
  Messages out;
  e.encode(v4.data(), v4.size(), 100, false, out);
  REQUIRE(out.size() == 1);
  CHECK(template_ids(out[0]) == std::vector<uint16_t>{ipfix::kTemplateV4});
  rd.read(out[0]);
  CHECK(rd.msgs[0].sets.size() == 2);
  CHECK(rd.msgs[0].sets[0].id == 2);
  CHECK(rd.msgs[0].sets[1].id == ipfix::kTemplateV4);

  // Everything: the three templates not sent yet, each before its data; none again.
  out.clear();
  e.encode(recs.data(), recs.size(), 101, false, out);
  std::vector<uint16_t> sent;
  for (const auto &m : out) {
    rd.read(m);
    for (uint16_t id : template_ids(m)) sent.push_back(id);
  }
  CHECK(sent == std::vector<uint16_t>{ipfix::kTemplateV6, ipfix::kTemplateV4Bi, ipfix::kTemplateV6Bi});
  out.clear();
  e.encode(recs.data(), recs.size(), 102, false, out);
  for (const auto &m : out) {
    CHECK(template_ids(m).empty());
    rd.read(m);
  }

  // A refresh: all four lead the first message, data follows.
  out.clear();
  e.encode(recs.data(), recs.size(), 103, true, out);
  REQUIRE(!out.empty());
  CHECK(template_ids(out[0]) == std::vector<uint16_t>(std::begin(ipfix::kTemplateIds), std::end(ipfix::kTemplateIds)));
  CHECK(be(&out[0][16], 2) == 2);  // the first set is the template set
  for (size_t i = 1; i < out.size(); ++i) CHECK(template_ids(out[i]).empty());
  for (const auto &m : out) rd.read(m);
  // with no records: a template-only message
  out.clear();
  e.encode(nullptr, 0, 104, true, out);
  REQUIRE(out.size() == 1);
  rd.read(out[0]);
  CHECK(rd.msgs.back().data_records == 0);
  CHECK(rd.msgs.back().template_records == 4);
  out.clear();
  e.encode(nullptr, 0, 104, false, out);
  CHECK(out.empty());

  // After reset_templates() (a TCP reconnect), a fresh collector decodes the next batch.
  uint32_t seq = e.sequence();
  CHECK(seq == uint32_t(v4.size() + 3 * recs.size()));
  e.reset_templates();
  out.clear();
  e.encode(recs.data(), recs.size(), 105, false, out);
  IpfixReader fresh;
  for (const auto &m : out) fresh.read(m);
  CHECK(fresh.msgs[0].seq == seq);  // the sequence carries on
  check_same_records(fresh.flows, all_ipfix_expect(recs));

  // templates() alone at the smallest size: spread over messages, each within it.
  ipfix::IpfixEncoder small({9, ipfix::min_message_size()});
  out.clear();
  small.templates(7, out);
  CHECK(out.size() > 1);
  IpfixReader rs;
  for (const auto &m : out) {
    CHECK(m.size() <= ipfix::min_message_size());
    rs.read(m);
  }
  CHECK(rs.templates.size() == 4);
  CHECK(small.sequence() == 0u);
}

TEST_CASE("ipfix: times exact in milliseconds, start <= end, biflows with an empty reverse", "[ipfix]") {
  std::vector<FlowRecord> recs(5);
  std::memset(recs.data(), 0, sizeof(FlowRecord) * recs.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    set_v4(recs[i].key.src_addr, 0x0a000001 + uint32_t(i));
    set_v4(recs[i].key.dst_addr, 0xc0a80001);
    recs[i].key.proto = 17;
    recs[i].fwd.packets = 1;
    recs[i].reason = FlowEndReason::IdleTimeout;
  }
  // last packet in the same millisecond as the first
  recs[0].fwd.first_ns = 1'700'000'000'123'000'001ull, recs[0].fwd.last_ns = 1'700'000'000'123'999'999ull;
  // across a millisecond boundary by 2 ns
  recs[1].fwd.first_ns = 1'700'000'000'123'999'999ull, recs[1].fwd.last_ns = 1'700'000'000'124'000'001ull;
  // a last before the first (never from a FlowTable): end clamped to start
  recs[2].fwd.first_ns = 1'700'000'000'500'000'000ull, recs[2].fwd.last_ns = 1'700'000'000'400'000'000ull;
  // a biflow whose reverse saw nothing: reverse fields all zero
  recs[3].biflow = 1, recs[3].fwd.first_ns = 1'700'000'001'000'000'000ull;
  recs[3].fwd.last_ns = 1'700'000'002'000'000'000ull;
  // a biflow whose reverse ends after the forward direction
  recs[4].biflow = 1, recs[4].fwd.first_ns = 1'700'000'003'000'000'000ull;
  recs[4].fwd.last_ns = 1'700'000'004'000'000'000ull;
  recs[4].rev = {3, 300, 1'700'000'003'000'500'000ull, 1'700'000'009'999'999'999ull, 100, 100, 0, 0, 0, 0, 0, {}, {}};

  ipfix::IpfixEncoderConfig cfg{1, 1472};
  cfg.fields = 0;  // no optional field
  ipfix::IpfixEncoder e(cfg);
  Messages out;
  e.encode(recs.data(), recs.size(), 1'700'000'010, false, out);
  REQUIRE(out.size() == 1);
  IpfixReader rd;
  rd.read(out[0]);
  REQUIRE(rd.flows.size() == 5);
  auto has = [&](const std::string &s) {
    INFO(s);
    CHECK(std::find(rd.flows.begin(), rd.flows.end(), s) != rd.flows.end());
  };
  has("10.0.0.1 0 > 192.168.0.1 0 proto 17 vlan 0 reason 1 | pkts 1 octs 0 ms 1700000000123..1700000000123 flags 0 len 0..0");
  has("10.0.0.2 0 > 192.168.0.1 0 proto 17 vlan 0 reason 1 | pkts 1 octs 0 ms 1700000000123..1700000000124 flags 0 len 0..0");
  has("10.0.0.3 0 > 192.168.0.1 0 proto 17 vlan 0 reason 1 | pkts 1 octs 0 ms 1700000000500..1700000000500 flags 0 len 0..0");
  has("10.0.0.4 0 > 192.168.0.1 0 proto 17 vlan 0 reason 1 | pkts 1 octs 0 ms 1700000001000..1700000002000 flags 0 len 0..0"
      " | rev pkts 0 octs 0 ms 0..0 flags 0 len 0..0");
  has("10.0.0.5 0 > 192.168.0.1 0 proto 17 vlan 0 reason 1 | pkts 1 octs 0 ms 1700000003000..1700000009999 flags 0 len 0..0"
      " | rev pkts 3 octs 300 ms 0..0 flags 0 len 100..100");
  CHECK(rd.msgs[0].sets.back().id == ipfix::template_id(2, 0, false));
  CHECK(rd.msgs[0].sets.back().records == 2);
}

TEST_CASE("ipfix: biflow uniflows: each direction a uniflow record, its own counters and times, endpoints swapped",
          "[ipfix]") {
  std::vector<FlowRecord> recs(4);
  std::memset(recs.data(), 0, sizeof(FlowRecord) * recs.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    set_v4(recs[i].key.src_addr, 0x0a000001 + uint32_t(i));
    set_v4(recs[i].key.dst_addr, 0xc0a80001);
    recs[i].key.proto = 6, recs[i].key.src_port = 40000, recs[i].key.dst_port = 443;
    recs[i].biflow = 1;
    recs[i].reason = FlowEndReason::EndOfFlow;
    recs[i].fwd = {2, 120, 1'700'000'000'000'000'000ull, 1'700'000'001'000'000'000ull, 60, 60, 0x02, 0, 0, 0, 0, {}, {}};
  }
  // 0: both directions
  recs[0].rev = {3, 4500, 1'700'000'000'500'000'000ull, 1'700'000'002'000'000'000ull, 1500, 1500, 0x12, 0, 0, 0, 0, {}, {}};
  // 1: the reverse direction saw nothing: the forward record alone
  // 2: after an active timeout, the reverse direction alone
  recs[2].fwd = {};
  recs[2].rev = {1, 40, 1'700'000'005'000'000'000ull, 1'700'000'005'000'000'000ull, 40, 40, 0x10, 0, 0, 0, 0, {}, {}};
  // 3: ICMP: the reverse keeps its type and code, as NetFlow v9 does
  recs[3].key.proto = 1, recs[3].key.src_port = 0, recs[3].key.dst_port = 8 << 8;
  recs[3].rev = {1, 84, 1'700'000'000'100'000'000ull, 1'700'000'000'100'000'000ull, 84, 84, 0, 0, 0, 0, 0, {}, {}};

  ipfix::IpfixEncoderConfig cfg{1, 1472};
  cfg.uniflows = true;
  cfg.fields = 0;  // no optional field
  ipfix::IpfixEncoder e(cfg);
  Messages out;
  std::vector<uint32_t> completed;
  e.encode(recs.data(), recs.size(), 1'700'000'010, true, out, &completed);
  REQUIRE(out.size() == 1);
  IpfixReader rd;
  rd.read(out[0]);
  // only the uniflow templates are announced and used
  CHECK(rd.templates.size() == 2);
  const uint16_t v4 = ipfix::template_id(0, 0, false), v6 = ipfix::template_id(1, 0, false);
  CHECK(rd.templates.count(v4) == 1);
  CHECK(rd.templates.count(v6) == 1);
  CHECK(rd.msgs[0].sets.back().id == v4);
  std::vector<std::string> want = {
      "10.0.0.1 40000 > 192.168.0.1 443 proto 6 vlan 0 reason 3 | pkts 2 octs 120 ms 1700000000000..1700000001000 flags 2 len 60..60",
      "192.168.0.1 443 > 10.0.0.1 40000 proto 6 vlan 0 reason 3 | pkts 3 octs 4500 ms 1700000000500..1700000002000 flags 18 len 1500..1500",
      "10.0.0.2 40000 > 192.168.0.1 443 proto 6 vlan 0 reason 3 | pkts 2 octs 120 ms 1700000000000..1700000001000 flags 2 len 60..60",
      "192.168.0.1 443 > 10.0.0.3 40000 proto 6 vlan 0 reason 3 | pkts 1 octs 40 ms 1700000005000..1700000005000 flags 16 len 40..40",
      "10.0.0.4 0 > 192.168.0.1 2048 proto 1 vlan 0 reason 3 | pkts 2 octs 120 ms 1700000000000..1700000001000 flags 2 len 60..60",
      "192.168.0.1 0 > 10.0.0.4 2048 proto 1 vlan 0 reason 3 | pkts 1 octs 84 ms 1700000000100..1700000000100 flags 0 len 84..84",
  };
  CHECK(rd.flows == want);
  // sequence numbers count data records; the message completes the 4 flow records
  CHECK(e.sequence() == 6);
  CHECK(completed == std::vector<uint32_t>{4});
}

TEST_CASE("ipfix: tshark decodes IPv4 and IPv6 uniflows and biflows, every field", "[ipfix]") {
  if (!have_tshark()) {
    WARN("skipped: tshark is not installed (apt-get install tshark)");
    return;
  }
  std::string dir = export_scratch("ipfix_tshark");
  auto recs = make_records(400, 4);
  // Two domains in one capture: one with room for many records, one with a
  // message per record or two; tshark checks the sequence numbers per domain.
  ipfix::IpfixEncoder big({1, 1472}), small({2, ipfix::min_message_size()});
  Messages a, b;
  encode_batches(big, recs, 1'700'003'600, a);
  encode_batches(small, recs, 1'700'003'600, b);
  Messages all;
  std::vector<uint32_t> times;
  std::vector<uint32_t> doms;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    for (Messages *m : {&a, &b})
      if (i < m->size()) {
        all.push_back((*m)[i]);
        times.push_back(uint32_t(be(&(*m)[i][4], 4)));
        doms.push_back(uint32_t(be(&(*m)[i][12], 4)));
      }
  std::string pcap = dir + "/ipfix.pcap";
  write_udp_pcap(pcap, all, times, 4739);

  Tshark ts = run_tshark(pcap);
  REQUIRE(ts.packets.size() == all.size());
  check_no_problems(ts);
  std::vector<std::string> got;
  std::map<uint32_t, uint64_t> seq;  // per domain
  for (size_t i = 0; i < ts.packets.size(); ++i) {
    INFO("packet " << i + 1);
    const TsPacket &pk = ts.packets[i];
    CHECK(pk.header.at("cflow.version") == "10");
    CHECK(num(pk.header.at("cflow.len")) == all[i].size());
    CHECK(num(pk.header.at("cflow.od_id")) == doms[i]);
    CHECK(num(pk.header.at("cflow.exporttime")) == times[i]);
    CHECK(num(pk.header.at("cflow.sequence")) == seq[doms[i]]);
    seq[doms[i]] += pk.flows.size();
    for (const TsFlow &f : pk.flows) got.push_back(ipfix_from_tshark(f));
  }
  CHECK(seq[1] == 400);
  CHECK(seq[2] == 400);
  std::vector<std::string> want = all_ipfix_expect(recs);
  {
      std::vector<std::string> twice = want;
      want.insert(want.end(), twice.begin(), twice.end());
    }
  check_same_records(got, want);
}

// ======================================================== NetFlow v9

TEST_CASE("netflow v9: header count, sequence counts packets, FlowSets padded, within max_message", "[ipfix]") {
  auto recs = make_records(300, 5);
  size_t n_v9 = all_v9_expect(recs).size();
  REQUIRE(n_v9 > 300);  // biflows with a reverse direction make two
  for (bool reason : {true, false}) {
    netflow_v9::NetFlowV9Encoder probe({1, 1472, reason});
    const size_t sizes[] = {probe.min_message_size(), probe.min_message_size() + 3, 576 - 28, 1472, 9000 - 28,
                            65535};
    for (size_t max : sizes) {
      INFO("max_message " << max << (reason ? "" : ", without flowEndReason"));
      netflow_v9::NetFlowV9Encoder e({77, max, reason});
      Messages out;
      encode_batches(e, recs, 1'700'000'000, out);
      V9Reader rd;
      for (const auto &m : out) {
        CHECK(m.size() <= max);
        rd.read(m);
      }
      for (size_t i = 0; i < rd.msgs.size(); ++i) {
        CHECK(rd.msgs[i].seq == i);  // packets sent before this one
        CHECK(rd.msgs[i].domain == 77u);
      }
      CHECK(e.sequence() == out.size());
      CHECK(rd.templates.size() == 2);
      // every optional field (11 of them): 31 octets more than without
      CHECK(rd.templates[256].size() == (reason ? 25u : 24u));
      CHECK(e.record_length(256) == (reason ? 76u : 75u));
      CHECK(e.record_length(257) == (reason ? 100u : 99u));
      check_same_records(rd.flows, all_v9_expect(recs, reason));
      check_packed(rd, out, max, 4, true);
      CHECK(e.clamped() == 0u);
    }
    CHECK_THROWS_AS(netflow_v9::NetFlowV9Encoder({1, probe.min_message_size() - 1, reason}), std::invalid_argument);
  }
}

TEST_CASE("netflow v9: templates first, refresh, biflows as two records, times from the boot time", "[ipfix]") {
  auto recs = make_records(60, 6);
  netflow_v9::NetFlowV9Encoder e({3, 1472});
  Messages out;
  e.encode(recs.data(), recs.size(), 1'700'007'300, false, out);
  REQUIRE(!out.empty());
  CHECK(be(&out[0][20], 2) == 0);  // the first FlowSet: the templates
  V9Reader rd;
  for (const auto &m : out) rd.read(m);
  CHECK(rd.msgs[0].template_records == 2);
  for (size_t i = 1; i < rd.msgs.size(); ++i) CHECK(rd.msgs[i].template_records == 0);
  check_same_records(rd.flows, all_v9_expect(recs));
  // The boot time is an hour before the oldest time sent.
  uint64_t oldest = 1'700'007'300'000ull;
  for (const FlowRecord &r : recs) oldest = std::min(oldest, r.fwd.first_ns / 1'000'000);
  CHECK(e.boot_ms() == oldest - netflow_v9::kBootLeadMs);
  CHECK(rd.msgs[0].uptime == 1'700'007'300'000ull - e.boot_ms());

  // next batch: no templates; with send_templates: both lead the packet
  out.clear();
  e.encode(recs.data(), 10, 1'700'007'301, false, out);
  rd.read(out[0]);
  CHECK(rd.msgs.back().template_records == 0);
  out.clear();
  e.encode(recs.data(), 10, 1'700'007'302, true, out);
  CHECK(be(&out[0][20], 2) == 0);
  rd.read(out[0]);
  CHECK(rd.msgs.back().template_records == 2);
  out.clear();
  e.templates(1'700'007'303, out);
  REQUIRE(out.size() == 1);
  rd.read(out[0]);
  CHECK(rd.msgs.back().count == 2);
  CHECK(rd.msgs.back().seq == e.sequence() - 1);
  // reset_templates(): templates again before data
  e.reset_templates();
  out.clear();
  e.encode(recs.data(), 10, 1'700'007'304, false, out);
  CHECK(be(&out[0][20], 2) == 0);

  // An ICMP biflow: the reverse record swaps addresses, not type/code.
  FlowRecord icmp;
  std::memset(&icmp, 0, sizeof icmp);
  set_v4(icmp.key.src_addr, 0x0a000001), set_v4(icmp.key.dst_addr, 0x0a000002);
  icmp.key.proto = 1, icmp.key.dst_port = 8 << 8, icmp.biflow = 1, icmp.reason = FlowEndReason::IdleTimeout;
  icmp.fwd = {1, 84, 1'700'007'000'000'000'000ull, 1'700'007'000'000'000'000ull, 84, 84, 0, 0, 0, 0, 0, {}, {}};
  icmp.rev = {1, 84, 1'700'007'000'001'000'000ull, 1'700'007'000'001'000'000ull, 84, 84, 0, 0, 0, 0, 0, {}, {}};
  out.clear();
  e.encode(&icmp, 1, 1'700'007'305, false, out);
  V9Reader ri;
  ri.templates = rd.templates;  // sent before
  for (const auto &m : out) ri.read(m);
  // (ICMP_TYPE 32: type << 8 | code, in both)
  check_same_records(ri.flows,
                     {"10.0.0.1 0 > 10.0.0.2 2048 proto 1 vlan 0 reason 1 if 0>0 dir 0 mac "
                      "00:00:00:00:00:00>00:00:00:00:00:00 cvlan 0 icmp 2048 mpls 0 | pkts 1 octs 84 ms "
                      "1700007000000..1700007000000 flags 0 len 84..84",
                      "10.0.0.2 0 > 10.0.0.1 2048 proto 1 vlan 0 reason 1 if 0>0 dir 0 mac "
                      "00:00:00:00:00:00>00:00:00:00:00:00 cvlan 0 icmp 2048 mpls 0 | pkts 1 octs 84 ms "
                      "1700007000001..1700007000001 flags 0 len 84..84"});
}

TEST_CASE("netflow v9: over a long trace the boot time moves on and every value stays valid", "[ipfix]") {
  // 120 days of trace time, a batch every 6 hours with flows of the last 6
  // hours: without a new boot, sysUptime would pass 2^32 ms (49.7 days).
  netflow_v9::NetFlowV9Encoder e({1, 1472});
  V9Reader rd;
  std::vector<std::string> want;
  std::vector<uint64_t> boots;
  const uint64_t six_h_ns = 6 * 3600'000'000'000ull;
  for (int k = 0; k < 120 * 4; ++k) {
    uint64_t start = kBaseNs + uint64_t(k) * six_h_ns;
    auto recs = make_records(8, 100 + k, start, six_h_ns - 7200'000'000'000ull);
    uint32_t export_s = uint32_t((start + six_h_ns) / 1'000'000'000);
    Messages out;
    uint64_t before = e.boot_ms();
    e.encode(recs.data(), recs.size(), export_s, false, out);
    if (e.boot_ms() != before) {
      boots.push_back(e.boot_ms());
      // a new boot to the collector: templates lead the first packet
      REQUIRE(!out.empty());
      CHECK(be(&out[0][20], 2) == 0);
    }
    for (const auto &m : out) rd.read(m);  // checks sysUptime, FIRST, LAST <= 2^31 - 1
    for (auto &s : all_v9_expect(recs)) want.push_back(s);
  }
  check_same_records(rd.flows, want);
  CHECK(boots.size() >= 4);  // 120 days / ~24 days
  CHECK(e.clamped() == 0u);
  for (size_t i = 1; i < rd.msgs.size(); ++i) CHECK(rd.msgs[i].seq == rd.msgs[i - 1].seq + 1);
}

TEST_CASE("netflow v9: tshark decodes IPv4 and IPv6 records, biflows as two, every field", "[ipfix]") {
  if (!have_tshark()) {
    WARN("skipped: tshark is not installed (apt-get install tshark)");
    return;
  }
  std::string dir = export_scratch("v9_tshark");
  auto recs = make_records(400, 7);
  netflow_v9::NetFlowV9Encoder big({1, 1472}), small({2, 200}), noreason({3, 1400, false});
  Messages a, b, c;
  encode_batches(big, recs, 1'700'003'600, a);
  encode_batches(small, recs, 1'700'003'600, b);
  encode_batches(noreason, recs, 1'700'003'600, c);
  Messages all;
  std::vector<uint32_t> times, doms, seqs;
  for (size_t i = 0; i < std::max({a.size(), b.size(), c.size()}); ++i)
    for (Messages *m : {&a, &b, &c})
      if (i < m->size()) {
        all.push_back((*m)[i]);
        times.push_back(uint32_t(be(&(*m)[i][8], 4)));
        doms.push_back(uint32_t(be(&(*m)[i][16], 4)));
        seqs.push_back(uint32_t(i));
      }
  std::string pcap = dir + "/v9.pcap";
  write_udp_pcap(pcap, all, times, 2055);

  Tshark ts = run_tshark(pcap);
  REQUIRE(ts.packets.size() == all.size());
  check_no_problems(ts);
  std::map<uint32_t, std::vector<std::string>> got;
  std::map<uint32_t, V9Reader> readers;
  for (size_t i = 0; i < ts.packets.size(); ++i) {
    INFO("packet " << i + 1);
    const TsPacket &pk = ts.packets[i];
    CHECK(pk.header.at("cflow.version") == "9");
    CHECK(num(pk.header.at("cflow.source_id")) == doms[i]);
    CHECK(num(pk.header.at("cflow.unix_secs")) == times[i]);
    CHECK(num(pk.header.at("cflow.sequence")) == seqs[i]);
    V9Reader &one = readers[doms[i]];  // templates kept per source id
    one.read(all[i]);
    size_t templates = one.msgs.back().template_records;
    CHECK(num(pk.header.at("cflow.count")) == pk.flows.size() + templates);
    for (const TsFlow &f : pk.flows) got[doms[i]].push_back(v9_from_tshark(f, pk));
  }
  check_same_records(got[1], all_v9_expect(recs));
  check_same_records(got[2], all_v9_expect(recs));
  check_same_records(got[3], all_v9_expect(recs, false));
}

TEST_CASE("ipfix, netflow v9: each message says how many flow records it completes", "[ipfix]") {
  // What an exporter counts as exported or lost per message: the records
  // of each encode() call, each counted once, in the message that carries
  // its last data record (a v9 biflow is two records, maybe in two packets).
  auto recs = make_records(500, 9);
  for (size_t max : {ipfix::min_message_size(), size_t(600), size_t(1472)}) {
    INFO("max_message " << max);
    ipfix::IpfixEncoder e({1, max});
    Messages out;
    std::vector<uint32_t> counts;
    e.encode(recs.data(), 300, 1'700'000'000, true, out, &counts);
    e.encode(recs.data() + 300, 200, 1'700'000'001, false, out, &counts);
    REQUIRE(counts.size() == out.size());
    IpfixReader rd;
    for (const auto &m : out) rd.read(m);
    uint64_t sum = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      CHECK(counts[i] == rd.msgs[i].data_records);  // one data record per flow record
      sum += counts[i];
    }
    CHECK(sum == 500);
  }
  for (size_t max : {size_t(200), size_t(1472)}) {
    INFO("max_message " << max);
    netflow_v9::NetFlowV9Encoder e({1, max});
    Messages out;
    std::vector<uint32_t> counts;
    e.encode(recs.data(), recs.size(), 1'700'000'000, true, out, &counts);
    REQUIRE(counts.size() == out.size());
    V9Reader rd;
    for (const auto &m : out) rd.read(m);
    // The v9 records in packet order, the flow records in the encoder's order
    // (IPv4 first): a record is complete in the packet of its last v9 record.
    std::vector<const FlowRecord *> order;
    for (bool v6 : {false, true})
      for (const FlowRecord &r : recs)
        if (bool(r.key.is_ipv6) == v6) order.push_back(&r);
    std::vector<uint32_t> want(out.size(), 0);
    size_t msg = 0, left = rd.msgs[0].data_records;
    for (const FlowRecord *r : order)
      for (int d = 0; d < (r->biflow && r->rev.packets ? 2 : 1); ++d) {
        while (left == 0) left = rd.msgs[++msg].data_records;
        --left;
        if (d == (r->biflow && r->rev.packets ? 1 : 0)) ++want[msg];
      }
    CHECK(counts == want);
  }
}

TEST_CASE("ipfix: the tshark check sees data sent without its template", "[ipfix]") {
  // The check above would pass vacuously if tshark's complaints went unseen.
  if (!have_tshark()) {
    WARN("skipped: tshark is not installed (apt-get install tshark)");
    return;
  }
  std::string dir = export_scratch("tshark_negative");
  auto recs = make_records(20, 8);
  ipfix::IpfixEncoder e({1, 1472});
  Messages first, second;
  e.encode(recs.data(), recs.size(), 1'700'000'000, false, first);
  e.encode(recs.data(), recs.size(), 1'700'000'001, false, second);  // no templates in these
  write_udp_pcap(dir + "/ipfix.pcap", second, std::vector<uint32_t>(second.size(), 1'700'000'001), 4739);
  Tshark ts = run_tshark(dir + "/ipfix.pcap");
  CHECK(!ts.problems.empty());
  size_t flows = 0;
  for (const TsPacket &p : ts.packets) flows += p.flows.size();
  CHECK(flows == 0);

  netflow_v9::NetFlowV9Encoder v({1, 1472});
  first.clear(), second.clear();
  v.encode(recs.data(), recs.size(), 1'700'000'000, false, first);
  v.encode(recs.data(), recs.size(), 1'700'000'001, false, second);
  write_udp_pcap(dir + "/v9.pcap", second, std::vector<uint32_t>(second.size(), 1'700'000'001), 2055);
  ts = run_tshark(dir + "/v9.pcap");
  CHECK(!ts.problems.empty());
}

TEST_CASE("ipfix: extension fields: templates 260-263 add them, texts of any length, tshark decodes every one",
          "[ipfix][labels]") {
  // Two fields laid out as the registry would: a text and a 4-octet number.
  const FlowExtSlot text{0, 80, FlowExtKind::Text}, number{81, 4, FlowExtKind::Number};
  ipfix::IpfixEncoderConfig cfg{7, 1472, {{text, 3, 32473}, {number, 2, 32473}}};
  ipfix::IpfixEncoder enc(cfg);
  auto recs = make_records(200, 11);
  std::vector<std::string> names;
  for (size_t i = 0; i < recs.size(); ++i) {
    std::string name = i % 3 == 0 ? "" : std::string(1 + i % 80, char('a' + i % 26)) + ".example";
    name = name.substr(0, 80);
    names.push_back(name);
    PacketLabels l{};
    if (!name.empty()) set_packet_label(l, text, name.data(), name.size());
    uint8_t id[4] = {0, 0, uint8_t(i >> 8), uint8_t(i)};
    if (i % 2) set_packet_label(l, number, id, 4);
    std::memset(recs[i].ext, 0, sizeof recs[i].ext);
    apply_packet_labels(l, recs[i].ext, sizeof recs[i].ext);
  }
  Messages msgs;
  encode_batches(enc, recs, 1'700'003'600, msgs);
  // Templates 256..259 + 4, and data sets of each.
  size_t templates = 0;
  std::set<uint16_t> data_sets;
  for (const auto &m : msgs) {
    CHECK(m.size() <= 1472);
    for (size_t off = 16; off < m.size();) {
      uint16_t set = uint16_t(be(&m[off], 2)), len = uint16_t(be(&m[off + 2], 2));
      REQUIRE(len >= 4);
      if (set == 2) {
        uint16_t id = uint16_t(be(&m[off + 4], 2));
        CHECK(id >= 260);
        CHECK(id <= 263);
        ++templates;
      } else {
        data_sets.insert(set);
      }
      off += len;
    }
  }
  CHECK(templates >= 1);
  CHECK(data_sets == std::set<uint16_t>{260, 261, 262, 263});
  if (!have_tshark()) {
    WARN("skipped the tshark half: tshark is not installed (apt-get install tshark)");
    return;
  }
  std::string dir = export_scratch("ipfix_ext_tshark");
  std::vector<uint32_t> times(msgs.size(), 1'700'003'600);
  write_udp_pcap(dir + "/ipfix.pcap", msgs, times, 4739);
  Tshark ts = run_tshark(dir + "/ipfix.pcap");
  check_no_problems(ts);
  // The base fields as without extensions; the text of each record, in order
  // of records per template, found among the enterprise fields tshark shows.
  std::vector<std::string> got, want = all_ipfix_expect(recs);
  std::multiset<std::string> texts_seen;
  for (const TsPacket &pk : ts.packets)
    for (const TsFlow &f : pk.flows) {
      got.push_back(ipfix_from_tshark(f));
      for (size_t i = 0; i < f.fields.size(); ++i) {
        // "Enterprise Private entry: (...) Type 3: Value (hex bytes): 65 78 ...", show "65:78:..."
        if (f.fields[i].first != "cflow.enterprise_private_entry" || f.shownames[i].find(") Type 3:") == std::string::npos)
          continue;
        std::string text, hex = f.fields[i].second;
        for (size_t h = 0; h + 1 < hex.size(); h += 3) text += char(std::stoi(hex.substr(h, 2), nullptr, 16));
        texts_seen.insert(text);
      }
    }
  check_same_records(got, want);
  for (const std::string &n : names)
    if (!n.empty()) CHECK(texts_seen.count(n) >= 1);
}

TEST_CASE("export: put_be writes a value's low bytes most significant first, at every length", "[ipfix]") {
  const uint64_t values[] = {0, 1, 0xff, 0x1234, 0xdeadbeef, 0x0102030405060708ull, ~uint64_t(0), 0x8000000000000001ull};
  for (uint64_t v : values)
    for (size_t len = 1; len <= 8; ++len) {
      uint8_t got[10], want[10];
      std::memset(got, 0xaa, sizeof got);
      std::memset(want, 0xaa, sizeof want);
      for (size_t i = 0; i < len; ++i) want[1 + i] = uint8_t(v >> (8 * (len - 1 - i)));
      flow_export::put_be(got + 1, v, len);
      INFO("value " << v << ", length " << len);
      REQUIRE(std::memcmp(got, want, sizeof got) == 0);  // and nothing written around them
    }
}

// write_data_record jumps from field to field (threaded code over the rows
// of kFields): each field of every template, in either protocol, must hold
// what its row gives for the view, at the offset the specifiers before it
// add up to, and the record end where they say.
TEST_CASE("export: each field of every template holds its row's value, at its specifiers' offset", "[ipfix]") {
  using flow_export::Kind;
  using flow_export::Protocol;
  std::mt19937_64 rng(7);
  FlowRecord r{};
  for (uint8_t &b : r.key.src_addr) b = uint8_t(rng());
  for (uint8_t &b : r.key.dst_addr) b = uint8_t(rng());
  r.key.src_port = 1234, r.key.dst_port = 0x0801, r.key.proto = 1, r.key.vlan = 0x1abc;
  for (FlowCounters *c : {&r.fwd, &r.rev}) {
    c->packets = rng() >> 8, c->octets = rng() >> 4;
    c->first_ns = 1'700'000'000'000'000'000ull + (rng() >> 34), c->last_ns = c->first_ns + (rng() >> 30);
    c->min_len = uint16_t(rng()), c->max_len = uint16_t(rng()), c->tcp_flags = uint8_t(rng());
    c->tos = uint8_t(rng()), c->min_ttl = uint8_t(rng()), c->max_ttl = uint8_t(rng());
    c->if_index = uint32_t(rng());
    for (int i = 0; i < 6; ++i) c->src_mac[i] = uint8_t(rng()), c->dst_mac[i] = uint8_t(rng());
  }
  r.reason = FlowEndReason::EndOfFlow, r.biflow = 1, r.flow_direction = 1, r.vlan_inner = 0x0321;
  r.mpls_top[0] = 0x12, r.mpls_top[1] = 0x34, r.mpls_top[2] = 0x56;
  auto time = [](uint64_t ms) { return ms ^ 0x5a5a5a5aull; };  // tells a time written through it apart

  std::vector<FlowFieldSet> optional_sets = {0, kAllFlowFields};
  for (int f = 0; f < kFlowFieldCount; ++f) optional_sets.push_back(flow_field_bit(FlowField(f)));
  int fields_checked = 0;
  for (Protocol proto : {Protocol::Ipfix, Protocol::NetFlowV9})
    for (bool ipv6 : {false, true})
      for (bool biflow : {false, true})
        for (bool reverse_view : {false, true})
          for (FlowFieldSet optional : optional_sets) {
            r.key.is_ipv6 = ipv6;
            r.key.proto = ipv6 ? 58 : 1;
            auto fields = flow_export::record_fields(ipv6, biflow, optional);
            auto specs = flow_export::field_specs(fields, proto);
            const size_t len = flow_export::data_record_length(specs);
            const flow_export::View v = flow_export::View::direction(r, reverse_view);
            const flow_export::View rev = v.with_counters(r.rev);
            std::vector<uint8_t> got(len + 16, 0xee);
            if (proto == Protocol::Ipfix)
              flow_export::write_data_record<Protocol::Ipfix>(got.data(), v, flow_export::record_ops(fields), time);
            else
              flow_export::write_data_record<Protocol::NetFlowV9>(got.data(), v, flow_export::record_ops(fields), time);
            INFO("protocol " << int(proto) << ", ipv6 " << ipv6 << ", biflow " << biflow << ", reverse view "
                             << reverse_view << ", optional " << optional);
            size_t at = 0;
            for (const flow_export::TemplateField &t : fields) {
              const flow_export::Field &f = *t.field;
              const flow_export::View &from = t.reverse ? rev : v;
              const size_t n = flow_export::length_of(f, proto);
              std::vector<uint8_t> want(n);
              switch (f.kind) {
                case Kind::Ipv4Address: std::memcpy(want.data(), f.address(from) + 12, 4); break;
                case Kind::Ipv6Address:
                case Kind::Octets: std::memcpy(want.data(), f.address(from), n); break;
                case Kind::Number:
                case Kind::TimeMs: {
                  uint64_t value = f.kind == Kind::TimeMs ? time(f.value(from)) : f.value(from);
                  for (size_t i = 0; i < n; ++i) want[i] = uint8_t(value >> (8 * (n - 1 - i)));
                  break;
                }
              }
              INFO("field " << f.name << (t.reverse ? " (reverse)" : "") << " at octet " << at);
              REQUIRE(std::vector<uint8_t>(got.begin() + long(at), got.begin() + long(at + n)) == want);
              at += n;
              ++fields_checked;
            }
            REQUIRE(at == len);
            REQUIRE(std::all_of(got.begin() + long(len), got.end(), [](uint8_t b) { return b == 0xee; }));
          }
  CHECK(fields_checked > 1000);
}
