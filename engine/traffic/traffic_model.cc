#include "engine/traffic/traffic_model.hh"

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "engine/packet/packet_meta.hh"
#include "engine/packet/rss_hash.hh"

// The distributions below must round the same way everywhere: no fused
// multiply-add contraction of separate IEEE operations.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace sluice {
namespace {

// ---------------------------------------------------------------------------
// Deterministic random numbers and distributions

inline uint64_t splitmix64(uint64_t &s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman & Vigna): the arrival process.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (auto &w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    uint64_t r = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return x << k | x >> (64 - k); }
  uint64_t s_[4];
};

// [0, 1) with 53 random bits.
inline double unit(uint64_t x) { return double(x >> 11) * 0x1p-53; }
// [0, n), by multiply-high.
inline uint64_t below(uint64_t x, uint64_t n) {
  return uint64_t((unsigned __int128)x * n >> 64);
}

constexpr double kLn2 = 0.69314718055994530942;
constexpr double kLn2Hi = 6.93147180369123816490e-01;  // fdlibm's split of ln 2
constexpr double kLn2Lo = 1.90821492927058770002e-10;

// Natural logarithm from IEEE +, -, *, / only (frexp is exact), so it gives
// the same bits everywhere; libm's log may differ in the last place. x > 0.
double det_log(double x) {
  int e;
  double m = std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2;
    e -= 1;
  }
  // ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172: 12 odd terms.
  double s = (m - 1) / (m + 1), s2 = s * s;
  double p = 1.0 / 23;
  for (int k = 21; k >= 1; k -= 2) p = p * s2 + 1.0 / k;
  return double(e) * kLn2 + 2 * s * p;
}

// e^y the same way: 2^k * e^r with |r| <= ln2 / 2, Taylor to r^18 / 18!.
double det_exp(double y) {
  if (y < -700) return 0;
  if (y > 700) return std::numeric_limits<double>::infinity();
  double k = std::floor(y * (1 / kLn2) + 0.5);
  double r = (y - k * kLn2Hi) - k * kLn2Lo;
  double p = 1;
  for (int i = 18; i >= 1; --i) p = 1 + p * r / i;
  return std::ldexp(p, int(k));
}

double det_pow(double a, double b) { return det_exp(b * det_log(a)); }

// Exponential with mean 1.
inline double exp_sample(uint64_t x) { return -det_log(1 - unit(x)); }

// ---------------------------------------------------------------------------
// The model's constants (documented in traffic_model.hh)

constexpr uint32_t kImixSizes[3] = {60, 590, 1514};  // IP 40, 576, 1500
constexpr uint32_t kMinFrame = 60;
constexpr uint32_t kMaxFrame = 9216;

constexpr uint64_t kClientPorts = 65536 - 1024;
constexpr uint64_t kClientSpace = (uint64_t(1) << 24) * kClientPorts;  // addresses x ports
constexpr uint32_t kServers = 4096;

struct PortShare {
  uint16_t port;
  uint8_t percent;
};
constexpr PortShare kTcpPorts[] = {{443, 55}, {80, 25}, {22, 4},   {8080, 4}, {25, 3},
                                   {993, 3},  {3306, 2}, {5432, 2}, {8443, 2}};
constexpr PortShare kUdpPorts[] = {{53, 35},  {443, 35}, {123, 10}, {4500, 5},
                                   {3478, 5}, {5060, 5}, {1194, 5}};

template <size_t N>
constexpr int percent_sum(const PortShare (&t)[N]) {
  int s = 0;
  for (auto &p : t) s += p.percent;
  return s;
}
static_assert(percent_sum(kTcpPorts) == 100 && percent_sum(kUdpPorts) == 100);

template <size_t N>
uint16_t pick_port(const PortShare (&t)[N], uint64_t pct) {
  for (auto &p : t) {
    if (pct < p.percent) return p.port;
    pct -= p.percent;
  }
  return t[N - 1].port;
}

constexpr uint32_t kRstPercent = 5, kOpenPercent = 5;
constexpr uint8_t kTtlClient = 64, kTtlServer = 56;
constexpr uint16_t kWindow = 64240;

constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08, kAck = 0x10;

// A bijection of [0, 2^40): odd multiplications and xorshifts, each invertible.
inline uint64_t mix40(uint64_t x) {
  constexpr uint64_t kMask = (uint64_t(1) << 40) - 1;
  x = (x * 0x9e3779b97full) & kMask;
  x ^= x >> 19;
  x = (x * 0xd6e8feb86659full) & kMask;
  x ^= x >> 21;
  x = (x * 0x4f1bbcdcbfa53ull) & kMask;
  x ^= x >> 17;
  return x;
}

// A bijection of [0, kClientSpace) (cycle walking: apply mix40 until the
// value falls in the range), scattering consecutive flows over addresses and
// ports.
inline uint64_t client_id(uint64_t i) {
  uint64_t x = i % kClientSpace;
  do x = mix40(x);
  while (x >= kClientSpace);
  return x;
}

inline void put16(uint8_t *p, uint32_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
inline void put32(uint8_t *p, uint32_t v) {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}

// Ones' complement sum of 16-bit big-endian words (n even), unfolded.
inline uint32_t sum16(const uint8_t *p, uint32_t n, uint32_t acc = 0) {
  for (uint32_t i = 0; i < n; i += 2) acc += uint32_t(p[i] << 8 | p[i + 1]);
  return acc;
}
inline uint16_t fold(uint32_t s) {
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return uint16_t(s);
}

constexpr uint8_t kMacs[2][12] = {
    // client -> server: to the router side, from the client side
    {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01},
    {0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02},
};

enum Phase : uint8_t {
  kPhaseSyn,
  kPhaseSynAck,
  kPhaseHsAck,
  kPhaseRequest,   // client data; the server's pure ACKs
  kPhaseResponse,  // server data; the client's pure ACKs
  kPhaseFin1,      // closer: FIN|ACK
  kPhaseFin2,      // other side: FIN|ACK
  kPhaseFin3,      // closer: ACK
  kPhaseRst,
  kPhaseUdp,
};
enum Close : uint8_t { kCloseFin, kCloseRst, kCloseOpen };

// Generator state of an active flow, with its ground truth: packets touch
// only this (the active flows are a small, dense array), and the truth is
// copied into GeneratedTraffic::flows when the flow ends or the trace does.
struct alignas(64) Active {
  uint64_t rng;
  uint64_t t;          // time of the next packet
  uint64_t flow;       // index into the ground truth
  uint64_t down;       // UDP: P(a later packet goes s->c) * 2^32
  uint32_t seq[2];     // next sequence number, client and server
  uint32_t left[2];    // data packets still to send: request, response (UDP: all in [0])
  uint32_t gap;        // mean gap between data and ACK packets, ns
  uint32_t half;       // half RTT, ns
  uint32_t csum;       // pseudo-header sum of both addresses (the same both ways)
  uint32_t label;      // IPv6 flow label, client -> server (server -> client: ^ 0x5a5a5)
  uint16_t ip_id[2];
  uint8_t phase;
  uint8_t close;
  uint8_t closer;      // side sending the first FIN, or the RST: 0 client, 1 server
  uint8_t unacked;     // data packets not yet acknowledged by the receiver
  bool ack_next;       // the next packet is the receiver's pure ACK
  uint8_t udp_dir;     // UDP: direction of the next packet

  TrafficFlow f;

  uint64_t rand() { return splitmix64(rng); }
  // Uniform in [gap / 2, 3 gap / 2).
  uint64_t next_gap() { return gap / 2 + ((rand() & 0xffffffffull) * gap >> 32); }
  // Half an RTT, +-10%.
  uint64_t next_half() { return half - half / 10 + ((rand() & 0xffffffffull) * (half / 5) >> 32); }
};

// Pending packets, ordered by (time, slot): one 128-bit comparison.
struct HeapItem {
  uint64_t slot;
  uint64_t t;
  unsigned __int128 key() const { return (unsigned __int128)t << 64 | slot; }
  bool operator<(const HeapItem &o) const { return key() < o.key(); }
};

class Generator {
 public:
  explicit Generator(const TrafficConfig &cfg);
  GeneratedTraffic run();

 private:
  void start_flow(uint64_t t0);
  void emit(Active &a);
  bool advance(Active &a);  // false: the flow sent its last packet
  bool close(Active &a);
  void write(Active &a, int dir, uint8_t flags, bool data);
  uint32_t pick_size(uint64_t r) const {
    if (imix_) {
      uint64_t k = below(r, 12);
      return kImixSizes[k < 7 ? 0 : k < 11 ? 1 : 2];
    }
    return cfg_.sizes[below(r, cfg_.sizes.size())];
  }
  void sift_down(size_t i);
  void sift_up(size_t i);

  const TrafficConfig &cfg_;
  bool imix_;
  uint32_t l2_;
  uint64_t end_;
  double pareto_c_;       // 1 - (L/H)^alpha
  double pareto_exp_;     // -1 / alpha
  double rtt_lo_;
  double rtt_ln_ratio_;
  double max_flow_span_;  // duration / 10

  GeneratedTraffic out_;
  std::vector<Active> slots_;
  std::vector<uint32_t> free_;
  std::vector<HeapItem> heap_;
  uint64_t active_ = 0;
};

Generator::Generator(const TrafficConfig &cfg) : cfg_(cfg) {
  imix_ = cfg.sizes.empty();
  l2_ = cfg.vlan ? 18 : 14;
  end_ = cfg.start_ns + cfg.duration_ns;
  double hi = double(cfg.flow_size_max) + 1;
  pareto_c_ = 1 - det_pow(1 / hi, cfg.flow_size_alpha);
  pareto_exp_ = -1 / cfg.flow_size_alpha;
  double rtt_hi = cfg.flow_span_ns ? double(cfg.flow_span_ns) / 4 : std::min(100e6, double(cfg.duration_ns) / 200);
  rtt_lo_ = std::max(1.0, rtt_hi / 50);
  rtt_hi = std::max(rtt_hi, rtt_lo_);
  rtt_ln_ratio_ = det_log(rtt_hi / rtt_lo_);
  max_flow_span_ = cfg.flow_span_ns ? double(cfg.flow_span_ns) : double(cfg.duration_ns) / 10;
  out_.lanes.resize(cfg.lanes);
}

void Generator::start_flow(uint64_t t0) {
  uint64_t idx = out_.flows.size();
  out_.flows.emplace_back();  // filled when the flow ends
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = uint32_t(slots_.size());
    slots_.emplace_back();
  }
  Active &a = slots_[slot];
  a = Active{};
  a.rng = cfg_.seed * 0xd1b54a32d192ed03ull ^ (idx + 1) * 0x9e3779b97f4a7c15ull;
  a.flow = idx;
  a.t = t0;
  TrafficFlow &f = a.f;

  bool v6 = unit(a.rand()) < cfg_.ipv6;
  bool udp = unit(a.rand()) < cfg_.udp;
  uint64_t cid = client_id(idx);
  uint32_t caddr = uint32_t(cid / kClientPorts);
  double us = unit(a.rand());
  uint32_t server = std::min(kServers - 1, uint32_t(double(kServers) * us * us)) + 1;

  std::memset(f.src_addr, 0, 16);
  std::memset(f.dst_addr, 0, 16);
  if (v6) {
    const uint8_t prefix[4] = {0x20, 0x01, 0x0d, 0xb8};
    std::memcpy(f.src_addr, prefix, 4);
    f.src_addr[5] = uint8_t(caddr >> 16);
    f.src_addr[6] = uint8_t(caddr >> 8);
    f.src_addr[7] = uint8_t(caddr);
    f.src_addr[15] = 1;
    std::memcpy(f.dst_addr, prefix, 4);
    f.dst_addr[4] = f.dst_addr[5] = 0xff;
    put16(f.dst_addr + 14, server);
  } else {
    f.src_addr[10] = f.src_addr[11] = f.dst_addr[10] = f.dst_addr[11] = 0xff;
    put32(f.src_addr + 12, 0x0a000000u | caddr);
    put32(f.dst_addr + 12, 0xac100000u + server);
  }
  f.src_port = uint16_t(1024 + cid % kClientPorts);
  f.dst_port = udp ? pick_port(kUdpPorts, below(a.rand(), 100))
                   : pick_port(kTcpPorts, below(a.rand(), 100));
  f.proto = udp ? 17 : 6;
  f.is_ipv6 = v6;
  f.vlan = cfg_.vlan;
  f.end = FlowEnd::None;

  PacketMeta m{};
  std::memcpy(m.src_addr, f.src_addr, 16);
  std::memcpy(m.dst_addr, f.dst_addr, 16);
  m.src_port = f.src_port;
  m.dst_port = f.dst_port;
  m.ip_proto = f.proto;
  m.flags = uint16_t((v6 ? PacketMeta::kIpv6 : PacketMeta::kIpv4) | PacketMeta::kHasL4);
  f.rss_hash = symmetric_hash(m);
  f.lane = lane_for(f.rss_hash, cfg_.lanes);

  // Flow size, RTT, gaps.
  bool dns = udp && f.dst_port == 53;
  double x = det_pow(1 - unit(a.rand()) * pareto_c_, pareto_exp_);  // [1, max + 1)
  uint64_t n = dns ? 2 : std::clamp<uint64_t>(uint64_t(x), 1, cfg_.flow_size_max);
  double rtt = rtt_lo_ * det_exp(unit(a.rand()) * rtt_ln_ratio_);
  double gap = cfg_.flow_span_ns ? max_flow_span_ / double(n + 1) : std::min(rtt / 8, max_flow_span_ / double(n + 1));
  a.gap = uint32_t(gap);
  a.half = uint32_t(rtt / 2);

  uint64_t r = a.rand();
  a.ip_id[0] = uint16_t(r);
  a.ip_id[1] = uint16_t(r >> 16);
  a.label = uint32_t(r >> 32) & 0xfffff;
  a.csum = v6 ? sum16(f.src_addr, 16, sum16(f.dst_addr, 16)) : sum16(f.src_addr + 12, 4, sum16(f.dst_addr + 12, 4));

  if (udp) {
    a.phase = kPhaseUdp;
    a.left[0] = uint32_t(n);
    a.udp_dir = 0;
    a.down = dns ? uint64_t(1) << 32 : uint64_t((0.5 + 0.4 * unit(a.rand())) * 0x1p32);
  } else {
    a.phase = kPhaseSyn;
    uint64_t nc = 1 + uint64_t(double(n - 1) * (0.25 * unit(a.rand())));
    a.left[0] = uint32_t(nc);
    a.left[1] = uint32_t(n - nc);
    uint64_t isn = a.rand();
    a.seq[0] = uint32_t(isn);
    a.seq[1] = uint32_t(isn >> 32);
    uint64_t pct = below(a.rand(), 100);
    a.close = pct < kRstPercent                  ? kCloseRst
              : pct < kRstPercent + kOpenPercent ? kCloseOpen
                                                 : kCloseFin;
    a.closer = a.close == kCloseRst ? uint8_t(a.rand() & 1) : a.left[1] > 0 ? 1 : 0;
  }

  heap_.push_back({slot, t0});
  sift_up(heap_.size() - 1);
  ++active_;
}

void Generator::write(Active &a, int dir, uint8_t flags, bool data) {
  TrafficFlow &f = a.f;
  const bool tcp = f.proto == 6;
  const uint32_t l3 = f.is_ipv6 ? 40 : 20, l4 = tcp ? 20 : 8;
  const uint32_t hdr = l2_ + l3 + l4;
  uint32_t frame, payload;
  if (data) {
    frame = std::max(pick_size(a.rand()), std::max(kMinFrame, hdr + 1));
    payload = frame - hdr;
  } else {
    frame = std::max(kMinFrame, hdr);
    payload = 0;
  }
  const uint32_t ip_len = l3 + l4 + payload;
  GeneratedLane &lane = out_.lanes[f.lane];
  const uint64_t offset = lane.bytes.size();
  uint8_t *p = lane.bytes.append(frame);
  lane.packets.push_back(GeneratedPacket{a.t, offset, frame, f.rss_hash});

  // Ethernet (+ 802.1Q)
  std::memcpy(p, kMacs[dir], 12);
  if (cfg_.vlan) {
    put16(p + 12, 0x8100);
    put16(p + 14, cfg_.vlan);
  }
  put16(p + l2_ - 2, f.is_ipv6 ? 0x86dd : 0x0800);

  // IP
  uint8_t *ip = p + l2_;
  const uint8_t *src = dir ? f.dst_addr : f.src_addr;
  const uint8_t *dst = dir ? f.src_addr : f.dst_addr;
  const uint8_t ttl = dir ? kTtlServer : kTtlClient;
  if (f.is_ipv6) {
    put32(ip, 0x60000000u | (dir ? a.label ^ 0x5a5a5 : a.label));
    put16(ip + 4, ip_len - 40);
    ip[6] = f.proto;
    ip[7] = ttl;
    std::memcpy(ip + 8, src, 16);
    std::memcpy(ip + 24, dst, 16);
  } else {
    ip[0] = 0x45;
    ip[1] = 0;
    put16(ip + 2, ip_len);
    put16(ip + 4, a.ip_id[dir]++);
    put16(ip + 6, 0x4000);  // DF
    ip[8] = ttl;
    ip[9] = f.proto;
    ip[10] = ip[11] = 0;
    std::memcpy(ip + 12, src + 12, 4);
    std::memcpy(ip + 16, dst + 12, 4);
    put16(ip + 10, uint16_t(~fold(sum16(ip, 20))));
  }

  // TCP / UDP; the payload and the Ethernet padding are zeros, so the
  // checksum covers the pseudo-header and the L4 header only.
  uint8_t *l4p = ip + l3;
  const uint16_t sport = dir ? f.dst_port : f.src_port;
  const uint16_t dport = dir ? f.src_port : f.dst_port;
  put16(l4p, sport);
  put16(l4p + 2, dport);
  uint32_t csum = a.csum + f.proto + l4 + payload;
  if (tcp) {
    const int other = dir ^ 1;
    put32(l4p + 4, a.seq[dir]);
    put32(l4p + 8, flags & kAck ? a.seq[other] : 0);
    l4p[12] = 0x50;
    l4p[13] = flags;
    put16(l4p + 14, flags & kRst ? 0 : kWindow);
    put32(l4p + 16, 0);  // checksum, urgent pointer
    a.seq[dir] += payload + (flags & kSyn ? 1 : 0) + (flags & kFin ? 1 : 0);
    put16(l4p + 16, uint16_t(~fold(sum16(l4p, 20, csum))));
  } else {
    put16(l4p + 4, 8 + payload);
    put16(l4p + 6, 0);
    uint16_t c = uint16_t(~fold(sum16(l4p, 8, csum)));
    put16(l4p + 6, c ? c : 0xffff);
  }
  std::memset(l4p + l4, 0, frame - hdr);

  TrafficFlowDirection &d = dir ? f.rev : f.fwd;
  if (d.packets == 0) d.first_ns = a.t;
  d.last_ns = a.t;
  ++d.packets;
  d.bytes += ip_len;
  d.tcp_flags |= flags;
  if (flags & kRst)
    f.end = FlowEnd::Rst;
  else if ((flags & kFin) && f.end == FlowEnd::None)
    f.end = FlowEnd::Fin;
  ++out_.packets;
  out_.bytes += frame;
}

void Generator::emit(Active &a) {
  switch (a.phase) {
    case kPhaseSyn: return write(a, 0, kSyn, false);
    case kPhaseSynAck: return write(a, 1, kSyn | kAck, false);
    case kPhaseHsAck: return write(a, 0, kAck, false);
    case kPhaseRequest:
    case kPhaseResponse: {
      int sender = a.phase == kPhaseRequest ? 0 : 1;
      if (a.ack_next) return write(a, sender ^ 1, kAck, false);
      return write(a, sender, a.left[sender] == 1 ? kAck | kPsh : kAck, true);
    }
    case kPhaseFin1: return write(a, a.closer, kFin | kAck, false);
    case kPhaseFin2: return write(a, a.closer ^ 1, kFin | kAck, false);
    case kPhaseFin3: return write(a, a.closer, kAck, false);
    case kPhaseRst: return write(a, a.closer, kRst | kAck, false);
    case kPhaseUdp: return write(a, a.udp_dir, 0, true);
  }
}

bool Generator::close(Active &a) {
  switch (a.close) {
    case kCloseFin: a.phase = kPhaseFin1; break;
    case kCloseRst: a.phase = kPhaseRst; break;
    default: return false;
  }
  a.t += a.next_gap();
  return true;
}

bool Generator::advance(Active &a) {
  switch (a.phase) {
    case kPhaseSyn:
      a.phase = kPhaseSynAck;
      a.t += a.next_half();
      return true;
    case kPhaseSynAck:
      a.phase = kPhaseHsAck;
      a.t += a.next_half();
      return true;
    case kPhaseHsAck:
      a.phase = kPhaseRequest;
      a.t += a.next_gap();
      return true;
    case kPhaseRequest:
    case kPhaseResponse: {
      int sender = a.phase == kPhaseRequest ? 0 : 1;
      if (a.ack_next) {
        a.ack_next = false;
        a.unacked = 0;
        if (a.left[sender] == 0) return close(a);
        a.t += a.next_gap();
        return true;
      }
      --a.left[sender];
      ++a.unacked;
      if (a.left[sender] > 0) {
        if (a.unacked == 2) a.ack_next = true;
        a.t += a.next_gap();
        return true;
      }
      if (sender == 0 && a.left[1] > 0) {  // the response acknowledges the request
        a.phase = kPhaseResponse;
        a.unacked = 0;
        a.t += a.next_half();
        return true;
      }
      if (a.unacked) {
        a.ack_next = true;
        a.t += a.next_gap();
        return true;
      }
      return close(a);
    }
    case kPhaseFin1:
      a.phase = kPhaseFin2;
      a.t += a.next_half();
      return true;
    case kPhaseFin2:
      a.phase = kPhaseFin3;
      a.t += a.next_half();
      return true;
    case kPhaseFin3:
    case kPhaseRst: return false;
    case kPhaseUdp: {
      if (--a.left[0] == 0) return false;
      uint8_t next = (a.rand() & 0xffffffffull) < a.down ? 1 : 0;
      a.t += a.udp_dir == 0 && next == 1 ? a.next_half() : a.next_gap();
      a.udp_dir = next;
      return true;
    }
  }
  return false;
}

// A 4-ary min-heap: half the levels of a binary one, and the four children
// share a cache line.
void Generator::sift_up(size_t i) {
  HeapItem x = heap_[i];
  while (i > 0) {
    size_t parent = (i - 1) / 4;
    if (!(x < heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = x;
}

void Generator::sift_down(size_t i) {
  const size_t n = heap_.size();
  HeapItem x = heap_[i];
  for (;;) {
    size_t c = 4 * i + 1;
    if (c >= n) break;
    size_t best = c;
    const size_t last = std::min(c + 4, n);
    for (size_t k = c + 1; k < last; ++k)
      if (heap_[k] < heap_[best]) best = k;
    if (!(heap_[best] < x)) break;
    heap_[i] = heap_[best];
    i = best;
  }
  heap_[i] = x;
}

GeneratedTraffic Generator::run() {
  // Sizing: generous reservations only cost address space (realloc'd blocks
  // are touched as they fill); shrink_to_fit returns the rest at the end.
  const double est_packets = double(traffic_packet_count_estimate(cfg_));
  const double est_flows = double(cfg_.new_flows_per_s) * double(cfg_.duration_ns) / 1e9;
  // Capped (growth past the caps is by realloc / vector doubling), so that a
  // huge estimate cannot fail on a machine with strict overcommit.
  out_.flows.reserve(size_t(std::min(est_flows * 1.02 + 64, double(1 << 23))));
  const double mean_frame = imix_ ? 360 : [&] {
    double s = 0;
    for (uint32_t v : cfg_.sizes) s += v;
    return s / double(cfg_.sizes.size());
  }();
  const double per_lane = est_packets * 1.25 / double(cfg_.lanes) + 64;
  for (auto &lane : out_.lanes) {
    lane.packets.reserve(size_t(std::min(per_lane, double(1 << 26))));
    lane.bytes.reserve(size_t(std::min(per_lane * mean_frame, double(1 << 30))));
  }

  Xoshiro256 arrivals(cfg_.seed ^ 0x5ee1a7e5a1c0ffeeull);
  const double mean_gap = 1e9 / double(cfg_.new_flows_per_s);
  double offset = 0;          // Poisson time of the next arrival, ns after start
  uint64_t poisson = cfg_.start_ns;
  uint64_t gate = 0;          // a slot freed at the limit: no start before this
  bool arriving = true;

  for (;;) {
    if (arriving && active_ < cfg_.flows) {
      uint64_t t0 = std::max(poisson, gate);
      if (t0 > end_) {
        arriving = false;
      } else if (heap_.empty() || t0 <= heap_[0].t) {
        if (t0 > poisson) ++out_.delayed_flows;
        start_flow(t0);
        offset += exp_sample(arrivals.next()) * mean_gap;
        if (offset > double(cfg_.duration_ns))
          arriving = false;
        else
          poisson = cfg_.start_ns + uint64_t(offset);
        continue;
      }
    }
    if (heap_.empty() || heap_[0].t > end_) break;
    const uint32_t slot = uint32_t(heap_[0].slot);
    Active &a = slots_[slot];
    const uint64_t t = a.t;
    emit(a);
    if (advance(a)) {
      heap_[0].t = a.t;
      sift_down(0);
    } else {
      if (active_ == cfg_.flows) gate = t + 1;
      --active_;
      out_.flows[a.flow] = a.f;
      free_.push_back(slot);
      heap_[0] = heap_.back();
      heap_.pop_back();
      if (!heap_.empty()) sift_down(0);
    }
  }

  for (const HeapItem &h : heap_) out_.flows[slots_[h.slot].flow] = slots_[h.slot].f;  // cut
  for (auto &lane : out_.lanes) {
    lane.packets.shrink_to_fit();
    lane.bytes.shrink_to_fit();
  }
  return std::move(out_);
}

// Continuous mean of the bounded Pareto on [1, hi).
double pareto_mean(double alpha, double hi) {
  if (std::fabs(alpha - 1) < 1e-9) return hi / (hi - 1) * det_log(hi);
  double c = 1 - det_pow(1 / hi, alpha);
  return alpha / (alpha - 1) * (1 - det_pow(hi, 1 - alpha)) / c;
}

std::string fmt_count(uint64_t v) {
  char b[32];
  if (v >= 1000000 && v % 1000000 == 0)
    std::snprintf(b, sizeof b, "%lluM", (unsigned long long)(v / 1000000));
  else if (v >= 1000 && v % 1000 == 0)
    std::snprintf(b, sizeof b, "%lluK", (unsigned long long)(v / 1000));
  else
    std::snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  return b;
}

}  // namespace

void validate(const TrafficConfig &cfg) {
  auto bad = [](const std::string &what) { throw std::invalid_argument("TrafficConfig: " + what); };
  if (cfg.flows < 1) bad("flows must be at least 1");
  if (cfg.new_flows_per_s < 1) bad("new_flows_per_s must be at least 1");
  if (cfg.duration_ns < 1) bad("duration_ns must be at least 1");
  if (cfg.lanes < 1) bad("lanes must be at least 1");
  if (cfg.vlan > 4094) bad("vlan must be 0 (untagged) or 1..4094");
  if (!(cfg.ipv6 >= 0 && cfg.ipv6 <= 1)) bad("ipv6 must be a share in [0, 1]");
  if (!(cfg.udp >= 0 && cfg.udp <= 1)) bad("udp must be a share in [0, 1]");
  if (!(cfg.flow_size_alpha > 0.05 && cfg.flow_size_alpha <= 100)) bad("flow_size_alpha must be in (0.05, 100]");
  if (cfg.flow_size_max < 1) bad("flow_size_max must be at least 1");
  if (cfg.flow_span_ns > 8'000'000'000ull) bad("flow_span_ns must be at most 8 s");
  for (uint32_t s : cfg.sizes)
    if (s < kMinFrame || s > kMaxFrame)
      bad("frame size " + std::to_string(s) + " outside 60..9216");
  if (cfg.start_ns > (std::numeric_limits<uint64_t>::max() >> 1) ||
      cfg.duration_ns > (std::numeric_limits<uint64_t>::max() >> 2))
    bad("start_ns + duration_ns too large");
}

std::string describe(const TrafficConfig &cfg) {
  std::string s = fmt_count(cfg.new_flows_per_s) + " flows/s up to " + fmt_count(cfg.flows) +
                  " active, ";
  char b[64];
  std::snprintf(b, sizeof b, "%g s, ", double(cfg.duration_ns) / 1e9);
  s += b;
  if (cfg.sizes.empty()) {
    s += "imix";
  } else {
    for (size_t i = 0; i < cfg.sizes.size(); ++i) s += (i ? "/" : "") + std::to_string(cfg.sizes[i]);
    s += "B";
  }
  std::snprintf(b, sizeof b, ", ipv6 %g%%, udp %g%%", cfg.ipv6 * 100, cfg.udp * 100);
  s += b;
  s += cfg.vlan ? ", vlan " + std::to_string(cfg.vlan) : std::string(", untagged");
  s += ", " + std::to_string(cfg.lanes) + (cfg.lanes == 1 ? " lane" : " lanes");
  s += ", seed " + std::to_string(cfg.seed);
  std::snprintf(b, sizeof b, ", flow sizes pareto(%g, max %u)", cfg.flow_size_alpha, cfg.flow_size_max);
  s += b;
  if (cfg.flow_span_ns) {
    std::snprintf(b, sizeof b, ", flows spread over %g s", double(cfg.flow_span_ns) / 1e9);
    s += b;
  }
  return s;
}

uint64_t traffic_packet_count_estimate(const TrafficConfig &cfg) {
  double flows = double(cfg.new_flows_per_s) * double(cfg.duration_ns) / 1e9;
  double n = std::max(1.0, pareto_mean(cfg.flow_size_alpha, double(cfg.flow_size_max) + 1) - 0.5);
  // TCP: handshake, data plus an ACK per two data packets, 90% 3-packet FIN
  // close, 5% RST. UDP: 35% DNS (2 packets), the rest n.
  double tcp = 3 + 1.5 * n + 0.9 * 3 + 0.05;
  double udp = 0.35 * 2 + 0.65 * n;
  return uint64_t(flows * (cfg.udp * udp + (1 - cfg.udp) * tcp));
}

const char *flow_end_name(FlowEnd e) {
  switch (e) {
    case FlowEnd::None: return "none";
    case FlowEnd::Fin: return "fin";
    case FlowEnd::Rst: return "rst";
  }
  return "?";
}

GeneratedTraffic generate_traffic(const TrafficConfig &cfg) {
  validate(cfg);
  return Generator(cfg).run();
}

}  // namespace sluice
