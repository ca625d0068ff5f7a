// The traffic model behind TrafficGen: deterministic synthetic traffic,
// generated into memory once at setup and replayed lane by lane. It knows the
// flows it made (TrafficFlow), so tests and flow meters can be checked against
// that ground truth. No DPDK here: a pure library.
//
// Determinism. The same TrafficConfig gives the same bytes, records and flows
// on any machine: the generator uses its own PRNGs (xoshiro256** for flow
// arrivals, one splitmix64 stream per flow, seeded from (seed, flow index))
// and its own distributions, built on integer arithmetic and on IEEE-754
// +, -, *, / only (its own log and exp, FP contraction off), never std::
// distributions or libm transcendental functions. Changing `lanes` changes
// only how the same flows are split; changing `vlan` or `sizes` changes frame
// lengths (so byte counts and sequence numbers), not the flows, their packets
// or timestamps.
//
// The model, in trace time:
//
// * Flow arrivals: a Poisson process at new_flows_per_s. The first flow starts
//   at start_ns exactly. A flow is active from its first packet to its last.
//   When `flows` flows are active, the next arrival waits until one ends and
//   starts 1 ns after that flow's last packet (later arrivals queue behind it
//   in order, keeping their Poisson times when those are later): the limit
//   delays flows, it never shortens them. GeneratedTraffic::delayed_flows
//   counts the flows that waited. No packet is later than start_ns +
//   duration_ns: flows still going then are cut (their remaining packets are
//   simply not generated), and arrivals after it never start.
// * Flow kind, drawn per flow: IPv6 with probability `ipv6`, else IPv4; UDP
//   with probability `udp`, else TCP. Every packet carries an 802.1Q tag with
//   `vlan` when it is non-zero.
// * Addresses and ports (5-tuples never repeat: the client address and port
//   are a bijection of the flow index, for up to 2^24 * 64512 flows):
//   clients 10.0.0.0/8 or 2001:db8:XX:XXXX::1, client ports 1024..65535;
//   servers 172.16.0.1..172.16.16.0 or 2001:db8:ffff::1..::1000, 4096 of them
//   with skewed popularity (index = 4096 * u^2). Server ports: TCP 443 55%,
//   80 25%, 22 4%, 8080 4%, 25 3%, 993 3%, 3306 2%, 5432 2%, 8443 2%; UDP 53
//   35%, 443 35%, 123 10%, 4500, 3478, 5060, 1194 5% each.
// * Flow size: n data packets from a bounded Pareto distribution, shape
//   flow_size_alpha (default 1.0), from 1 to flow_size_max (default 10000):
//   n = floor(X), X in [1, max + 1). Mean about 9 data packets; the top 10%
//   of flows carry about 60% of the packets. UDP flows to port 53 are one
//   query and one response instead.
// * Timing: each flow has an RTT, log-uniform in [rtt_max / 50, rtt_max] with
//   rtt_max = min(100 ms, duration / 200) (1..50 ms for 10 s), and a mean
//   gap g = min(RTT / 8, (duration / 10) / (n + 1)) between consecutive data
//   and ACK packets, so even the largest flows last about 15% of the trace.
//   A gap is uniform in [g/2, 3g/2); a step that waits for the other side
//   (handshake, FIN exchange, request -> response turnaround) takes half an
//   RTT, +-10%. Timestamps are integer ns and may repeat.
//   With flow_span_ns S set, flows are long instead: rtt_max = S / 4 and
//   g = S / (n + 1), so every flow's packets are spread over about S (a bit
//   more with the waits for the other side): with S near the duration and
//   `flows` reached early, that many flows are active at once for the
//   whole trace, their packets interleaved (a flow table's hard case: the
//   flows a packet meets are anywhere in it).
// * TCP (data offset 5, no options, window 64240, DF set, TTL/hop limit 64
//   from clients and 56 from servers):
//     SYN c->s, SYN|ACK s->c, ACK c->s;
//     request: 1 + floor((n - 1) * f) data packets c->s, f uniform in
//       [0, 0.25), the last one with PSH; the server ACKs every second one
//       (pure ACK) and the odd last one only if it has no response to send;
//     response: the other data packets s->c (mostly server to client), the
//       first half an RTT after the request, the last with PSH; the client
//       ACKs every second one and the odd last one;
//     then, per flow: 90% FIN|ACK from the side that sent the last data,
//       FIN|ACK back, ACK (end Fin); 5% one RST|ACK from either side (end
//       Rst); 5% nothing (left open, end None).
//   Data packets carry ACK. Sequence numbers start at random ISNs and advance
//   by the payload (and 1 for SYN and FIN); every packet but the SYN
//   acknowledges the peer's next sequence number.
// * UDP: n packets, the first c->s; each later one goes s->c with a per-flow
//   probability in [0.5, 0.9) (port 53: query then response). A change from
//   c->s to s->c waits half an RTT. UDP flows always end None.
// * Frame sizes (Ethernet, without FCS). A data packet picks a size: IMIX
//   (empty `sizes`) is the simple IMIX, 7:4:1 of IP packets of 40, 576 and
//   1500 bytes, i.e. frames of 60, 590 and 1514 bytes (64, 594, 1518 on the
//   wire with FCS); a list picks each size with equal probability. The frame
//   is then at least 60 bytes and at least the headers plus one payload byte:
//   untagged IPv4+TCP data is >= 60, IPv6+TCP+VLAN data >= 79. Control
//   packets (SYN, SYN|ACK, pure ACK, FIN, RST) carry no payload and use the
//   minimum frame, max(60, headers): the IP length then covers the headers
//   only and Ethernet padding fills the frame (IPv4+TCP: 40 IP bytes in a
//   60-byte frame). For every packet with payload, the IP length is the frame
//   length minus the L2 header (14 or 18).
// * Packet contents: Ethernet II from 02:00:00:00:00:01 (client side) to
//   02:00:00:00:00:02 and back; IPv4 with a valid header checksum, ID counting
//   per direction; IPv6 with a per-flow flow label and payload length; TCP and
//   UDP with correct checksums. Payload and padding bytes are zero.
// * Lanes: a flow's packets all go to lane lane_for(symmetric_hash(meta),
//   lanes), meta being what parse_packet gives for them (both directions hash
//   alike), so the split is what the runtime's software RSS does. Within a lane
//   packets are in non-decreasing timestamp order.
//
// Cost: 16 bytes of GeneratedPacket per packet plus its frame bytes, 128
// bytes of TrafficFlow per flow, and about 200 bytes of generator state per
// active flow. Generation runs an event loop over the active flows (a 4-ary
// heap keyed by (time, slot)) and writes each frame once: about 6-7 M
// packets/s of CPU time on one core, plus the kernel's cost of first touching
// the memory.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace sluice {

struct TrafficConfig {
  uint64_t flows = 10000;           // most flows active at once (>= 1)
  uint64_t new_flows_per_s = 1000;  // flow arrival rate in trace time (>= 1)
  std::vector<uint32_t> sizes;      // data frame sizes 60..9216 (Ethernet, no FCS); empty = IMIX
  uint64_t duration_ns = 10'000'000'000ull;  // span of trace time, >= 1
  uint64_t seed = 1;
  double ipv6 = 0.1;  // share of flows over IPv6, 0..1
  double udp = 0.3;   // share of flows over UDP, 0..1
  uint16_t vlan = 0;  // 0 = untagged, else this 802.1Q VLAN id (1..4094) on every packet
  uint32_t lanes = 1; // >= 1
  // Absolute time of the first packet: 2023-11-14 22:13:20 UTC.
  uint64_t start_ns = 1'700'000'000ull * 1'000'000'000ull;
  double flow_size_alpha = 1.0;      // Pareto shape of data packets per flow, > 0
  uint32_t flow_size_max = 10000;    // most data packets in a flow, >= 1
  uint64_t flow_span_ns = 0;         // 0: timing from the RTT (above); else flows spread over this, <= 8 s
};

// Throws std::invalid_argument, naming the field, for a config out of range.
void validate(const TrafficConfig &cfg);

// One line for logs: "1000 flows/s up to 10000 active, 10 s, imix, ...".
std::string describe(const TrafficConfig &cfg);

// Rough expected packet count (within about 20% for long traces; ignores the
// flows cut at the end and the concurrency limit). Cheap: for sizing buffers.
uint64_t traffic_packet_count_estimate(const TrafficConfig &cfg);

enum class FlowEnd : uint8_t {
  None,  // UDP, TCP left open, or cut at trace end before any FIN or RST
  Fin,   // a FIN was sent (the close may be cut short by the trace end)
  Rst,   // an RST was sent
};
const char *flow_end_name(FlowEnd e);  // "none", "fin", "rst"

// What one direction of a flow carried.
struct TrafficFlowDirection {
  uint64_t packets = 0;
  uint64_t bytes = 0;     // IP-level: the sum of the packets' IP lengths (PacketMeta::ip_total_length)
  uint64_t first_ns = 0;  // first and last packet; 0 when packets == 0
  uint64_t last_ns = 0;
  uint8_t tcp_flags = 0;  // OR of the TCP flags of the packets; 0 for UDP
  bool operator==(const TrafficFlowDirection &) const = default;
};

// Ground truth of one flow: its key in the forward direction (forward =
// initiator/client -> responder/server) and what each direction carried.
struct TrafficFlow {
  uint8_t src_addr[16];  // client; network byte order, IPv4 v4-mapped (::ffff:a.b.c.d) as in PacketMeta
  uint8_t dst_addr[16];  // server
  uint16_t src_port;     // client port, host byte order
  uint16_t dst_port;     // server port
  uint8_t proto;         // 6 (TCP) or 17 (UDP)
  bool is_ipv6;
  uint16_t vlan;         // 0 = untagged
  uint32_t lane;
  uint32_t rss_hash;     // symmetric_hash() of the key: the same both ways
  FlowEnd end;
  TrafficFlowDirection fwd;  // client -> server
  TrafficFlowDirection rev;  // server -> client

  uint64_t packets() const { return fwd.packets + rev.packets; }
  uint64_t bytes() const { return fwd.bytes + rev.bytes; }
  // Over both directions (the forward one always has the first packet).
  uint64_t first_ns() const { return fwd.first_ns; }
  uint64_t last_ns() const { return fwd.last_ns > rev.last_ns ? fwd.last_ns : rev.last_ns; }
  bool operator==(const TrafficFlow &) const = default;
};

// A growable array of trivially copyable values in one malloc'd block. Growth
// is by realloc, which moves large blocks by remapping their pages instead of
// copying them, and new elements are not initialised: cheap for hundreds of
// millions of packets. Move-only.
template <class T>
class TrafficBuffer {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  TrafficBuffer() = default;
  TrafficBuffer(const TrafficBuffer &) = delete;
  TrafficBuffer &operator=(const TrafficBuffer &) = delete;
  TrafficBuffer(TrafficBuffer &&o) noexcept
      : p_(std::exchange(o.p_, nullptr)), size_(std::exchange(o.size_, 0)),
        cap_(std::exchange(o.cap_, 0)) {}
  TrafficBuffer &operator=(TrafficBuffer &&o) noexcept {
    if (this != &o) {
      std::free(p_);
      p_ = std::exchange(o.p_, nullptr);
      size_ = std::exchange(o.size_, 0);
      cap_ = std::exchange(o.cap_, 0);
    }
    return *this;
  }
  ~TrafficBuffer() { std::free(p_); }

  T *data() { return p_; }
  const T *data() const { return p_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  T &operator[](size_t i) { return p_[i]; }
  const T &operator[](size_t i) const { return p_[i]; }
  T *begin() { return p_; }
  T *end() { return p_ + size_; }
  const T *begin() const { return p_; }
  const T *end() const { return p_ + size_; }

  void reserve(size_t n) {
    if (n > cap_) resize_block(n);
  }
  // Appends n uninitialised elements and returns the first.
  T *append(size_t n) {
    if (size_ + n > cap_) resize_block(std::max(size_ + n, cap_ + cap_ / 2 + 4096 / sizeof(T)));
    T *r = p_ + size_;
    size_ += n;
    return r;
  }
  void push_back(const T &v) { *append(1) = v; }
  void shrink_to_fit() {
    if (size_ < cap_ && size_ > 0) resize_block(size_);
  }

 private:
  void resize_block(size_t n) {
    void *q = std::realloc(p_, n * sizeof(T));
    if (!q) throw std::bad_alloc();
    p_ = static_cast<T *>(q);
    cap_ = n;
  }
  T *p_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
};

// One packet of a lane: the frame is bytes[offset, offset + length) of the
// lane's arena. 16 bytes.
struct GeneratedPacket {
  uint64_t ts_ns;          // absolute trace time
  uint64_t offset : 48;    // into GeneratedLane::bytes
  uint64_t length : 16;    // frame length, Ethernet without FCS
  // symmetric_hash() of the frame's headers, as a NIC's RSS would give it
  // (computed once per flow here, so a replay does not spend a lane's cpu
  // on it: a NIC computes it in hardware).
  uint32_t rss_hash;
};
static_assert(sizeof(GeneratedPacket) == 24);

// The packets of one lane, in non-decreasing time order; frames are stored
// back to back in that order.
struct GeneratedLane {
  TrafficBuffer<uint8_t> bytes;
  TrafficBuffer<GeneratedPacket> packets;

  size_t size() const { return packets.size(); }
  const uint8_t *frame(size_t i) const { return bytes.data() + packets[i].offset; }
};

struct GeneratedTraffic {
  std::vector<GeneratedLane> lanes;  // cfg.lanes of them
  std::vector<TrafficFlow> flows;    // in start order; only flows that sent a packet
  uint64_t packets = 0;              // over all lanes
  uint64_t bytes = 0;                // frame bytes over all lanes (what the arenas hold)
  uint64_t delayed_flows = 0;        // flows whose start waited for the concurrency limit
};

// Generates the whole trace (validate()s the config first).
GeneratedTraffic generate_traffic(const TrafficConfig &cfg);

}  // namespace sluice
