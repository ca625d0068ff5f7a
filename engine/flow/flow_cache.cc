#include "engine/flow/flow_cache.hh"

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "engine/flow/page_populator.hh"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace sluice {

namespace {

constexpr uint8_t kTcpFin = 0x01, kTcpSyn = 0x02, kTcpRst = 0x04, kTcpAck = 0x10;
constexpr uint32_t kNone = UINT32_MAX;
constexpr unsigned kWays = 8;
constexpr unsigned kEmitted = 1, kGone = 2;  // FlowCache::settle() results

// Entry::state bits
constexpr uint8_t kUsed = 1;    // the entry holds a flow
constexpr uint8_t kEnded = 2;   // TCP FIN or RST seen
constexpr uint8_t kRef = 4;     // CLOCK reference bit: a packet since the hand last passed
constexpr uint8_t kFwdRev = 8;  // the forward direction is the canonical key reversed
constexpr uint8_t kExt = 16;    // the entry's extension slot holds values of this flow

// PacketMeta's first 37 bytes are FlowKey's: addresses, ports, protocol.
static_assert(offsetof(PacketMeta, src_addr) == offsetof(FlowKey, src_addr));
static_assert(offsetof(PacketMeta, dst_addr) == offsetof(FlowKey, dst_addr));
static_assert(offsetof(PacketMeta, src_port) == offsetof(FlowKey, src_port));
static_assert(offsetof(PacketMeta, dst_port) == offsetof(FlowKey, dst_port));
static_assert(offsetof(PacketMeta, ip_proto) == offsetof(FlowKey, proto));
static_assert(offsetof(FlowKey, is_ipv6) == 37 && offsetof(FlowKey, vlan) == 38);

inline void load_key(const FlowKey &k, uint64_t w[5]) { std::memcpy(w, &k, sizeof(FlowKey)); }
inline void store_key(FlowKey &k, const uint64_t w[5]) { std::memcpy(&k, w, sizeof(FlowKey)); }

inline bool same_key(const FlowKey &a, const FlowKey &b) {
  uint64_t x[5], y[5];
  load_key(a, x);
  load_key(b, y);
  return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3]) | (x[4] ^ y[4])) == 0;
}

// Word 4 holds src_port (bits 0-15), dst_port (16-31), proto, is_ipv6, vlan.
inline uint64_t swap_ports(uint64_t w4) {
  return (w4 & ~0xffffffffull) | (w4 & 0xffff) << 16 | (w4 >> 16 & 0xffff);
}

inline void reverse_key(uint64_t w[5]) {
  std::swap(w[0], w[2]);
  std::swap(w[1], w[3]);
  w[4] = swap_ports(w[4]);
}

// A biflow's canonical order: the (address, port) pair that compares lower
// first (any total order does; this one compares native words, high word
// first). Puts w in it and says whether that reversed it. Without branches:
// a packet's direction is a coin toss to the branch predictor (the branch
// cost 10% of prepare_key's samples at 1M flows in memory).
inline bool to_canonical_order(uint64_t w[5]) {
  const uint64_t sp = w[4] & 0xffff, dp = w[4] >> 16 & 0xffff;
  const bool greater = (w[0] > w[2]) | ((w[0] == w[2]) & ((w[1] > w[3]) | ((w[1] == w[3]) & (sp > dp))));
  const uint64_t all = 0 - uint64_t(greater);
  const uint64_t d02 = (w[0] ^ w[2]) & all, d13 = (w[1] ^ w[3]) & all;
  w[0] ^= d02, w[2] ^= d02, w[1] ^= d13, w[3] ^= d13;
  w[4] ^= (w[4] ^ swap_ports(w[4])) & all;
  return greater;
}

// The hash of the index (flow_hash.hh). tests/bench/bench_flow_cache.cc
// compiles this file again with other hashes and bounds, to compare.
#ifndef SLUICE_FLOW_CACHE_HASH
#define SLUICE_FLOW_CACHE_HASH flow_hash
#define SLUICE_FLOW_CACHE_HASH_BATCH flow_hash_batch
#endif
#ifndef SLUICE_FLOW_CACHE_HASH_BATCH
// Another hash (the bench's variants): one key at a time.
inline void hash_each(const FlowHashKey &key, const uint64_t (*w)[5], unsigned n, uint64_t *h) {
  for (unsigned i = 0; i < n; ++i) h[i] = SLUICE_FLOW_CACHE_HASH(key, w[i]);
}
#define SLUICE_FLOW_CACHE_HASH_BATCH hash_each
#endif
#ifndef SLUICE_FLOW_CACHE_MAX_PROBE
#define SLUICE_FLOW_CACHE_MAX_PROBE FlowCache::kMaxProbe
#endif

}  // namespace

struct alignas(128) FlowCache::Entry {
  // first cache line: what a lookup and the expiry scan read
  FlowKey key;          // canonical order (bi), fields outside the key zero
  uint64_t last_ns;     // last packet of the entry, either direction, any record: idle timeout; the next free slot while free
  uint8_t min_ttl[2];   // optional field ttl (FlowCache::attrs_ only), per direction, as below:
  uint8_t max_ttl[2];   // here, not in Attrs, so that a packet of a flow touches Attrs only when first of its direction
  uint8_t state;        // kUsed | kEnded | kRef | kFwdRev
  uint8_t tcp_flags[2]; // [0] forward, [1] reverse, as below
  uint8_t pad;
  uint16_t min_len[2];
  uint16_t max_len[2];
  // second cache line: the counters of the current record
  uint64_t packets[2];
  uint64_t octets[2];
  uint64_t first_ns[2];
  uint64_t dir_last_ns[2];
};
static_assert(sizeof(FlowCache::Entry) == 128);
static_assert(offsetof(FlowCache::Entry, packets) == 64);

struct alignas(64) FlowCache::Bucket {
  uint16_t tag[kWays];   // 0: way empty
  uint32_t slot[kWays];  // entry of each way
  uint32_t overflow;     // keys whose home is at or before this bucket that are stored after it
  uint32_t pad[3];
};
static_assert(sizeof(FlowCache::Bucket) == 64);

struct FlowCache::Prepared {
  FlowKey key;  // canonical
  uint32_t home;
  uint16_t tag;
  uint8_t swapped;    // the packet's direction is the canonical key reversed
  uint8_t tcp_flags;
  uint32_t length;    // IP total length
  uint8_t is_ip;
  uint64_t time;
  const PacketLabels *labels;  // null: none
  // For the optional fields (attrs_ only).
  const PacketMeta *meta;
  FlowPacketSource source;
  // account_batch(): the entry of the first matching tag when its lines
  // were prefetched, kNone else. Only a guess: by the packet's turn that
  // slot may hold another flow, so its key is compared before it is used.
  uint32_t hint = kNone;
};

struct alignas(64) FlowCache::Attrs {
  uint8_t mac[2][12];  // per direction: destination then source, as the frame has them
  uint32_t if_index[2];
  uint8_t tos[2];
  uint8_t pad[4];
  uint16_t vlan_inner;
  uint8_t mpls_top[3];
  uint8_t flow_direction;
};
static_assert(sizeof(FlowCache::Attrs) == 64);

namespace {

// Bit pair 2w, 2w+1 set for every way w whose tag equals `tag`.
inline uint32_t match_tags(const FlowCache::Bucket &b, uint16_t tag) {
#if defined(__SSE2__)
  __m128i t = _mm_load_si128(reinterpret_cast<const __m128i *>(b.tag));
  return uint32_t(_mm_movemask_epi8(_mm_cmpeq_epi16(t, _mm_set1_epi16(short(tag)))));
#else
  uint32_t m = 0;
  for (unsigned w = 0; w < kWays; ++w)
    if (b.tag[w] == tag) m |= 3u << (2 * w);
  return m;
#endif
}

inline uint32_t next_way(uint32_t &mask) {
  uint32_t w = uint32_t(__builtin_ctz(mask)) >> 1;
  mask &= mask - 1;
  mask &= mask - 1;
  return w;
}

inline void prefetch(const void *p) { __builtin_prefetch(p, 1, 3); }

inline bool has_packets(const FlowCache::Entry &e) { return (e.packets[0] | e.packets[1]) != 0; }

inline uint64_t record_start(const FlowCache::Entry &e) {
  if (!e.packets[0]) return e.first_ns[1];
  if (!e.packets[1]) return e.first_ns[0];
  return std::min(e.first_ns[0], e.first_ns[1]);
}

inline void reset_record(FlowCache::Entry &e) {
  std::memset(&e.packets, 0, sizeof e.packets + sizeof e.octets + sizeof e.first_ns + sizeof e.dir_last_ns);
  e.tcp_flags[0] = e.tcp_flags[1] = 0;
  e.min_len[0] = e.min_len[1] = e.max_len[0] = e.max_len[1] = 0;
}

inline void count(FlowCache::Entry &e, unsigned d, const FlowCache::Prepared &p) {
  uint16_t len = uint16_t(std::min<uint32_t>(p.length, 0xffff));
  if (e.packets[d]++ == 0) {
    e.first_ns[d] = e.dir_last_ns[d] = p.time;
    e.min_len[d] = e.max_len[d] = len;
    e.tcp_flags[d] = p.tcp_flags;
  } else {
    if (p.time < e.first_ns[d]) e.first_ns[d] = p.time;
    if (p.time > e.dir_last_ns[d]) e.dir_last_ns[d] = p.time;
    if (len < e.min_len[d]) e.min_len[d] = len;
    if (len > e.max_len[d]) e.max_len[d] = len;
    e.tcp_flags[d] |= p.tcp_flags;
  }
  e.octets[d] += p.length;
  if (p.time > e.last_ns) e.last_ns = p.time;
  e.state |= kRef | (p.tcp_flags & (kTcpFin | kTcpRst) ? kEnded : 0);
}

void *map_memory(size_t n, bool prefault) {
  void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (n >= (2u << 20)) madvise(p, n, MADV_HUGEPAGE);
#endif
  if (prefault)
    for (size_t off = 0; off < n; off += 4096) static_cast<volatile char *>(p)[off] = 0;
  return p;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

FlowCache::Mapping::~Mapping() {
  if (p) munmap(p, n);
}

FlowCache::FlowCache(const FlowCacheConfig &cfg) : cfg_(cfg) {
  if (cfg.capacity < 1 || cfg.capacity > uint64_t(UINT32_MAX) - 1)
    throw std::invalid_argument("flow cache capacity " + std::to_string(cfg.capacity) +
                                " out of range 1.." + std::to_string(uint64_t(UINT32_MAX) - 1));
  if (cfg.idle_ns == 0) throw std::invalid_argument("flow cache idle timeout must be > 0");
  if (cfg.active_ns == 0) throw std::invalid_argument("flow cache active timeout must be > 0");
  if (cfg.end_grace_ns == 0) throw std::invalid_argument("flow cache end grace must be > 0");

  capacity_ = size_t(cfg.capacity);
  nbuckets_ = uint32_t((capacity_ + 3) / 4);
  max_probe_ = std::min<uint32_t>(SLUICE_FLOW_CACHE_MAX_PROBE, nbuckets_);
  hash_key_ = cfg.hash_key ? *cfg.hash_key : flow_hash_key_for_new_table();
  end_timeout_ns_ = std::min(cfg.idle_ns, cfg.end_grace_ns);

  // Byte masks of the key fields kept, in FlowKey layout.
  FlowKey m{}, m4{};
  std::memset(&m, 0, sizeof m);
  if (cfg.key_src) std::memset(m.src_addr, 0xff, 16);
  if (cfg.key_dst) std::memset(m.dst_addr, 0xff, 16);
  if (cfg.key_proto) m.proto = 0xff;
  m.is_ipv6 = 0xff;
  if (cfg.key_vlan) m.vlan = 0xffff;
  m4 = m;
  if (cfg.key_sport) m4.src_port = 0xffff;
  if (cfg.key_dport) m4.dst_port = 0xffff;
  load_key(m4, key_mask_);
  load_key(m, key_mask_no_l4_);

  entry_map_.n = round_up(capacity_ * sizeof(Entry), 4096);
  entry_map_.p = map_memory(entry_map_.n, cfg.prefault);
  bucket_map_.n = round_up(size_t(nbuckets_) * sizeof(Bucket), 4096);
  bucket_map_.p = map_memory(bucket_map_.n, cfg.prefault);
  scratch_map_.n = round_up(kPrepared * sizeof(Prepared), 4096);
  scratch_map_.p = map_memory(scratch_map_.n, true);
  if (cfg.fields & ~flow_field_bit(FlowField::Icmp)) {
    attrs_map_.n = round_up(capacity_ * sizeof(Attrs), 4096);
    attrs_map_.p = map_memory(attrs_map_.n, cfg.prefault);
    attrs_ = static_cast<Attrs *>(attrs_map_.p);
  }
  home_map_.n = round_up(capacity_ * sizeof(uint32_t), 4096);
  home_map_.p = map_memory(home_map_.n, cfg.prefault);
  homes_ = static_cast<uint32_t *>(home_map_.p);
  used_map_.n = round_up((capacity_ + 63) / 64 * 8, 4096);
  used_map_.p = map_memory(used_map_.n, cfg.prefault);
  used_bits_ = static_cast<uint64_t *>(used_map_.p);

  // Fresh anonymous memory reads as zeros: empty buckets, never-used entries.
  entries_ = static_cast<Entry *>(entry_map_.p);
  buckets_ = static_cast<Bucket *>(bucket_map_.p);
  scratch_ = static_cast<Prepared *>(scratch_map_.p);
  free_head_ = kNone;

  // The index at once (a table's first few hundred flows touch all of its
  // huge pages), the slots' arrays 16K slots ahead (a huge page of
  // entries): what the lane would otherwise fault in, zeroed, as it goes.
  if (cfg.populate_on_thread && !cfg.prefault) {
    constexpr size_t kLeadSlots = size_t(4) * PagePopulator::kStepSlots;
    std::vector<PagePopulator::SlotArray> ahead = {{entry_map_.p, sizeof(Entry), capacity_},
                                                   {home_map_.p, sizeof(uint32_t), capacity_}};
    if (attrs_) ahead.push_back({attrs_map_.p, sizeof(Attrs), capacity_});
    populator_ = std::make_unique<PagePopulator>(
        std::vector<PagePopulator::Range>{{bucket_map_.p, bucket_map_.n}, {used_map_.p, used_map_.n}}, std::move(ahead),
        std::min(kLeadSlots, capacity_), cfg.populate_setup);
  }
}

FlowCache::~FlowCache() = default;

size_t FlowCache::bytes() const {
  return entry_map_.n + bucket_map_.n + scratch_map_.n + attrs_map_.n + ext_map_.n + used_map_.n + home_map_.n;
}

void FlowCache::prepare(const PacketMeta &m, uint64_t t, const PacketLabels *labels, const FlowPacketSource *source,
                        Prepared &p) const {
  uint64_t w[5];
  prepare_key(m, t, labels, source, p, w);
  place(SLUICE_FLOW_CACHE_HASH(hash_key_, w), p);
}

void FlowCache::prepare_key(const PacketMeta &m, uint64_t t, const PacketLabels *labels,
                            const FlowPacketSource *source, Prepared &p, uint64_t words[5]) const {
  p.labels = labels && labels->count ? labels : nullptr;
  p.hint = kNone;
  p.meta = &m;
  p.source = source ? *source : FlowPacketSource{};
  // The key is made in a local array (registers) and stored to p.key and
  // words at the end: made in `words` itself, p.key's 16-byte loads read
  // back its 8-byte stores just made, which the CPU cannot forward: a stall
  // a packet (in a one-lane trace run this function went from 7.5% of the
  // lane's samples, half of them on that load, to 5.5%).
  uint64_t w[5];
  std::memcpy(w, &m, sizeof w);  // addresses, ports, protocol, then status and flags (masked off)
  const bool l4 = m.has_l4();
  const uint64_t *mask = l4 ? key_mask_ : key_mask_no_l4_;
  // bytes 37..39 are PacketMeta's status and flags: FlowKey's is_ipv6 and vlan instead
  w[4] = (w[4] & 0xffffffffffull) | uint64_t(m.is_ipv6() ? 1 : 0) << 40 | uint64_t(m.vlan_outer) << 48;
  for (int i = 0; i < 5; ++i) w[i] &= mask[i];
  p.swapped = cfg_.bidirectional && to_canonical_order(w);
  store_key(p.key, w);
  std::memcpy(words, w, sizeof w);
  p.tcp_flags = l4 && m.ip_proto == 6 ? m.tcp_flags : 0;
  p.length = m.ip_total_length;
  p.is_ip = 1;
  p.time = t;
}

// Home bucket and tag from the hash of the canonical key.
void FlowCache::place(uint64_t h, Prepared &p) const {
  p.home = uint32_t((h >> 32) * nbuckets_ >> 32);
  p.tag = uint16_t(h) ? uint16_t(h) : 1;
}

uint32_t FlowCache::lookup(const Prepared &p) const {
  uint32_t b = p.home;
  for (uint32_t n = 0; n < max_probe_; ++n) {
    const Bucket &bk = buckets_[b];
    for (uint32_t mask = match_tags(bk, p.tag); mask;) {
      uint32_t s = bk.slot[next_way(mask)];
      if (same_key(entries_[s].key, p.key)) return s;
    }
    if (bk.overflow == 0) return kNone;
    b = b + 1 == nbuckets_ ? 0 : b + 1;
  }
  return kNone;
}

// The first bucket of home's window (max_probe_ buckets) with a free way, or
// kNone when the window is full.
uint32_t FlowCache::free_way_bucket(uint32_t home) const {
  uint32_t b = home;
  for (uint32_t n = 0; n < max_probe_; ++n) {
    if (match_tags(buckets_[b], 0)) return b;
    b = b + 1 == nbuckets_ ? 0 : b + 1;
  }
  return kNone;
}

// Puts slot in a free way of `bucket` (free_way_bucket(home)); the buckets
// passed on the way count it in their overflow.
void FlowCache::index_insert(uint32_t slot, uint32_t home, uint32_t bucket, uint16_t tag) {
  uint32_t visited = 1;
  for (uint32_t b = home; b != bucket; b = b + 1 == nbuckets_ ? 0 : b + 1, ++visited) ++buckets_[b].overflow;
  if (visited > stats_.longest_probe) stats_.longest_probe = visited;
  Bucket &bk = buckets_[bucket];
  uint32_t mask = match_tags(bk, 0);
  uint32_t w = next_way(mask);
  bk.tag[w] = tag;
  bk.slot[w] = slot;
}

void FlowCache::index_remove(uint32_t slot) {
  for (uint32_t b = homes_[slot];;) {
    Bucket &bk = buckets_[b];
    for (unsigned w = 0; w < kWays; ++w)
      if (bk.slot[w] == slot && bk.tag[w] != 0) {
        bk.tag[w] = 0;
        return;
      }
    --bk.overflow;
    b = b + 1 == nbuckets_ ? 0 : b + 1;
  }
}

uint32_t FlowCache::alloc_slot() {
  uint32_t s;
  if (free_head_ != kNone) {
    s = free_head_;
    free_head_ = uint32_t(entries_[s].last_ns);
  } else {
    s = bump_++;
    if (s % PagePopulator::kStepSlots == 0 && populator_) populator_->advance(s);
  }
  used_bits_[s >> 6] |= uint64_t(1) << (s & 63);
  ++used_;
  // The slot the next new flow takes, on its way in meanwhile: a new flow's
  // slot is known only once its lookup failed, too late to prefetch, and its
  // lines (entry, attributes, home) then stalled the lane (a freed slot is
  // cold, a never-used one too): docs/performance.md, "A new flow's slot".
  prefetch_slot(free_head_ != kNone ? free_head_ : bump_);
  return s;
}

void FlowCache::prefetch_slot(uint32_t s) const {
  if (s >= capacity_) return;
  prefetch(&entries_[s]);
  prefetch(reinterpret_cast<const char *>(&entries_[s]) + 64);
  prefetch(&homes_[s]);
  if (attrs_) prefetch(&attrs_[s]);
}

void FlowCache::release(uint32_t slot) {
  index_remove(slot);
  Entry &e = entries_[slot];
  e.state = 0;
  e.last_ns = free_head_;
  free_head_ = slot;
  used_bits_[slot >> 6] &= ~(uint64_t(1) << (slot & 63));
  --used_;
}

// Applies the timeouts due at now_ to e. Deadlines: idle = last packet + idle
// (end grace when ended), active = first packet of the record + active. When
// both have passed they apply in deadline order: if the active deadline came
// first the record leaves as an active timeout and the (empty) rest of the flow
// then ends silently, else the flow ends as idle. So a check at any time after
// the deadlines gives what a check at each deadline would have given: the
// records do not depend on when the scan runs. Writes at most one record to
// `rec`; returns kEmitted and/or kGone (the flow is over; the caller frees or
// reuses the entry).
unsigned FlowCache::settle(Entry &e, FlowRecord &rec) {
  const bool ended = e.state & kEnded;
  const uint64_t timeout = ended ? end_timeout_ns_ : cfg_.idle_ns;
  const uint64_t last = std::min(now_, e.last_ns);
  const bool idle_due = now_ - last >= timeout;
  if (!has_packets(e)) {  // what an active timeout left
    if (!idle_due) return 0;
    ++stats_.ended_empty;
    return kGone;
  }
  const uint64_t start = std::min(now_, record_start(e));
  if (now_ - start >= cfg_.active_ns &&
      (!idle_due || (unsigned __int128)start + cfg_.active_ns <= (unsigned __int128)last + timeout)) {
    emit(e, FlowEndReason::ActiveTimeout, rec);
    reset_record(e);
    if (!idle_due) return kEmitted;
    ++stats_.ended_empty;
    return kEmitted | kGone;
  }
  if (!idle_due) return 0;
  emit(e, ended ? FlowEndReason::EndOfFlow : FlowEndReason::IdleTimeout, rec);
  return kEmitted | kGone;
}

void FlowCache::emit(const Entry &e, FlowEndReason r, FlowRecord &rec) {
  fill(e, r, rec);
  ++stats_.ended[unsigned(r)];
}

void FlowCache::fill(const Entry &e, FlowEndReason r, FlowRecord &rec) const {
  uint64_t w[5];
  load_key(e.key, w);
  if (e.state & kFwdRev) reverse_key(w);
  store_key(rec.key, w);
  const unsigned dirs = cfg_.bidirectional ? 2 : 1;
  FlowCounters *c[2] = {&rec.fwd, &rec.rev};
  for (unsigned d = 0; d < 2; ++d) {
    FlowCounters &o = *c[d];
    if (d < dirs && e.packets[d]) {
      o.packets = e.packets[d];
      o.octets = e.octets[d];
      o.first_ns = e.first_ns[d];
      o.last_ns = e.dir_last_ns[d];
      o.min_len = e.min_len[d];
      o.max_len = e.max_len[d];
      o.tcp_flags = e.tcp_flags[d];
      o.tos = o.min_ttl = o.max_ttl = 0;
      o.if_index = 0;
      std::memset(o.src_mac, 0, sizeof o.src_mac + sizeof o.dst_mac);
    } else {
      std::memset(&o, 0, sizeof o);
    }
  }
  rec.reason = r;
  rec.biflow = cfg_.bidirectional ? 1 : 0;
  rec.lane = cfg_.lane;
  rec.flow_direction = 0;
  std::memset(rec.mpls_top, 0, sizeof rec.mpls_top);
  rec.vlan_inner = 0;
  std::memset(rec.pad, 0, sizeof rec.pad);
  if (attrs_) fill_attrs(uint32_t(&e - entries_), e, rec);
  if (e.state & kExt) std::memcpy(rec.ext, ext_ + size_t(&e - entries_) * kFlowExtBytes, kFlowExtBytes);
  else std::memset(rec.ext, 0, sizeof rec.ext);
}

// The optional fields the table keeps, into a record fill() made.
void FlowCache::fill_attrs(uint32_t slot, const Entry &e, FlowRecord &rec) const {
  const Attrs &a = attrs_[slot];
  const FlowFieldSet f = cfg_.fields;
  auto has = [f](FlowField x) { return (f & flow_field_bit(x)) != 0; };
  FlowCounters *c[2] = {&rec.fwd, &rec.rev};
  for (unsigned d = 0; d < 2; ++d) {
    if (!c[d]->packets) continue;
    if (has(FlowField::InIf) || has(FlowField::OutIf)) c[d]->if_index = a.if_index[d];
    if (has(FlowField::DstMac)) std::memcpy(c[d]->dst_mac, a.mac[d], 6);
    if (has(FlowField::SrcMac)) std::memcpy(c[d]->src_mac, a.mac[d] + 6, 6);
    if (has(FlowField::Tos)) c[d]->tos = a.tos[d];
    if (has(FlowField::Ttl)) c[d]->min_ttl = e.min_ttl[d], c[d]->max_ttl = e.max_ttl[d];
  }
  if (!has_packets(e)) return;
  if (has(FlowField::Direction)) rec.flow_direction = a.flow_direction;
  if (has(FlowField::InnerVlan)) rec.vlan_inner = a.vlan_inner;
  if (has(FlowField::Mpls)) std::memcpy(rec.mpls_top, a.mpls_top, 3);
}

// A packet counted in direction d of entry e (before count(): e still has
// the counts without it). Only a direction's first packet touches Attrs;
// the others change the TTLs, in the entry's first line.
void FlowCache::count_attrs(uint32_t slot, Entry &e, unsigned d, const Prepared &p) {
  const PacketMeta &m = *p.meta;
  if (e.packets[d] != 0) {
    if (m.ttl < e.min_ttl[d]) e.min_ttl[d] = m.ttl;
    if (m.ttl > e.max_ttl[d]) e.max_ttl[d] = m.ttl;
    return;
  }
  Attrs &a = attrs_[slot];
  if (!has_packets(e)) {  // the record's first packet
    a.flow_direction = p.source.flow_direction;
    a.vlan_inner = m.vlan_inner;
    std::memcpy(a.mpls_top, m.mpls_top, 3);
    a.if_index[1 - d] = 0;
  }
  // the direction's first
  a.tos[d] = m.tos;
  e.min_ttl[d] = e.max_ttl[d] = m.ttl;
  a.if_index[d] = p.source.if_index;
  if (p.source.frame && m.is_ethernet()) std::memcpy(a.mac[d], p.source.frame, 12);
  else std::memset(a.mac[d], 0, 12);
}

// merge_direction()'s optional fields. `record_first`: the entry here has
// no packet yet (the record's fields come from this flow); `first`: its
// direction `to` has none.
void FlowCache::adopt_attrs(const FlowCache &from, uint32_t from_slot, unsigned d, uint32_t slot, unsigned to,
                            bool record_first, bool first) {
  Attrs &n = attrs_[slot];
  Entry &ne = entries_[slot];
  const Attrs *o = from.attrs_ ? &from.attrs_[from_slot] : nullptr;
  const Entry &oe = from.entries_[from_slot];
  if (record_first) {
    std::memset(&n, 0, sizeof n);
    if (o) {
      n.flow_direction = o->flow_direction, n.vlan_inner = o->vlan_inner;
      std::memcpy(n.mpls_top, o->mpls_top, 3);
    }
  }
  if (!o) {
    if (first) std::memset(n.mac[to], 0, 12), n.if_index[to] = 0, n.tos[to] = ne.min_ttl[to] = ne.max_ttl[to] = 0;
    return;
  }
  if (first) {
    std::memcpy(n.mac[to], o->mac[d], 12);
    n.if_index[to] = o->if_index[d];
    n.tos[to] = o->tos[d];
    ne.min_ttl[to] = oe.min_ttl[d], ne.max_ttl[to] = oe.max_ttl[d];
  } else {
    ne.min_ttl[to] = std::min(ne.min_ttl[to], oe.min_ttl[d]);
    ne.max_ttl[to] = std::max(ne.max_ttl[to], oe.max_ttl[d]);
  }
}

bool FlowCache::map_ext() {
  try {
    size_t n = round_up(capacity_ * kFlowExtBytes, 4096);
    ext_map_.p = map_memory(n, false);
    ext_map_.n = n;
  } catch (const std::bad_alloc &) {
    return false;
  }
  ext_ = static_cast<uint8_t *>(ext_map_.p);
  return true;
}

// The packet's labels into the flow's extension slot (first value kept).
void FlowCache::apply_labels(uint32_t slot, Entry &e, const PacketLabels &labels) {
  if (!ext_ && !map_ext()) {
    ++stats_.labels_lost;
    return;
  }
  uint8_t *x = ext_ + size_t(slot) * kFlowExtBytes;
  if (!(e.state & kExt)) {
    std::memset(x, 0, kFlowExtBytes);
    e.state |= kExt;
  }
  apply_packet_labels(labels, x, kFlowExtBytes);
}

void FlowCache::set_timeouts(uint64_t idle_ns, uint64_t active_ns) {
  if (idle_ns == 0 || active_ns == 0) throw std::invalid_argument("flow cache timeouts must be > 0");
  cfg_.idle_ns = idle_ns;
  cfg_.active_ns = active_ns;
  end_timeout_ns_ = std::min(idle_ns, cfg_.end_grace_ns);
}

void FlowCache::adopt(const FlowCache &from, const std::function<void(const FlowRecord &)> &evicted) {
  now_ = std::max(now_, from.now_);
  for (uint32_t i = 0; i < from.bump_; ++i) {
    const Entry &e = from.entries_[i];
    if (!(e.state & kUsed) || !has_packets(e)) continue;  // an empty rest would end silently
    uint64_t fwd[5];
    load_key(e.key, fwd);
    if (e.state & kFwdRev) reverse_key(fwd);
    for (unsigned d = 0; d < 2; ++d) {
      if (!e.packets[d]) continue;
      uint64_t w[5];
      std::memcpy(w, fwd, sizeof w);
      if (d == 1) reverse_key(w);
      for (int k = 0; k < 5; ++k) w[k] &= key_mask_[k];
      const bool swapped = cfg_.bidirectional && to_canonical_order(w);  // as prepare_key() makes it
      Prepared p{};
      store_key(p.key, w);
      place(SLUICE_FLOW_CACHE_HASH(hash_key_, w), p);
      uint32_t s = lookup(p);
      if (s == kNone) {
        const uint32_t bucket = used_ < capacity_ ? free_way_bucket(p.home) : kNone;
        if (bucket == kNone) {  // no room: this direction leaves now, as a uniflow record
          if (used_ < capacity_) ++stats_.probe_limit;
          FlowRecord rec;
          from.fill(e, FlowEndReason::LackOfResources, rec);
          uint64_t k[5];
          std::memcpy(k, fwd, sizeof k);
          if (d == 1) reverse_key(k), rec.fwd = rec.rev;
          store_key(rec.key, k);
          std::memset(&rec.rev, 0, sizeof rec.rev);
          rec.biflow = cfg_.bidirectional ? 1 : 0;
          rec.lane = cfg_.lane;
          ++stats_.evicted;
          ++stats_.ended[unsigned(FlowEndReason::LackOfResources)];
          evicted(rec);
          continue;
        }
        s = alloc_slot();
        Entry &n = entries_[s];
        std::memset(static_cast<void *>(&n), 0, sizeof n);
        n.key = p.key;
        homes_[s] = p.home;
        n.state = uint8_t(kUsed | kRef | (swapped ? kFwdRev : 0));
        index_insert(s, p.home, bucket, p.tag);
        ++stats_.created;
      }
      // Which direction of the entry here this one is (uni: always forward).
      unsigned to = cfg_.bidirectional && swapped != ((entries_[s].state & kFwdRev) ? 1 : 0) ? 1 : 0;
      merge_direction(from, i, d, s, to);
    }
  }
}

// adopt(): direction d of `from`'s entry from_slot merged into direction
// `to` of entry s here.
void FlowCache::merge_direction(const FlowCache &from, uint32_t from_slot, unsigned d, uint32_t s, unsigned to) {
  const Entry &e = from.entries_[from_slot];
  Entry &n = entries_[s];
  if (attrs_) adopt_attrs(from, from_slot, d, s, to, !has_packets(n), n.packets[to] == 0);
  if (n.packets[to] == 0) {
    n.first_ns[to] = e.first_ns[d], n.dir_last_ns[to] = e.dir_last_ns[d];
    n.min_len[to] = e.min_len[d], n.max_len[to] = e.max_len[d];
  } else {
    n.first_ns[to] = std::min(n.first_ns[to], e.first_ns[d]);
    n.dir_last_ns[to] = std::max(n.dir_last_ns[to], e.dir_last_ns[d]);
    n.min_len[to] = std::min(n.min_len[to], e.min_len[d]);
    n.max_len[to] = std::max(n.max_len[to], e.max_len[d]);
  }
  n.packets[to] += e.packets[d];
  n.octets[to] += e.octets[d];
  n.tcp_flags[to] |= e.tcp_flags[d];
  n.last_ns = std::max(n.last_ns, e.last_ns);
  // Extension fields: the first flow merged in brings its values (slots
  // sit at the same offsets in every table: the registry's).
  if ((e.state & kExt) && !(n.state & kExt) && (ext_ || map_ext())) {
    std::memcpy(ext_ + size_t(s) * kFlowExtBytes, from.ext_ + size_t(from_slot) * kFlowExtBytes, kFlowExtBytes);
    n.state |= kExt;
  }
  // Ended by a FIN or RST: a biflow's mark covers both directions; split
  // into uniflows, only the direction that sent one is ended.
  bool ended = from.cfg_.bidirectional && !cfg_.bidirectional ? (e.tcp_flags[d] & (kTcpFin | kTcpRst)) != 0
                                                              : (e.state & kEnded) != 0;
  if (ended) n.state |= kEnded;
  // The forward direction is the one that sent first.
  if (n.packets[0] && n.packets[1] && n.first_ns[1] < n.first_ns[0]) swap_directions(s);
}

// Entry s's forward direction becomes its reverse one and back.
void FlowCache::swap_directions(uint32_t s) {
  Entry &n = entries_[s];
  std::swap(n.packets[0], n.packets[1]);
  std::swap(n.octets[0], n.octets[1]);
  std::swap(n.first_ns[0], n.first_ns[1]);
  std::swap(n.dir_last_ns[0], n.dir_last_ns[1]);
  std::swap(n.min_len[0], n.min_len[1]);
  std::swap(n.max_len[0], n.max_len[1]);
  std::swap(n.tcp_flags[0], n.tcp_flags[1]);
  if (attrs_) {
    Attrs &a = attrs_[s];
    std::swap(a.mac[0], a.mac[1]);
    std::swap(a.if_index[0], a.if_index[1]);
    std::swap(a.tos[0], a.tos[1]);
    std::swap(n.min_ttl[0], n.min_ttl[1]);
    std::swap(n.max_ttl[0], n.max_ttl[1]);
  }
  n.state ^= kFwdRev;
}

void FlowCache::peek(size_t begin, size_t end, const std::function<void(const FlowRecord &)> &fn) const {
  FlowRecord rec;
  for (size_t i = begin; i < std::min<size_t>(end, bump_); ++i) {
    const Entry &e = entries_[i];
    if (!(e.state & kUsed) || !has_packets(e)) continue;
    fill(e, FlowEndReason(0), rec);
    fn(rec);
  }
}

// Frees entry `slot` if it is over at now_: due (its record leaves with its
// own reason) or the empty rest of an active timeout (silently).
bool FlowCache::free_if_due(uint32_t slot, FlowRecord *out, unsigned *n_out) {
  Entry &e = entries_[slot];
  unsigned r = settle(e, out[*n_out]);
  if (r & kEmitted) ++*n_out;
  if (!r && has_packets(e)) return false;
  if (!(r & kGone)) ++stats_.ended_empty;  // rolled over / left empty by an active timeout
  release(slot);
  return true;
}

// Takes a live flow's entry for a new one: EndOfFlow if it saw its FIN or
// RST (its end is known), else LackOfResources.
void FlowCache::evict(uint32_t slot, FlowRecord *out, unsigned *n_out) {
  emit(entries_[slot], entries_[slot].state & kEnded ? FlowEndReason::EndOfFlow : FlowEndReason::LackOfResources,
       out[(*n_out)++]);
  ++stats_.evicted;
  release(slot);
}

// Frees one entry for a new flow (the table is full). A CLOCK sweep of at most
// kSweep entries: an entry that is due leaves with its own reason (and an
// empty one silently) in either mode; with evict, an ended flow or an
// unreferenced one is the victim, referenced ones get a second chance, and if
// all had one, the least recently active of them goes.
bool FlowCache::make_room(FlowRecord *out, unsigned *n_out) {
  const bool evict_live = cfg_.evict_when_full;
  uint32_t best = kNone;
  uint64_t best_last = UINT64_MAX;
  for (unsigned k = 0; k < kSweep; ++k) {
    uint32_t i = hand_;
    hand_ = hand_ + 1 == capacity_ ? 0 : hand_ + 1;
    if (k + 1 < kSweep) prefetch(&entries_[hand_]);
    if (free_if_due(i, out, n_out)) return true;  // full: every slot is in use
    if (!evict_live) continue;
    Entry &e = entries_[i];
    if (e.state & kRef && !(e.state & kEnded)) {
      e.state &= uint8_t(~kRef);
      if (e.last_ns < best_last) best = i, best_last = e.last_ns;
      continue;
    }
    evict(i, out, n_out);
    return true;
  }
  if (!evict_live) return false;
  evict(best, out, n_out);
  return true;
}

// Frees a way in `bucket` for a new flow whose window (kMaxProbe buckets from
// this, its home) is full: an entry there that is due, else with evict the
// ended or least recently active one. At most the bucket's 8 entries are
// looked at, not the window's.
bool FlowCache::make_room_in(uint32_t bucket, FlowRecord *out, unsigned *n_out) {
  const Bucket &bk = buckets_[bucket];
  uint32_t slots[kWays];
  std::memcpy(slots, bk.slot, sizeof slots);  // the bucket changes when one is released
  for (uint32_t s : slots) prefetch(&entries_[s]);
  uint32_t best = kNone;
  uint64_t best_last = UINT64_MAX;
  for (uint32_t s : slots) {
    if (free_if_due(s, out, n_out)) return true;
    const Entry &e = entries_[s];
    if (e.state & kEnded) best = s, best_last = 0;
    else if (e.last_ns < best_last) best = s, best_last = e.last_ns;
  }
  if (!cfg_.evict_when_full) return false;
  evict(best, out, n_out);
  return true;
}

FlowPacketOutcome FlowCache::account_prepared(const Prepared &p, FlowRecord *out, unsigned *n_out) {
  // The entry prefetch's guess first (the key it holds is this flow's only
  // while that entry is in use: keys are unique in the table), else the index.
  uint32_t s = p.hint != kNone && (entries_[p.hint].state & kUsed) && same_key(entries_[p.hint].key, p.key)
                   ? p.hint
                   : lookup(p);
  if (s != kNone) {
    Entry &e = entries_[s];
    unsigned d = p.swapped ^ (e.state & kFwdRev ? 1u : 0u);
    unsigned r = settle(e, out[*n_out]);
    if (r & kEmitted) ++*n_out;
    bool restart = r & kGone;
    if (!restart && (e.state & kEnded) && (p.tcp_flags & kTcpSyn) &&
        (!(p.tcp_flags & kTcpAck) || !cfg_.bidirectional)) {  // a SYN after the end
      if (has_packets(e))
        emit(e, FlowEndReason::EndOfFlow, out[(*n_out)++]);
      else
        ++stats_.ended_empty;
      restart = true;
    }
    if (restart) {
      e.state = uint8_t(kUsed | (p.swapped ? kFwdRev : 0));
      reset_record(e);
      e.last_ns = p.time;
      d = 0;
      ++stats_.created;
    }
    if (attrs_) count_attrs(s, e, d, p);
    count(e, d, p);
    if (p.labels) [[unlikely]] apply_labels(s, e, *p.labels);
    ++stats_.packets;
    return FlowPacketOutcome::Counted;
  }
  // A new flow: room in the table and in its window.
  uint32_t bucket = free_way_bucket(p.home);
  if (bucket == kNone) {
    ++stats_.probe_limit;
    if (!make_room_in(p.home, out, n_out)) {
      ++stats_.dropped_probe_limit;
      return FlowPacketOutcome::ProbeLimit;
    }
    bucket = p.home;
  } else if (used_ == capacity_ && !make_room(out, n_out)) {
    ++stats_.dropped_full;
    return FlowPacketOutcome::TableFull;
  }
  s = alloc_slot();
  Entry &e = entries_[s];
  e.key = p.key;
  homes_[s] = p.home;
  e.state = uint8_t(kUsed | (p.swapped ? kFwdRev : 0));
  e.pad = 0;
  reset_record(e);
  e.last_ns = p.time;
  index_insert(s, p.home, bucket, p.tag);
  if (attrs_) count_attrs(s, e, 0, p);
  count(e, 0, p);
  if (p.labels) [[unlikely]] apply_labels(s, e, *p.labels);
  ++stats_.created;
  ++stats_.packets;
  return FlowPacketOutcome::Counted;
}

FlowPacketOutcome FlowCache::account(const PacketMeta &m, uint64_t time_ns, FlowRecord *out,
                                     unsigned *n_out, const PacketLabels *labels, const FlowPacketSource *source) {
  *n_out = 0;
  if (time_ns > now_) now_ = time_ns;
  if (!m.is_ip()) {
    ++stats_.not_ip;
    return FlowPacketOutcome::NotIp;
  }
  Prepared p;
  prepare(m, time_ns, labels, source, p);
  return account_prepared(p, out, n_out);
}

// Packets [base, base + k) of an account_batch() call, k <= kHashGroup:
// their keys made, hashed side by side, placed, each in scratch_ at its
// number % kPrepared.
[[gnu::always_inline]] inline void FlowCache::prepare_group(const PacketMeta *const *metas, const uint64_t *times_ns,
                                                            unsigned base, unsigned k, const PacketLabels *const *labels,
                                                            const FlowPacketSource *sources) {
  uint64_t words[kHashGroup][5], hashes[kHashGroup];
  for (unsigned i = 0; i < k; ++i) {
    const PacketMeta &m = *metas[base + i];
    Prepared &p = scratch_[(base + i) % kPrepared];
    if (!m.is_ip()) {
      p.is_ip = 0;
      p.time = times_ns[base + i];
      std::memset(words[i], 0, sizeof words[i]);  // hashed, not used
      continue;
    }
    prepare_key(m, times_ns[base + i], labels ? labels[base + i] : nullptr, sources ? &sources[base + i] : nullptr, p,
                words[i]);
  }
  SLUICE_FLOW_CACHE_HASH_BATCH(hash_key_, words, k, hashes);
  for (unsigned i = 0; i < k; ++i) {
    Prepared &p = scratch_[(base + i) % kPrepared];
    if (p.is_ip) place(hashes[i], p);
  }
}

// The entry of the packet's first matching tag, both lines, on its way: the
// home bucket's line must have come by now, or this waits for it.
[[gnu::always_inline]] inline void FlowCache::prefetch_entry(Prepared &p) const {
  if (!p.is_ip) return;
  const Bucket &bk = buckets_[p.home];
  if (uint32_t mask = match_tags(bk, p.tag)) {
    p.hint = bk.slot[next_way(mask)];
    const Entry *e = &entries_[p.hint];
    prefetch(e);
    prefetch(reinterpret_cast<const char *>(e) + 64);
  }
}

// A software pipeline a packet at a time: as packet i is accounted, packet
// i + kEntryAhead's entry and packet i + kBucketAhead's home bucket are on
// their way, so each of the two dependent misses has the work of several
// packets to arrive in, and no more lines are in flight at once than the
// core can track (with whole groups of 16 or 32 stages apart, the prefetches
// beyond that were dropped and the lookups waited again: 1M flows in random
// order, bench_flow_cache). The results are exactly those of account() on
// each packet in order: only prefetches run ahead; lookups, inserts and
// removals happen in order.
void FlowCache::account_batch(const PacketMeta *const *metas, const uint64_t *times_ns, unsigned n,
                              FlowPacketOutcome *outcomes, FlowRecord *out, unsigned *n_out,
                              const PacketLabels *const *labels, const FlowPacketSource *sources) {
  unsigned total = 0, prepared = 0;  // packets [0, prepared) are in scratch_
  const unsigned lead = std::min(n, kBucketAhead);
  for (; prepared < lead; prepared += std::min(kHashGroup, n - prepared))
    prepare_group(metas, times_ns, prepared, std::min(kHashGroup, n - prepared), labels, sources);
  for (unsigned i = 0; i < lead; ++i)
    if (scratch_[i].is_ip) prefetch(&buckets_[scratch_[i].home]);
  for (unsigned i = 0; i < std::min(n, kEntryAhead); ++i) prefetch_entry(scratch_[i]);
  for (unsigned i = 0; i < n; ++i) {
    if (const unsigned b = i + kBucketAhead; b < n) {
      if (b == prepared) {  // the next group, as its first packet's bucket is wanted
        const unsigned k = std::min(kHashGroup, n - prepared);
        prepare_group(metas, times_ns, prepared, k, labels, sources);
        prepared += k;
      }
      const Prepared &pb = scratch_[b % kPrepared];
      if (pb.is_ip) prefetch(&buckets_[pb.home]);
    }
    if (i + kEntryAhead < n) prefetch_entry(scratch_[(i + kEntryAhead) % kPrepared]);
    const Prepared &p = scratch_[i % kPrepared];
    if (p.time > now_) now_ = p.time;
    FlowPacketOutcome o;
    if (!p.is_ip) {
      ++stats_.not_ip;
      o = FlowPacketOutcome::NotIp;
    } else {
      unsigned r = 0;
      o = account_prepared(p, out + total, &r);
      total += r;
    }
    if (outcomes) outcomes[i] = o;
  }
  *n_out = total;
}

// Slots whose flows have left, freed (FlowCache::release) kAhead flows
// later, in the order they left, their home buckets prefetched meanwhile.
// The expiry scan reads entries in slot order, which the hardware
// prefetcher follows, but each flow that leaves also takes its key out of
// its home bucket, anywhere in the index: at a million flows that bucket
// had left the caches (its flow had been idle for the timeout), and freeing
// each slot at once waited for memory every time.
class FlowCache::LeavingSlots {
 public:
  explicit LeavingSlots(FlowCache &cache) : cache_(cache) {}
  ~LeavingSlots() { free_all(); }
  LeavingSlots(const LeavingSlots &) = delete;
  LeavingSlots &operator=(const LeavingSlots &) = delete;

  void push(uint32_t slot) {
    prefetch(&cache_.buckets_[cache_.homes_[slot]]);
    if (count_ == kAhead) {
      cache_.release(ring_[head_]);
      ring_[head_] = slot;
      head_ = (head_ + 1) % kAhead;
    } else {
      ring_[(head_ + count_++) % kAhead] = slot;
    }
  }
  void free_all() {
    for (; count_; --count_, head_ = (head_ + 1) % kAhead) cache_.release(ring_[head_]);
  }
  unsigned pending() const { return count_; }

 private:
  static constexpr unsigned kAhead = 8;
  FlowCache &cache_;
  uint32_t ring_[kAhead];
  unsigned head_ = 0, count_ = 0;
};

size_t FlowCache::expire(uint64_t now_ns, size_t begin, size_t end, FlowRecord *out, size_t max_out,
                         size_t *n_out) {
  if (now_ns > now_) now_ = now_ns;
  size_t n = 0;
  LeavingSlots leaving(*this);
  const size_t stop = std::min<size_t>(end, bump_);
  // The slots in use, 64 to a word of used_bits_: a sparse table (a trace
  // with gaps scans all of it often) costs a word per 64 slots, not a
  // cache line per two.
  for (size_t i = begin; i < stop;) {
    size_t word = i >> 6, word_end = std::min(stop, (word + 1) << 6);
    uint64_t bits = used_bits_[word] & (~uint64_t(0) << (i & 63));
    if (word_end & 63) bits &= (uint64_t(1) << (word_end & 63)) - 1;
    for (; bits; bits &= bits - 1) {
      size_t slot = (word << 6) + size_t(__builtin_ctzll(bits));
      if (n == max_out) {
        *n_out = n;
        return slot;
      }
      unsigned r = settle(entries_[slot], out[n]);
      if (r & kEmitted) ++n;
      if (r & kGone) leaving.push(uint32_t(slot));
    }
    i = word_end;
  }
  *n_out = n;
  return std::max(begin, end);
}

size_t FlowCache::flush(FlowRecord *out, size_t max_out, size_t *n_out) {
  size_t n = 0;
  LeavingSlots leaving(*this);
  while (used_ - leaving.pending() > 0 && n < max_out) {
    if (flush_pos_ >= bump_) flush_pos_ = 0;
    uint32_t i = flush_pos_++;
    Entry &e = entries_[i];
    if (!(e.state & kUsed)) continue;
    unsigned r = settle(e, out[n]);
    if (r & kEmitted) {
      ++n;
      if (!(r & kGone)) ++stats_.ended_empty;  // rolled over: the rest of the flow is empty
    } else if (!(r & kGone)) {
      if (has_packets(e))
        emit(e, e.state & kEnded ? FlowEndReason::EndOfFlow : FlowEndReason::ForcedEnd, out[n++]);
      else
        ++stats_.ended_empty;
    }
    leaving.push(i);
  }
  leaving.free_all();
  if (used_ == 0) {  // empty: start over from a clean slate
    bump_ = 0;
    free_head_ = kNone;
    hand_ = 0;
    flush_pos_ = 0;
  }
  *n_out = n;
  return used_;
}

// ---- FlowCacheSlicer ----

FlowCacheSlicer::FlowCacheSlicer(uint64_t period_ns, uint64_t slices) : period_(period_ns), slices_(slices) {
  if (period_ns == 0) throw std::invalid_argument("GC period must be > 0");
  if (slices == 0 || slices > (1ull << 32)) throw std::invalid_argument("GC slices out of range 1..2^32");
}

namespace {
// a * b / c without overflow (a < c)
inline uint64_t muldiv(uint64_t a, uint64_t b, uint64_t c) {
  return uint64_t((unsigned __int128)a * b / c);
}
}  // namespace

uint64_t FlowCacheSlicer::next_due_ns() const { return base_ + muldiv(slice_, period_, slices_); }

bool FlowCacheSlicer::run(FlowCache &cache, uint64_t now_ns, FlowRecord *out, size_t max_out,
                          size_t *n_out) {
  size_t n = 0;
  if (!started_) {
    started_ = true;
    base_ = now_ns;
  }
  // More than a period behind: keep one round's worth of slices due.
  if (now_ns >= next_due_ns() && now_ns - next_due_ns() >= period_)
    base_ = now_ns - period_ - muldiv(slice_, period_, slices_) + 1;
  const size_t S = cache.slots();
  while (now_ns >= next_due_ns()) {
    size_t b = size_t(muldiv(slice_, S, slices_)), e = size_t(muldiv(slice_ + 1, S, slices_));
    if (pos_ < b || pos_ > e) pos_ = b;
    size_t got = 0;
    pos_ = cache.expire(now_ns, pos_, e, out + n, max_out - n, &got);
    n += got;
    if (pos_ < e) {
      *n_out = n;
      return false;
    }
    ++scanned_;
    if (++slice_ == slices_) {
      slice_ = 0;
      base_ += period_;
    }
    pos_ = size_t(muldiv(slice_, S, slices_));
  }
  *n_out = n;
  return true;
}

}  // namespace sluice
