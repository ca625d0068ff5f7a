// FlowCache: the per-lane flow table behind the FlowTable element, and the
// slice-at-a-time expiry schedule behind GCSlicer (FlowCacheSlicer). No
// DPDK, no locks, no allocation after construction: one instance belongs to
// one lane and is only ever touched by that lane's thread.
//
// What a flow is
//
// * Key: the fields of FlowCacheConfig::key_* taken from PacketMeta (fields
//   left out are zero, in the hash, in the comparison and in the record),
//   plus the address family (FlowKey::is_ipv6), which is always part of it.
//   VLAN is PacketMeta::vlan_outer. ICMP "ports" are what PacketMeta gives
//   (0 and type << 8 | code), so in bi mode an echo request and its reply
//   are two biflows, as NetFlow/IPFIX meters key them. Keys are compared in
//   full (40 bytes) after a hash-tag match, never by hash alone.
// * Packets without a valid IP header (!m.is_ip()) are not metered:
//   FlowPacketOutcome::NotIp, counted in Stats::not_ip. Packets with an IP
//   header but no L4 header (!m.has_l4(): fragments after the first, L4
//   truncated) are metered with ports 0 and no TCP flags: the non-first
//   fragments of a datagram form a flow of their own (src, dst, proto, 0, 0),
//   as in meters that do not reassemble.
// * Direction bi: both directions of a conversation share one entry. The key
//   is stored in a canonical order (the (address, port) pair that compares
//   lower first), hashed and compared in that order; the entry remembers
//   which order its forward direction has, and a packet is forward when its
//   own order matches it. Forward is the direction of the flow's first
//   packet. With an asymmetric key (src without dst, sport without dport)
//   the two directions have different keys and do not meet.
//   Direction uni: every direction is a flow of its own; records have
//   biflow == 0 and rev all zero.
// * Counters per direction (FlowCounters): packets, octets (sum of
//   PacketMeta::ip_total_length), first and last packet time (the smallest
//   and largest time seen, so first <= last even when time goes backwards),
//   min and max IP length (clamped to 65535), OR of the TCP flags (TCP only).
//
// When a flow ends (record reasons; all times are packet times)
//
// * TCP FIN or RST marks the flow ended but keeps the entry, so the rest of
//   the close (the FIN back, the last ACK) is counted in the same flow. An
//   ended flow leaves with reason EndOfFlow when a SYN arrives for its key
//   (a SYN without ACK; in uni mode a SYN|ACK too, the responder's first
//   packet of the next connection): the old record leaves, a new flow starts
//   with that packet; or when it has had no packet for the end grace,
//   min(idle, end_grace_ns) (default 1 s): long enough for the close, short
//   enough that a closed connection does not hold an entry for the full idle
//   timeout; or at flush. A flow ended by FIN/RST keeps the active timeout
//   (TCP half-close can carry data for a long time).
// * Idle: last packet (either direction, any record of the entry) + idle <=
//   now -> IdleTimeout (EndOfFlow if ended). The entry is freed.
// * Active: first packet of the current record + active <= now ->
//   ActiveTimeout; the entry stays, with the same key and orientation, and
//   counts on in a fresh record (counters reset). If a flow then ends with
//   nothing in its fresh record, it leaves no further record
//   (Stats::ended_empty counts those).
// * "now" is the largest packet time seen (account(), and the now_ns given
//   to expire()): time going backwards never underflows and never un-expires
//   a flow. Timeouts are checked by the expiry scan (expire(), in slices),
//   and also by account() on the flow a packet finds, by the make-room sweep
//   and by flush(), all with the same rules against the same now. When a
//   check finds both deadlines passed they apply in deadline order (active
//   deadline first: an ActiveTimeout record, then the empty rest ends
//   silently; else the idle end). So the records do not depend on when the
//   scan ran, only on when they leave (tested against a reference model with
//   and without a GC).
// * Full (capacity entries in use) and a packet starts a new flow: first a
//   bounded CLOCK sweep (below) frees an entry that is already due (idle /
//   end grace: exported with its own reason; or an empty active-timeout
//   remainder). Failing that, on_full evict takes a victim and exports it
//   with LackOfResources (an ended flow gets EndOfFlow, its known end; both
//   count in Stats::evicted); on_full drop returns TableFull and does not
//   meter the packet (Stats::dropped_full).
// * flush() (end of input) ends every flow: what is due by the rules above
//   leaves with that reason, the rest with ForcedEnd (EndOfFlow if ended).
//
// Layout and cost
//
// * Entries: one array of `capacity` 128-byte entries (two adjacent cache
//   lines: key, entry times, flags, lengths and TTLs in the first, the four
//   64-bit counter pairs in the second), aligned to 128 so the adjacent-line
//   prefetcher brings both. Free entries form an intrusive free list, plus a
//   bump pointer for never-used ones, so construction touches nothing. Each
//   entry's home bucket is in an array of its own (4 bytes a slot), read
//   only when the entry leaves the index.
// * Index: ceil(capacity / 4) 64-byte buckets of 8 ways (load <= 50% when
//   full): 8 16-bit tags (0 = empty), 8 32-bit entry numbers and an overflow
//   count. A key's home bucket is fastrange(hash high 32 bits); its tag the
//   low 16 bits. Lookup compares the 8 tags at once (SSE2), then the full key
//   of each matching entry; buckets overflow into the next one (linear
//   probing by bucket), and a bucket's overflow count (keys that passed it
//   because it was full) tells a lookup when to stop, so deletion needs no
//   tombstones (as in Folly's F14). Per packet: one bucket line plus one
//   entry line pair, usually.
// * Probe bound: a key is stored within kMaxProbe (16) buckets of its home,
//   its window, so a lookup, insert or removal visits at most 16 buckets
//   whatever the keys. A new flow whose window is full is handled like a new
//   flow in a full table, from its home bucket's 8 entries: one that is due
//   leaves with its own reason; else, on_full evict, the ended or else the
//   least recently active one is evicted (EndOfFlow / LackOfResources,
//   Stats::evicted); on_full drop refuses the packet (outcome ProbeLimit,
//   Stats::dropped_probe_limit). Both count in Stats::probe_limit. At <= 50%
//   load and a random hash, displacement falls about 8x per bucket (a
//   simulation of 40M inserts with churn into 10M flows went 9 buckets at
//   most), so this does not happen by chance; Stats::longest_probe shows how
//   far inserts went.
// * Hash: SipHash-1-3 of the 40 key bytes under a 128-bit secret key
//   (flow_hash.hh): per table, from getrandom(), or FlowCacheConfig::hash_key,
//   or SLUICE_FLOW_HASH_KEY (32 hex digits). Whoever sends the packets cannot
//   tell where a key lands, so cannot fill a window on purpose. (The CRC32C
//   hash this replaced was linear with a fixed seed: 60K IPv6 keys solved to
//   share one bucket and tag made each packet compare its key with all of
//   them.) Not symmetric (the canonical key order makes bi mode work), never
//   the RSS hash. Records do not depend on the key: slots are handed out in
//   packet order and swept (CLOCK), scanned (expire) and flushed in slot
//   order; the key only decides, where a window is full, which flow leaves.
//   account_batch() hashes a batch's keys eight at a time (flow_hash_batch:
//   side by side where the CPU has AVX2) and runs a pipeline a packet at a
//   time: packet i + 16's home bucket and packet i + 8's entry on their way
//   while packet i is accounted; the entry found for the prefetch is tried
//   first (its key compared) before the index is searched again.
// * Victim: CLOCK (second chance). Every packet sets its entry's reference
//   bit; the hand sweeps at most kSweep entries from where it stopped,
//   clearing reference bits, and takes the first entry that is due, ended or
//   unreferenced; if all were referenced, the least recently active of them.
//   O(1) per new flow, no per-packet list maintenance, approximately LRU.
// * Extension fields (flow_extension.hh): the first packet with labels maps
//   a second array, kFlowExtBytes (192) per entry slot, whose pages are
//   touched by the flows that get labels (Entry state bit kExt: the slot
//   holds this flow's values; a new flow or a restart clears it, an active
//   timeout keeps it). Tables that never see a label map nothing.
// * Optional fields (FlowCacheConfig::fields, FlowField): a third array,
//   64 bytes per entry slot (Attrs), mapped with the others when the table
//   keeps any field but `icmp`. Per direction, from the direction's first
//   packet in the current record: ToS, interface, MAC addresses; and the
//   smallest and largest TTL of its packets. Of the record's first packet:
//   flowDirection, inner VLAN, top MPLS label. An active timeout starts them
//   over with the fresh record, as the counters. The TTLs, the only ones a
//   packet after the first of its direction changes, are kept in the
//   entry's first line: the second array's line is touched by a
//   direction's first packet only (with it in the array, every packet
//   touched it: 4 lines a packet, not 3; docs/performance.md).
// * Memory: 128 + 16 + 4 = 148 bytes per flow of capacity (bytes()), 212 with
//   optional fields, and a bit per flow (the slots in use, for the expiry
//   scan), mapped once
//   (anonymous mmap, transparent huge pages advised); pages are touched on
//   first use unless prefault is set, or populate_on_thread brings them in
//   on a thread of its own (PagePopulator: the index at once, the slots'
//   arrays ahead of the slots handed out). NUMA: pages land on the node of the
//   thread that first touches them: construct (with prefault) or first use
//   the cache on its lane's thread.
// * Measured (tests/bench/bench_flow_cache.cc, uniform random flows, a shared
//   VM with 150-300 ns DRAM latency): account() 55 ns/packet at 10K flows,
//   ~380 at 1M, ~550 at 10M (two dependent cache misses); account_batch()
//   30, ~60 and ~85 ns (with the former CRC32C hash). SipHash-1-3 in its
//   place costs about 25, 20 and 35 ns more per packet in account_batch()
//   (the same bench, both hashes in one run, medians of 3 on a loaded VM:
//   56 -> 81, 103 -> 124, 118 -> 153 ns). Use account_batch() on the data
//   path. expire() that finds every flow due: ~30 ns per flow at 1M flows,
//   against ~90 when each slot was freed at once (the home buckets of the
//   flows leaving now prefetched a few flows ahead; both in one run of
//   bench_flow_cache on a 2-vCPU AMD EPYC VM). The pipeline a packet at a
//   time: account_batch() at 1M flows in random order 52 ns/packet in
//   batches of 32 (44 in batches of 256) against 77 with the whole batch's
//   buckets prefetched at once (the same VM, one run; docs/performance.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "engine/flow/flow_hash.hh"
#include "engine/flow/flow_record.hh"
#include "engine/flow/page_populator.hh"
#include "engine/packet/packet_meta.hh"

namespace sluice {

struct FlowCacheConfig {
  uint64_t capacity = 1 << 20;                      // flows, 1 .. 2^32 - 2
  uint64_t idle_ns = 15'000'000'000ull;             // > 0
  uint64_t active_ns = 1'800'000'000'000ull;        // > 0
  bool bidirectional = true;  // direction bi: both directions in one entry / one biflow record
  bool key_src = true, key_dst = true, key_proto = true, key_sport = true, key_dport = true,
       key_vlan = true;
  bool evict_when_full = true;  // on_full evict | drop
  uint16_t lane = 0;            // copied into every record
  uint64_t end_grace_ns = 1'000'000'000ull;  // after FIN/RST: ends after min(idle, this) without packets; > 0
  bool prefault = false;  // touch all memory in the constructor (no page faults on the data path later)
  // Bring the memory in on a thread of its own instead (PagePopulator), while
  // the lane runs: the index at once, the slots' arrays ahead of the slots
  // handed out. populate_setup, where set, runs first on that thread (its
  // placement: the pages land on the node of the thread that faults them).
  bool populate_on_thread = false;
  std::function<void()> populate_setup;
  // Optional record fields to keep (FlowTable `fields`): the others stay
  // zero in records. All but `icmp` (from the key) need a second array.
  FlowFieldSet fields = 0;

  // The hash's secret key. Unset: SLUICE_FLOW_HASH_KEY when set, else random
  // from the OS (flow_hash_key_for_new_table()). Records do not depend on it
  // (header comment), but a fixed key repeats the index layout exactly.
  std::optional<FlowHashKey> hash_key;
};

// What a table keeping optional fields reads from a packet besides its
// PacketMeta: where it came in, and its first bytes (the MAC addresses of
// an Ethernet frame, PacketMeta::is_ethernet()).
struct FlowPacketSource {
  const uint8_t *frame = nullptr;  // null: no MAC addresses
  uint32_t if_index = 0;
  uint8_t flow_direction = 0;
};

enum class FlowPacketOutcome : uint8_t {
  Counted,    // metered in a flow
  NotIp,      // non-IP or no valid IP header: not metered
  TableFull,  // on_full drop and no room: not metered
  ProbeLimit, // on_full drop and the flow's kMaxProbe buckets are full: not metered
};

class FlowCache {
 public:
  // Records account() can emit for one packet: at most one (the flow it finds ends or
  // rolls over, or the entry freed to make room for it, never both).
  static constexpr unsigned kMaxRecordsPerPacket = 1;
  // Entries the CLOCK hand looks at, at most, to free one.
  static constexpr unsigned kSweep = 16;
  // account_batch() prepares (hashes, prefetches) this many packets at a time.
  // account_batch()'s pipeline: keys made and hashed kHashGroup at a time
  // (the vector hash's width); packet i + kBucketAhead's home bucket
  // prefetched, packet i + kEntryAhead's tags matched and its entry
  // prefetched, as packet i is accounted (docs/performance.md).
  static constexpr unsigned kHashGroup = 8, kBucketAhead = 16, kEntryAhead = 8;
  // Buckets a lookup, insert or removal visits at most: a key is stored within
  // this many buckets from its home (fewer in a table with fewer buckets).
  static constexpr unsigned kMaxProbe = 16;

  // Maps all memory up front. Throws std::invalid_argument for a config out of
  // range, std::bad_alloc when the memory cannot be mapped.
  explicit FlowCache(const FlowCacheConfig &cfg);
  ~FlowCache();
  FlowCache(const FlowCache &) = delete;
  FlowCache &operator=(const FlowCache &) = delete;

  // One packet at packet time time_ns. Records of flows it ended go to out[0..*n_out)
  // (room for kMaxRecordsPerPacket needed): a flow restarted by a SYN after its end, a
  // flow found due (idle, end grace: exported before the packet starts a new flow), an
  // active timeout reached (the packet counts in the fresh record), the entry freed or
  // evicted to make room.
  // `labels` (may be null): values for the flow's extension fields; a field
  // keeps the first value its flow got.
  // `source` (may be null): for the optional fields (FlowCacheConfig::fields).
  FlowPacketOutcome account(const PacketMeta &m, uint64_t time_ns, FlowRecord *out, unsigned *n_out,
                            const PacketLabels *labels = nullptr, const FlowPacketSource *source = nullptr);

  // The same for n packets, in order, with the same results as n account() calls; hashes
  // and prefetches up to kBucketAhead packets ahead. outcomes[i] (may be null) per packet; records to
  // out[0..*n_out), room for n * kMaxRecordsPerPacket needed. labels[i] (labels itself may be
  // null, and so may each) and sources[i] (sources may be null) as in account().
  void account_batch(const PacketMeta *const *metas, const uint64_t *times_ns, unsigned n,
                     FlowPacketOutcome *outcomes, FlowRecord *out, unsigned *n_out,
                     const PacketLabels *const *labels = nullptr, const FlowPacketSource *sources = nullptr);

  // Expiry scan of entry slots [begin, end) at time now_ns (now becomes max(now, now_ns)):
  // idle / end-grace flows leave and are freed, active timeouts leave and roll over.
  // Records to out[0..*n_out), at most max_out. Returns `end` when the range is done,
  // else the first slot not looked at (out was full): call again from there. Slots past
  // slots() are ignored.
  size_t expire(uint64_t now_ns, size_t begin, size_t end, FlowRecord *out, size_t max_out,
                size_t *n_out);

  // End of input: ends every flow (see the header comment for reasons). Records to
  // out[0..*n_out), at most max_out per call. Returns the flows still in the table: call
  // until it returns 0. The table is then empty and can be used again.
  size_t flush(FlowRecord *out, size_t max_out, size_t *n_out);

  // New timeouts (both > 0, else invalid_argument), in force from the next
  // check on: a running table reconfigured (`sluice ctl write`, reload).
  void set_timeouts(uint64_t idle_ns, uint64_t active_ns);
  // on_full evict (true) or drop, from the next new flow on.
  void set_evict_when_full(bool evict) { cfg_.evict_when_full = evict; }

  // What each flow in entry slots [begin, end) has counted so far, as a
  // record with reason 0, the table unchanged (`sluice ctl flows`).
  void peek(size_t begin, size_t end, const std::function<void(const FlowRecord &)> &fn) const;

  // A hot reload replaced this table's element (a new capacity, key or
  // direction): every flow of `from` moves in, counters, times and flags
  // kept. Each direction of a flow is re-keyed with this table's key and
  // merged into the flow it belongs to here, so flows that only differed by a
  // field this key leaves out become one, and bi and uni tables exchange
  // flows (a biflow splits into its two directions; two directions meet).
  // The forward direction stays the one with the first packet. A direction
  // that finds no room leaves at once with reason LackOfResources through
  // `evicted` (counted in Stats::evicted). `from` is left as it was.
  void adopt(const FlowCache &from, const std::function<void(const FlowRecord &)> &evicted);

  size_t slots() const { return capacity_; }     // entry slots, the range of expire()
  // The members that change only with set_timeouts() and
  // set_evict_when_full(), as one span of bytes (cfg_ up to used_): the
  // JIT embeds them in a fused loop as constants.
  std::pair<const void *, size_t> constant_bytes() const {
    return {&cfg_, size_t(reinterpret_cast<const char *>(&used_) - reinterpret_cast<const char *>(&cfg_))};
  }
  size_t active() const { return used_; }        // entries in use
  size_t slots_used_ever() const { return bump_; }  // slots handed out since the table was last empty
  const PagePopulator *populator() const { return populator_.get(); }  // null: populate_on_thread off
  size_t capacity() const { return capacity_; }  // flows
  size_t bytes() const;                          // memory mapped for entries and index
  uint64_t now() const { return now_; }          // largest time seen
  const FlowCacheConfig &config() const { return cfg_; }
  const FlowHashKey &hash_key() const { return hash_key_; }  // the key in use

  struct Stats {
    uint64_t packets = 0;       // packets metered (outcome Counted)
    uint64_t created = 0;       // flows started (a new entry, or a SYN/idle restart in one)
    uint64_t evicted = 0;       // entries taken to make room (on_full evict), live or ended
    uint64_t dropped_full = 0;  // packets not metered: on_full drop and no room
    uint64_t dropped_probe_limit = 0;  // packets not metered: on_full drop and the flow's buckets full
    uint64_t probe_limit = 0;   // new flows whose kMaxProbe buckets were full (evicted one there, or dropped)
    uint64_t longest_probe = 0; // most buckets an insert visited (1: its home), <= kMaxProbe
    uint64_t not_ip = 0;        // packets not metered: no valid IP header
    uint64_t ended_empty = 0;   // flows that ended with an empty record after an active timeout
    uint64_t labels_lost = 0;   // packets whose labels were not kept: no memory for extension fields
    uint64_t ended[6] = {};     // records exported, by FlowEndReason (index = IPFIX value)
    uint64_t records() const { return ended[1] + ended[2] + ended[3] + ended[4] + ended[5]; }
  };
  // Invariants: packets + not_ip + dropped_full + dropped_probe_limit = packets given to
  // account(); after a full flush, created = records() - ended[ActiveTimeout] + ended_empty.
  const Stats &stats() const { return stats_; }

  // Implementation types, defined in flow_cache.cc.
  struct Entry;     // 128 bytes
  struct Bucket;    // 64 bytes
  struct Prepared;  // a packet's key, hash and fields, ready to look up
  struct Attrs;     // 64 bytes: an entry's optional fields
  class LeavingSlots;  // slots to free a few flows later (expire, flush)

 private:
  struct Mapping {
    void *p = nullptr;
    size_t n = 0;
    ~Mapping();
  };
  void prepare(const PacketMeta &m, uint64_t t, const PacketLabels *labels, const FlowPacketSource *source,
               Prepared &p) const;
  void count_attrs(uint32_t slot, Entry &e, unsigned d, const Prepared &p);
  void fill_attrs(uint32_t slot, const Entry &e, FlowRecord &rec) const;
  void adopt_attrs(const FlowCache &from, uint32_t from_slot, unsigned d, uint32_t slot, unsigned to,
                   bool record_first, bool first);
  void merge_direction(const FlowCache &from, uint32_t from_slot, unsigned d, uint32_t s, unsigned to);
  void swap_directions(uint32_t s);
  void apply_labels(uint32_t slot, Entry &e, const PacketLabels &labels);
  FlowPacketOutcome account_prepared(const Prepared &p, FlowRecord *out, unsigned *n_out);
  void prepare_key(const PacketMeta &m, uint64_t t, const PacketLabels *labels, const FlowPacketSource *source,
                   Prepared &p, uint64_t words[5]) const;  // all but the hash: the canonical key's words to words
  void place(uint64_t hash, Prepared &p) const;
  void prepare_group(const PacketMeta *const *metas, const uint64_t *times_ns, unsigned base, unsigned k,
                     const PacketLabels *const *labels, const FlowPacketSource *sources);
  void prefetch_entry(Prepared &p) const;
  uint32_t lookup(const Prepared &p) const;
  uint32_t free_way_bucket(uint32_t home) const;
  void index_insert(uint32_t slot, uint32_t home, uint32_t bucket, uint16_t tag);
  void index_remove(uint32_t slot);
  uint32_t alloc_slot();
  void prefetch_slot(uint32_t s) const;  // its lines, for a write
  void release(uint32_t slot);
  bool make_room(FlowRecord *out, unsigned *n_out);
  bool make_room_in(uint32_t bucket, FlowRecord *out, unsigned *n_out);
  bool free_if_due(uint32_t slot, FlowRecord *out, unsigned *n_out);
  void evict(uint32_t slot, FlowRecord *out, unsigned *n_out);
  unsigned settle(Entry &e, FlowRecord &rec);
  void fill(const Entry &e, FlowEndReason r, FlowRecord &rec) const;  // the record, nothing counted
  void emit(const Entry &e, FlowEndReason r, FlowRecord &rec);

  FlowCacheConfig cfg_;
  uint64_t key_mask_[5];  // key bytes to keep (FlowKey layout), with and without L4
  uint64_t key_mask_no_l4_[5];
  uint64_t end_timeout_ns_;  // min(idle, end grace)
  size_t capacity_;
  uint32_t nbuckets_;
  uint32_t max_probe_;  // min(kMaxProbe, nbuckets_)
  Mapping entry_map_, bucket_map_, scratch_map_;
  Entry *entries_;
  Bucket *buckets_;
  // Packets account_batch() has prepared and not yet accounted, packet i at
  // i % kPrepared.
  static constexpr unsigned kPrepared = 32;
  static_assert(kBucketAhead + kHashGroup <= kPrepared && kEntryAhead < kBucketAhead);
  Prepared *scratch_;
  // Optional fields: an Attrs per entry slot, when the table keeps any
  // that need one (else null). Set once: a JIT constant, so a fused loop
  // without optional fields has no code for them.
  Mapping attrs_map_;
  Attrs *attrs_ = nullptr;
  // Each entry slot's home bucket, read only to take its key out of the
  // index (not in the entry: its first line holds the TTLs instead). Set
  // once, a JIT constant.
  Mapping home_map_;
  uint32_t *homes_ = nullptr;
  // A bit per entry slot, set while it holds a flow: the expiry scan reads
  // these, not the entries. Set once, a JIT constant too.
  Mapping used_map_;
  uint64_t *used_bits_ = nullptr;
  size_t used_ = 0;
  // Not a JIT constant (after used_): the key stays out of emitted IR.
  FlowHashKey hash_key_;
  // Extension fields: kFlowExtBytes per entry slot, mapped at the first
  // label (so not a JIT constant either).
  Mapping ext_map_;
  uint8_t *ext_ = nullptr;
  bool map_ext();
  uint32_t bump_ = 0;       // slots >= bump_ were never used
  uint32_t free_head_;      // free list through Entry::home
  uint32_t hand_ = 0;       // CLOCK hand
  uint32_t flush_pos_ = 0;  // where flush() continues
  uint64_t now_ = 0;
  Stats stats_;
  // Last: stopped before the mappings it brings in go.
  std::unique_ptr<PagePopulator> populator_;
};

// GCSlicer's schedule over one FlowCache: the slots are cut into `slices`
// consecutive slices; every period/slices of packet time the next slice is
// scanned (FlowCache::expire), so every entry is looked at once per period and
// no call pays for a full scan. Slice j is slots [j*S/slices, (j+1)*S/slices).
// The first run() scans slice 0 at once. When packet time jumps (an idle
// lane, a gap in a trace), the slices due are scanned in order, but at most
// one period's worth (`slices` slices, one full scan) per jump: scanning the
// same slots twice at the same time would find nothing new.
class FlowCacheSlicer {
 public:
  FlowCacheSlicer(uint64_t period_ns, uint64_t slices);  // both >= 1, else invalid_argument

  // Scans the slices due at now_ns. Records to out[0..*n_out), at most max_out. Returns
  // true when caught up, false when out filled first: call again to go on.
  bool run(FlowCache &cache, uint64_t now_ns, FlowRecord *out, size_t max_out, size_t *n_out);

  uint64_t slices_scanned() const { return scanned_; }
  uint64_t next_due_ns() const;  // time the next slice is due (after the first run())

 private:
  uint64_t period_, slices_;
  bool started_ = false;
  uint64_t base_ = 0;   // time slice 0 of the current round is due
  uint64_t slice_ = 0;  // next slice to scan
  size_t pos_ = 0;      // where its scan continues
  uint64_t scanned_ = 0;
};

}  // namespace sluice
