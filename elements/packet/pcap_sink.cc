#include "elements/packet/pcap_sink.hh"

#include <pcap/pcap.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "engine/packet/pcap_filter.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/run_context.hh"

#include "elements/units.hh"

using namespace sluice;
using namespace sluice::units;

namespace sluice::elements {

const ElementSpec &pcap_sink_spec() {
  static const ElementSpec spec =
      ElementSpec("PcapSink")
          .in_group("packet")
          .brief("Write packets to a pcap file")
          .describe(
              "Writes every packet it receives, with its timestamp, to a pcap file that tcpdump, tshark and "
              "`RSSSource(device \"pcap:FILE\")` read. `TrafficGen -> PcapSink` turns generated traffic into "
              "a trace.\n\n"
              "With several lanes, give each its own file with `$queue` (`PcapSink(\"out-$queue.pcap\")`), "
              "or declare the sink `shared` to write the packets of all lanes into one file.")
          .arg(ArgSpec::string("file")
                   .needed()
                   .pos()
                   .describe("Path of the pcap file; an existing file is replaced."))
          .arg(ArgSpec::bytes("snaplen")
                   .def("65535")
                   .range(64, 256 * kKB)
                   .describe("Bytes kept of each packet. Longer packets are truncated in the file; their "
                             "original length is recorded."))
          .input(PortSpec::packets("in").many().describe("Packets to write; takes any number of connections."));
  return spec;
}

SLUICE_ELEMENT(pcap_sink_spec);

// libpcap writes the file (pcap_dump), with nanosecond timestamps: the
// format tcpdump, tshark, capinfos and net_pcap all read.
class PcapSinkRuntime final : public RuntimeElement {
 public:
  PcapSinkRuntime(const Node &n, RunContext &c) : RuntimeElement(n, c) {
    file_ = arg("file").text;
    snaplen_ = uint32_t(arg("snaplen").integer);
  }
  ~PcapSinkRuntime() override { close(); }

  void prepare() override {
    // The link type of the packets: the lane's source's, or for a shared
    // sink the one all lanes agree on.
    LinkType link = LinkType::Ethernet;
    bool first = true;
    for (const Lane &l : ctx_.graph().lanes) {
      if (lane() >= 0 && l.id != lane()) continue;
      LinkType lt = ctx_.lane_source(l.id)->link_type();
      if (!first && lt != link)
        throw std::runtime_error("'" + name() + "': lanes with different link types cannot share one pcap file");
      link = lt, first = false;
    }
    ctx_.claim_output_file(file_, name());
    dead_ = pcap_open_dead_with_tstamp_precision(pcap_dlt_for(link), int(snaplen_), PCAP_TSTAMP_PRECISION_NANO);
    dumper_ = dead_ ? pcap_dump_open(dead_, file_.c_str()) : nullptr;
    if (!dumper_)
      throw std::runtime_error("'" + name() + "': cannot write '" + file_ + "': " +
                               (dead_ ? pcap_geterr(dead_) : "libpcap failed"));
  }

  void flush() override {
    if (dumper_) pcap_dump_flush(dumper_);
  }
  void report(std::vector<std::string> &lines) const override {
    lines.push_back("wrote " + std::to_string(counters.absorbed.get()) + " packets to " + file_);
  }

 public:
  void push(int, PacketBatch &batch) override {
    for (int i = 0; i < batch.count; ++i) {
      rte_mbuf *m = batch.pkts[i];
      const PacketAnno &a = anno(m);
      pcap_pkthdr h{};
      h.ts.tv_sec = time_t(a.time_ns / 1000000000ull);
      h.ts.tv_usec = suseconds_t(a.time_ns % 1000000000ull);  // nanoseconds: the file is nanosecond-precision
      h.len = std::max<uint32_t>(a.wire_len, m->pkt_len);
      h.caplen = std::min<uint32_t>(m->pkt_len, snaplen_);
      const uint8_t *data = rte_pktmbuf_mtod(m, const uint8_t *);
      if (m->nb_segs > 1) {  // a chained mbuf: gather its segments
        buf_.resize(h.caplen);
        data = static_cast<const uint8_t *>(rte_pktmbuf_read(m, 0, h.caplen, buf_.data()));
      }
      pcap_dump(reinterpret_cast<u_char *>(dumper_), &h, data);
    }
    absorb_all(batch);
  }

 private:
  void close() {
    if (dumper_) pcap_dump_close(dumper_);
    if (dead_) pcap_close(dead_);
    dumper_ = nullptr, dead_ = nullptr;
  }

  std::string file_;
  uint32_t snaplen_;
  pcap_t *dead_ = nullptr;
  pcap_dumper_t *dumper_ = nullptr;
  std::vector<uint8_t> buf_;
};
SLUICE_RUNTIME("PcapSink", PcapSinkRuntime);

}  // namespace sluice::elements
