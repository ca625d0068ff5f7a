#include "engine/runtime/eth_device.hh"

#include <pcap/pcap.h>
#include <rte_bus_vdev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf_dyn.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "engine/packet/parse.hh"
#include "engine/packet/rss_hash.hh"
#include "engine/runtime/dpdk_env.hh"
#include "engine/runtime/packet.hh"

namespace sluice {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  return s;
}

bool looks_like_pci(const std::string &s) {
  auto hex = [](char c) { return isxdigit(static_cast<unsigned char>(c)) != 0; };
  // [dddd:]bb:dd.f
  std::string t = s.size() == 7 ? "0000:" + s : s;
  if (t.size() != 12) return false;
  for (int i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (!hex(t[i])) return false;
  return t[4] == ':' && t[7] == ':' && t[10] == '.' && t[11] >= '0' && t[11] <= '7';
}

}  // namespace

bool parse_device(const std::string &text, DeviceSpec &out, std::string *error) {
  out = DeviceSpec{};
  out.text = text;
  auto colon = text.find(':');
  std::string kind = colon == std::string::npos ? text : text.substr(0, colon);
  std::string rest = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (looks_like_pci(text)) {
    out.kind = DeviceSpec::Kind::Pci;
    out.name = text.size() == 7 ? "0000:" + text : text;
    return true;
  }
  if (kind == "pcap") {
    out.kind = DeviceSpec::Kind::Pcap;
    size_t start = 0;
    while (start <= rest.size()) {
      size_t comma = rest.find(',', start);
      std::string f = trim(rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (!f.empty()) out.files.push_back(f);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (out.files.empty()) return *error = "device '" + text + "': 'pcap:' needs a file name", false;
    return true;
  }
  if (kind == "af_packet" || kind == "af_xdp") {
    out.kind = kind == "af_packet" ? DeviceSpec::Kind::AfPacket : DeviceSpec::Kind::AfXdp;
    out.name = trim(rest);
    if (out.name.empty()) return *error = "device '" + text + "': '" + kind + ":' needs an interface name", false;
    return true;
  }
  if (text == "null") {
    out.kind = DeviceSpec::Kind::Null;
    return true;
  }
  *error = "device '" + text +
           "' is not one Sluice knows: use a PCI address (0000:3b:00.0), pcap:FILE, af_packet:IFACE, "
           "af_xdp:IFACE or null";
  return false;
}

EthDevice::EthDevice(const DeviceSpec &spec, const std::string &element, unsigned queues, unsigned rx_desc,
                     bool symmetric, rte_mempool *pool, rte_mempool *copy_pool)
    : spec_(spec), element_(element), rx_desc_(rx_desc), symmetric_(symmetric), pool_(pool), copy_pool_(copy_pool) {
  static std::atomic<unsigned> next_vdev{0};
  auto vdev_name = [&](const char *driver) { return std::string(driver) + std::to_string(next_vdev++); };
  switch (spec.kind) {
    case DeviceSpec::Kind::Pcap: {
      // libpcap opens each file first: a clear error for a missing or bad
      // file, and the link type of them all.
      int link = -1;
      for (const std::string &f : spec.files) {
        char err[PCAP_ERRBUF_SIZE] = "";
        pcap_t *p = pcap_open_offline(f.c_str(), err);
        if (!p) throw std::runtime_error("device '" + spec.text + "' of '" + element + "': cannot read '" + f + "': " + err);
        int dl = pcap_datalink(p);
        if (link >= 0 && dl != link) {
          pcap_close(p);
          throw std::runtime_error("device '" + spec.text + "' of '" + element + "': '" + f +
                                   "' has another link type than the files before it (" +
                                   pcap_datalink_val_to_name(dl) + " vs " + pcap_datalink_val_to_name(link) + ")");
        }
        link = dl;
        pcap_close(p);
        std::error_code ec;
        uintmax_t size = std::filesystem::file_size(f, ec);
        file_bytes_.push_back(ec ? 0 : uint64_t(size));
      }
      link_ = LinkType(link);
      hw_queues_ = 1;
      buffer_room_ = std::max<uint32_t>(rte_pktmbuf_data_room_size(copy_pool ? copy_pool : pool), RTE_PKTMBUF_HEADROOM + 1) -
                     RTE_PKTMBUF_HEADROOM;
      break;
    }
    case DeviceSpec::Kind::AfPacket:
      open_port(vdev_name("net_af_packet"), "iface=" + spec.name + ",qpairs=" + std::to_string(queues), queues);
      break;
    case DeviceSpec::Kind::AfXdp:
      // One XDP socket per queue the driver reports (ethtool -l: combined);
      // veth reports one, and the lanes then share it through software RSS.
      // Traffic on queues beyond those is not seen.
      try {
        open_port(vdev_name("net_af_xdp"), "iface=" + spec.name + ",start_queue=0,queue_count=" + std::to_string(queues), queues);
      } catch (const std::runtime_error &) {
        if (queues == 1) throw;
        open_port(vdev_name("net_af_xdp"), "iface=" + spec.name + ",start_queue=0,queue_count=1", 1);
      }
      break;
    case DeviceSpec::Kind::Null:
      open_port(vdev_name("net_null"), "no-rx=1", queues);
      break;
    case DeviceSpec::Kind::Pci:
      open_port("", "", queues);
      break;
  }
}

void EthDevice::open_port(const std::string &vdev, const std::string &args, unsigned queues) {
  auto fail = [&](const std::string &why) {
    throw std::runtime_error("cannot open device '" + spec_.text + "' of '" + element_ + "': " + why);
  };
  uint16_t port;
  if (!vdev.empty()) {
    int rc = rte_vdev_init(vdev.c_str(), args.c_str());
    if (rc < 0) {
      std::string why = rc == -EEXIST ? "already open" : rte_strerror(-rc);
      if (spec_.kind == DeviceSpec::Kind::AfPacket || spec_.kind == DeviceSpec::Kind::AfXdp)
        why += " (does interface '" + spec_.name + "' exist? capturing from it needs root or CAP_NET_RAW)";
      fail(why);
    }
    vdevs_.push_back(vdev);
    if (rte_eth_dev_get_port_by_name(vdev.c_str(), &port) != 0) fail("no port after creating " + vdev);
  } else if (rte_eth_dev_get_port_by_name(spec_.name.c_str(), &port) != 0) {
    fail("no DPDK port for this PCI address (is the NIC bound to vfio-pci and listed in the host profile?)");
  }

  rte_eth_dev_info info;
  if (int rc = rte_eth_dev_info_get(port, &info); rc != 0) fail(rte_strerror(-rc));
  unsigned nq = std::max(1u, std::min<unsigned>(queues, info.max_rx_queues));
  rte_eth_conf conf{};
  if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_TIMESTAMP) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_TIMESTAMP;
  if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
  static uint8_t key[ToeplitzHash::kKeyLen];
  std::copy(ToeplitzHash::kSymmetricKey, ToeplitzHash::kSymmetricKey + ToeplitzHash::kKeyLen, key);
  uint64_t hf = (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) & info.flow_type_rss_offloads;
  if (spec_.kind == DeviceSpec::Kind::Pci && nq > 1 && hf) {
    // The NIC spreads flows; with the symmetric key both directions of a
    // connection land in one queue. Without `symmetric`, the driver's key.
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = hf;
    if (symmetric_ && info.hash_key_size == ToeplitzHash::kKeyLen) {
      conf.rx_adv_conf.rss_conf.rss_key = key;
      conf.rx_adv_conf.rss_conf.rss_key_len = ToeplitzHash::kKeyLen;
    }
    hw_rss_ = true;
  }
  // Receive only; some drivers (af_xdp) want transmit queues in pairs too.
  uint16_t ntx = 0;
  int rc = rte_eth_dev_configure(port, uint16_t(nq), 0, &conf);
  if (rc == -EINVAL) rc = rte_eth_dev_configure(port, uint16_t(nq), ntx = uint16_t(nq), &conf);
  if (rc != 0) fail(std::string("configuration refused: ") + rte_strerror(-rc));
  uint16_t desc = uint16_t(std::min(rx_desc_, 65535u)), tx_desc = 512;
  rte_eth_dev_adjust_nb_rx_tx_desc(port, &desc, &tx_desc);
  int socket = rte_eth_dev_socket_id(port);
  for (uint16_t q = 0; q < ntx; ++q)
    if (int trc = rte_eth_tx_queue_setup(port, q, tx_desc, socket < 0 ? SOCKET_ID_ANY : unsigned(socket), nullptr); trc != 0)
      fail("transmit queue " + std::to_string(q) + ": " + rte_strerror(-trc));
  for (unsigned q = 0; q < nq; ++q) {
    rte_eth_rxconf rxconf = info.default_rxconf;
    rxconf.offloads = conf.rxmode.offloads;
    if (int rc = rte_eth_rx_queue_setup(port, uint16_t(q), desc, socket < 0 ? SOCKET_ID_ANY : unsigned(socket),
                                        &rxconf, pool_);
        rc != 0)
      fail("receive queue " + std::to_string(q) + ": " + rte_strerror(-rc));
  }
  if (int rc = rte_eth_dev_start(port); rc != 0) fail(std::string("start: ") + rte_strerror(-rc));
  if (spec_.kind != DeviceSpec::Kind::Null)
    rte_eth_promiscuous_enable(port);  // a probe sees all traffic; a refusal is not fatal
  // NICs stamp packets when the offload is on.
  if (conf.rxmode.offloads & RTE_ETH_RX_OFFLOAD_TIMESTAMP) {
    int off = rte_mbuf_dynfield_lookup(RTE_MBUF_DYNFIELD_TIMESTAMP_NAME, nullptr);
    int bit = rte_mbuf_dynflag_lookup(RTE_MBUF_DYNFLAG_RX_TIMESTAMP_NAME, nullptr);
    if (off >= 0 && bit >= 0) ts_offset_ = off, ts_flag_ = 1ull << bit;
  }
  hw_queues_ = nq;
  ports_.push_back(port);
}

EthDevice::~EthDevice() {
  free_packets(spare_, spares_);
  for (uint16_t p : ports_) {
    rte_eth_dev_stop(p);
    rte_eth_dev_close(p);
  }
  for (const std::string &v : vdevs_) rte_vdev_uninit(v.c_str());
}

uint16_t EthDevice::receive(unsigned q, rte_mbuf **pkts, RxInfo *info, uint16_t n, bool *end) {
  *end = false;
  if (spec_.kind == DeviceSpec::Kind::Pcap) return read_files(pkts, info, n, end);
  uint16_t got = rte_eth_rx_burst(ports_[0], uint16_t(q), pkts, n);
  packets_acquired(pkts, got);
  for (uint16_t i = 0; i < got; ++i) info[i] = {timestamp(pkts[i]), pkts[i]->pkt_len, false, 0};
  return got;
}

// Trace files: each record in a buffer of the pool, with its nanosecond
// time and wire length: the buffer points at the record's bytes in the
// file's mapping where the file is walked in one (InPlaceRecords), else
// they are copied into it. A record that finds no buffer is held for the
// next call: an offline source waits, it never drops.
uint16_t EthDevice::read_files(rte_mbuf **pkts, RxInfo *info, uint16_t n, bool *end) {
  uint16_t got = 0;
  take_buffers(n);
  // Pages of records still out stay mapped, up to 256 MiB behind the walk
  // (a packet held for good would keep the whole file mapped; past that, a
  // read of its bytes maps its page again).
  if (file_ && file_->record_mapping()) {
    constexpr size_t kHeldBehind = size_t(256) << 20;
    const size_t walk = file_->offset();
    file_->hold_pages_from(std::max(in_place_.held_from(walk, file_->record_mapping()),
                                    walk > kHeldBehind ? walk - kHeldBehind : 0));
  }
  while (got < n && current_ < spec_.files.size()) {
    if (!file_) {
      try {
        // Walked in its mapping, with pages brought in (or, where it cannot
        // be mapped, read ahead) on a thread of any of the process's CPUs,
        // not this lane's: that overlaps with the lane's work.
        file_ = std::make_unique<PcapFileReader>(spec_.files[current_], PcapFileReader::kChunk,
                                                 PcapFileReader::ReadAhead{4, unpin_current_thread}, true);
      } catch (const std::runtime_error &e) {
        throw std::runtime_error("device '" + spec_.text + "': " + e.what());
      }
    }
    if (!held_ && !(held_ = file_->next(record_))) {
      file_.reset();
      in_place_.close();
      files_done_bytes_ += file_bytes_[current_];
      ++current_;
      continue;
    }
    PacketMeta meta;
    uint32_t hash = 0;
    if (share_hash_ && !in_share(record_, meta, hash)) {  // another lane's
      held_ = false;
      continue;
    }
    // With a pool for copies, this pool's buffer is for the record in place.
    unsigned segments = copy_pool_ ? 1 : segments_for(record_.caplen);
    if (segments > spares_) take_buffers(segments);
    if (segments > spares_) break;  // the pool is short: the record waits
    rte_mbuf *m = attach_record(record_) ? spare_[--spares_]
                  : copy_pool_            ? copy_record_apart(record_)
                                          : copy_record(record_, segments);
    if (!m) break;  // the pool for copies is short: the record waits
    held_ = false;
    if (!file_->intact()) {  // the file shrank while it was read: the reader reads it again, or ends
      rte_pktmbuf_free(m);
      continue;
    }
    info[got] = {record_.ns, record_.len, false, 0};
    if (share_hash_) {
      anno(m).meta = meta;
      info[got].parsed = true, info[got].share_hash = hash;
    }
    pkts[got++] = m;
  }
  walked_.store(files_done_bytes_ + (file_ ? file_->offset() : 0), std::memory_order_relaxed);
  if (current_ == spec_.files.size()) {
    free_packets(spare_, spares_);
    spares_ = 0;
    *end = got == 0;
  }
  return got;
}

void EthDevice::keep_lane_share(unsigned lane, unsigned lanes, const ToeplitzHash &hash) {
  if (spec_.kind != DeviceSpec::Kind::Pcap) throw std::logic_error("keep_lane_share: trace files only");
  share_hash_ = &hash, share_lane_ = lane, share_lanes_ = lanes;
}

// The headers as the lane would parse them once copied (the first buffer's
// bytes): kept in the packet's anno when the record is this lane's.
bool EthDevice::in_share(const PcapRecord &r, PacketMeta &meta, uint32_t &hash) const {
  parse_packet(r.data, std::min(r.caplen, buffer_room_), link_, meta, r.len);
  hash = rss_hash(meta, *share_hash_);
  return lane_for(hash, share_lanes_) == share_lane_;
}

// Tops the spare buffers up to n, in bulk (one at a time when the pool has
// fewer than that left), and prefetches their headers: each is read (its
// room) and written as its record is copied in, and that first read waited
// for memory.
void EthDevice::take_buffers(unsigned n) {
  const unsigned had = spares_;
  if (spares_ < n && alloc_packets(pool_, spare_ + spares_, n - spares_) == 0) spares_ = n;
  while (spares_ < n && alloc_packets(pool_, spare_ + spares_, 1) == 0) ++spares_;
  for (unsigned i = had; i < spares_; ++i) rte_prefetch0(spare_[i]);
}

// The buffers a record of caplen bytes takes: more than one, chained, where
// it is longer than a buffer's room (up to kMaxBurst of them, which hold
// libpcap's largest Ethernet record; the rest of a longer one is cut).
unsigned EthDevice::segments_for(uint32_t caplen) const {
  if (caplen <= buffer_room_) return 1;  // nearly every record: no division
  return std::clamp<unsigned>((caplen + buffer_room_ - 1) / buffer_room_, 1, kMaxBurst);
}

// The record's bytes into `segments` buffers, chained: the first is the packet.
rte_mbuf *EthDevice::copy_into(rte_mbuf **bufs, unsigned segments, const PcapRecord &r) {
  rte_mbuf *head = bufs[0], *tail = nullptr;
  uint32_t done = 0;
  for (unsigned i = 0; i < segments; ++i) {
    rte_mbuf *m = bufs[i];
    uint32_t take = std::min<uint32_t>(r.caplen - done, rte_pktmbuf_tailroom(m));
    memcpy(rte_pktmbuf_mtod(m, uint8_t *), r.data + done, take);
    m->data_len = uint16_t(take);
    if (tail) tail->next = m;
    tail = m;
    done += take;
  }
  head->nb_segs = uint16_t(segments);
  head->pkt_len = done;
  return head;
}

rte_mbuf *EthDevice::copy_record(const PcapRecord &r, unsigned segments) {
  spares_ -= segments;
  return copy_into(spare_ + spares_, segments, r);
}

// The record copied into buffers of the pool for copies: null where it
// has too few free.
rte_mbuf *EthDevice::copy_record_apart(const PcapRecord &r) {
  rte_mbuf *bufs[kMaxBurst];
  const unsigned segments = segments_for(r.caplen);
  if (alloc_packets(copy_pool_, bufs, segments) != 0) return nullptr;
  return copy_into(bufs, segments, r);
}

// Points the last spare buffer at the record's bytes in the file's shared
// mapping: false where they are not in one (or the record does not fit a
// buffer's 16-bit length, or too many blocks are out), for a copy. The
// record's last byte is read here, as the copy would have: a file cut short
// under it shows in intact() now.
bool EthDevice::attach_record(const PcapRecord &r) {
  const std::shared_ptr<TraceMapping> &mapping = file_->record_mapping();
  if (!mapping || r.caplen == 0 || r.caplen > UINT16_MAX) return false;
  if (!in_place_.attach(spare_[spares_ - 1], r.data, r.caplen, file_->record_offset(), mapping)) return false;
  (void)*static_cast<const volatile uint8_t *>(r.data + r.caplen - 1);
  return true;
}

std::vector<EthDevice::PortStats> EthDevice::port_stats() const {
  std::vector<PortStats> out;
  for (uint16_t p : ports_) {
    rte_eth_stats st;
    if (rte_eth_stats_get(p, &st) == 0) out.push_back({p, st.ipackets, st.ibytes, st.imissed, st.rx_nombuf, st.ierrors});
  }
  return out;
}

std::vector<std::pair<std::string, uint64_t>> EthDevice::losses() const {
  uint64_t missed = 0, nombuf = 0, errors = 0;
  for (uint16_t p : ports_) {
    rte_eth_stats st;
    if (rte_eth_stats_get(p, &st) == 0) missed += st.imissed, nombuf += st.rx_nombuf, errors += st.ierrors;
  }
  return {{"rx missed", missed}, {"rx no buffer", nombuf}, {"rx errors", errors}};
}

}  // namespace sluice
