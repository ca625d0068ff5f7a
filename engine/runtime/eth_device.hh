// The devices behind RSSSource's device strings: DPDK ethdev ports for a NIC
// by PCI address or a virtual device (af_packet, af_xdp, null), and trace
// files read into DPDK mbufs by PcapFileReader (`pcap:`). Opens and starts
// them, and says what the device can do: how many receive queues it really
// has (else the runtime spreads packets over lanes in software), whether it
// stamps packets, whether its input is a finite file.
#pragma once
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_mempool.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/packet/packet_meta.hh"
#include "engine/packet/rss_hash.hh"
#include "engine/packet/pcap_file_reader.hh"
#include "engine/runtime/in_place_records.hh"
#include "engine/runtime/packet.hh"

namespace sluice {

struct DeviceSpec {
  enum class Kind { Pci, Pcap, AfPacket, AfXdp, Null } kind = Kind::Null;
  std::string text;                // as the user wrote it
  std::vector<std::string> files;  // pcap
  std::string name;                // interface or PCI address
};

// Parses a device string; false with *error for the user when it is not one.
bool parse_device(const std::string &text, DeviceSpec &out, std::string *error);

class EthDevice {
 public:
  // Opens the device with `queues` lanes' worth of receive queues where the
  // device has them. Throws std::runtime_error naming the device and why.
  // Trace files with a `copy_pool`: `pool`'s buffers are for records handed
  // on in place (they need no room of their own: RunContext::copy_pool_for_source),
  // and the records that are copied (read() or libpcap's, or past the
  // in-place blocks) take copy_pool's buffers instead.
  EthDevice(const DeviceSpec &spec, const std::string &element, unsigned queues, unsigned rx_desc,
            bool symmetric, rte_mempool *pool, rte_mempool *copy_pool = nullptr);
  ~EthDevice();
  EthDevice(const EthDevice &) = delete;
  EthDevice &operator=(const EthDevice &) = delete;

  const DeviceSpec &spec() const { return spec_; }
  // Receive queues the hardware (or kernel) spreads packets over; 1 means
  // the runtime must spread them in software.
  unsigned hw_queues() const { return hw_queues_; }
  bool finite() const { return spec_.kind == DeviceSpec::Kind::Pcap; }
  // Trace files: bytes walked and bytes in all, about (the lane's thread
  // walks, any thread may ask); nothing for other devices or files whose
  // size is unknown.
  std::optional<std::pair<double, double>> file_progress() const {
    uint64_t total = std::accumulate(file_bytes_.begin(), file_bytes_.end(), uint64_t(0));
    if (!finite() || total == 0) return std::nullopt;
    return std::pair{double(walked_.load(std::memory_order_relaxed)), double(total)};
  }
  LinkType link_type() const { return link_; }
  bool has_timestamps() const { return ts_offset_ >= 0 || finite(); }
  bool hw_rss() const { return hw_rss_; }

  // What a packet's mbuf does not say: its capture or receive time (UNIX
  // ns, 0 when unknown) and its length on the wire.
  struct RxInfo {
    uint64_t time_ns;
    uint32_t wire_len;
    // keep_lane_share(): the packet's anno meta is already parsed (from the
    // same bytes), and this is the software RSS hash it was kept by.
    bool parsed;
    uint32_t share_hash;
  };
  // Trivial, so that a burst's array of them costs nothing until written
  // (each writer sets every field); with member initializers, each poll
  // zeroed kMaxBurst of them.
  static_assert(std::is_trivially_default_constructible_v<RxInfo>);
  // Receives up to n packets from queue q, with their RxInfo. For pcap files,
  // the files are read one after the other, as far as the pool has buffers
  // (a record waits for one, it is never dropped); *end is set once the last
  // is exhausted.
  uint16_t receive(unsigned q, rte_mbuf **pkts, RxInfo *info, uint16_t n, bool *end);
  // Trace files read whole by each of several lanes, each lane keeping its
  // share: the records whose symmetric software RSS hash (rss_hash of the
  // headers as the lane would parse them) picks `lane` of `lanes`; the
  // others are passed over in the mapping, never taken. So a packet is
  // taken, parsed and metered on one core (dealing a burst read by one
  // lane out to the others made the others' caches miss on every packet).
  // Before the first receive().
  void keep_lane_share(unsigned lane, unsigned lanes, const ToeplitzHash &hash);
  // Packets the device saw that never reached us, by reason.
  std::vector<std::pair<std::string, uint64_t>> losses() const;
  // DPDK's statistics of each port (rte_eth_stats_get), for the metrics
  // endpoint. Any thread: the counters are only read, as DPDK's telemetry does.
  struct PortStats {
    uint16_t port;
    uint64_t ipackets, ibytes, imissed, rx_nombuf, ierrors;
  };
  std::vector<PortStats> port_stats() const;

 private:
  uint64_t timestamp(const rte_mbuf *m) const {
    return (m->ol_flags & ts_flag_) ? *RTE_MBUF_DYNFIELD(const_cast<rte_mbuf *>(m), ts_offset_, uint64_t *) : 0;
  }
  uint16_t read_files(rte_mbuf **pkts, RxInfo *info, uint16_t n, bool *end);
  void take_buffers(unsigned n);
  unsigned segments_for(uint32_t caplen) const;
  rte_mbuf *copy_into(rte_mbuf **bufs, unsigned segments, const PcapRecord &r);
  rte_mbuf *copy_record(const PcapRecord &r, unsigned segments);  // into spare buffers
  rte_mbuf *copy_record_apart(const PcapRecord &r);                // into the pool for copies
  bool attach_record(const PcapRecord &r);
  void open_port(const std::string &vdev_name, const std::string &vdev_args, unsigned queues);

  DeviceSpec spec_;
  std::string element_;
  unsigned rx_desc_;
  bool symmetric_;
  rte_mempool *pool_;
  rte_mempool *copy_pool_;  // null: copies take pool_'s buffers
  unsigned hw_queues_ = 1;
  bool hw_rss_ = false;
  LinkType link_ = LinkType::Ethernet;
  std::vector<uint16_t> ports_;        // ethdev ports (none for pcap files)
  std::vector<std::string> vdevs_;     // to remove at the end
  int ts_offset_ = -1;
  uint64_t ts_flag_ = 0;
  // pcap: the file being read, its next record when it waits for buffers,
  // and buffers taken from the pool in bulk but not yet filled.
  size_t current_ = 0;
  std::unique_ptr<PcapFileReader> file_;
  std::vector<uint64_t> file_bytes_;  // each trace file's size (0: unknown)
  uint64_t files_done_bytes_ = 0;     // of the files read to their end
  std::atomic<uint64_t> walked_{0};   // files_done_bytes_ and the current file's offset
  PcapRecord record_;
  bool held_ = false;
  rte_mbuf *spare_[kMaxBurst];
  unsigned spares_ = 0;
  uint32_t buffer_room_ = 1;  // bytes of a record one of the copies' buffers holds
  InPlaceRecords in_place_;   // records of a shared mapping, handed on without a copy
  // keep_lane_share(): the hash, this lane, of how many
  const ToeplitzHash *share_hash_ = nullptr;
  unsigned share_lane_ = 0, share_lanes_ = 1;
  bool in_share(const PcapRecord &r, PacketMeta &meta, uint32_t &hash) const;
};

}  // namespace sluice
