#include <pcap/pcap.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "engine/packet/pcap_filter.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/record_file.hh"
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
              "or declare the sink `shared` to write the packets of all lanes into one file.\n\n"
              "Packets are written in blocks of 64 KiB, and at the end of the run; a packet counts as "
              "absorbed once it is in the file. A write that fails (a full disk, an I/O error) loses the "
              "packets of its block: they are counted as dropped, reason \"write error\", the error is printed "
              "once, and the next block is tried again. A packet cut by the error is removed from the file "
              "again, so it holds whole packets only. The run then exits with status 3.\n\n"
              "When a hot reload makes a new sink for a path a sink of this run has written (`shared` added "
              "or removed, or a new sink on the path of one that goes), the new sink appends to the file: "
              "every packet written before stays, and the old sink's last packets come before the new one's "
              "first. Appending needs the file's link type, snaplen and time stamp precision to be the new "
              "sink's: a reload that changes `snaplen` on the same path, or puts packets of another link type "
              "there, is refused and the running graph goes on (give the new sink another file).")
          .arg(ArgSpec::string("file")
                   .needed()
                   .pos()
                   .describe("Path of the pcap file; an existing file is replaced when the run starts (appended to "
                             "after a hot reload, see above)."))
          .arg(ArgSpec::bytes("snaplen")
                   .def("65535")
                   .range(64, 256 * kKB)
                   .describe("Bytes kept of each packet. Longer packets are truncated in the file; their "
                             "original length is recorded."))
          .with_metrics(RecordFile::metric_specs())
          .input(PortSpec::packets("in").many().describe("Packets to write; takes any number of connections."));
  return spec;
}

namespace {

// The file header libpcap writes for this link layer and snaplen, with
// nanosecond time stamps (the format tcpdump, tshark, capinfos and net_pcap
// all read): pcap_dump_fopen() into memory.
std::string file_header_for(int dlt, uint32_t snaplen) {
  pcap_t *dead = pcap_open_dead_with_tstamp_precision(dlt, int(snaplen), PCAP_TSTAMP_PRECISION_NANO);
  if (!dead) throw std::runtime_error("libpcap cannot describe link type " + std::to_string(dlt));
  char *mem = nullptr;
  size_t size = 0;
  FILE *f = open_memstream(&mem, &size);
  pcap_dumper_t *d = f ? pcap_dump_fopen(dead, f) : nullptr;
  std::string err = d ? "" : pcap_geterr(dead);
  if (d) pcap_dump_close(d);  // closes f: mem holds the header
  else if (f) fclose(f);
  pcap_close(dead);
  std::string header = mem ? std::string(mem, size) : "";
  free(mem);
  if (header.size() != sizeof(struct pcap_file_header))
    throw std::runtime_error("libpcap cannot write a pcap file header" + (err.empty() ? "" : ": " + err));
  return header;
}

// Why packets of `want` (a header from file_header_for) cannot follow the
// file that starts with `have`; "" when they can: same byte order, version,
// time stamp precision, snaplen and link type, as pcap_dump_open_append()
// requires.
std::string append_problem(const std::string &have, const std::string &want) {
  if (have.size() < sizeof(struct pcap_file_header)) return "it is too short to be a pcap file";
  struct pcap_file_header h, w;
  memcpy(&h, have.data(), sizeof h);
  memcpy(&w, want.data(), sizeof w);
  if (h.magic == 0xa1b2c3d4) return "its time stamps are in microseconds, this sink writes nanoseconds";
  if (h.magic != w.magic) return "it is not a pcap file written in this machine's byte order";
  if (h.version_major != w.version_major || h.version_minor != w.version_minor)
    return "its format version is " + std::to_string(h.version_major) + "." + std::to_string(h.version_minor);
  if (h.linktype != w.linktype)
    return "its link type is " + std::to_string(h.linktype) + ", this sink's packets are " + std::to_string(w.linktype);
  if (h.snaplen != w.snaplen)
    return "its snaplen is " + std::to_string(h.snaplen) + ", this sink's " + std::to_string(w.snaplen);
  return "";
}

}  // namespace

// libpcap makes the file header; the packets go through a RecordFile, which
// tells which of them a failed write lost (pcap_dump() cannot: it writes
// through stdio and returns nothing).
class PcapSinkRuntime final : public RuntimeElement {
  // Bigger than libpcap's stdio buffer (4 KiB) for fewer system calls, small
  // enough that a slow live capture reaches the file soon.
  static constexpr size_t kBlock = 64 << 10;

 public:
  PcapSinkRuntime(const Node &n, RunContext &c) : RuntimeElement(n, c), file_(name(), "packets", counters.write_errors, kBlock) {
    path_ = arg("file").text;
    snaplen_ = uint32_t(arg("snaplen").integer);
    write_error_ = counters.reason("write error");
  }

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
    std::string header;
    try {
      header = file_header_for(pcap_dlt_for(link), snaplen_);
    } catch (const std::exception &e) {
      throw std::runtime_error("'" + name() + "': " + e.what());
    }
    bool written_before = ctx_.claim_output_file(path_, name());
    if (written_before) {  // a reload: the packets go after those already in the file
      std::ifstream in(path_, std::ios::binary);
      std::string have(sizeof(struct pcap_file_header), '\0');
      in.read(have.data(), std::streamsize(have.size()));
      have.resize(size_t(in.gcount()));
      if (!have.empty())
        if (std::string why = append_problem(have, header); !why.empty())
          throw std::runtime_error("'" + name() + "': cannot append to '" + path_ + "': " + why +
                                   "; give the sink another file");
    }
    file_.open(path_, written_before ? RecordFile::Open::Append : RecordFile::Open::Replace, header);
  }

  void flush() override {
    write_out();
    file_.close();
  }
  void report(std::vector<std::string> &lines) const override {
    std::string failed = !file_.failed_writes() ? ""
                         : "; " + std::to_string(file_.failed_writes()) + " failed writes (" + file_.last_error() +
                               ") lost " + std::to_string(counters.drops[write_error_].get()) + " packets";
    lines.push_back("wrote " + std::to_string(counters.absorbed.get()) + " packets to " + path_ + failed);
  }
  void report_metrics(ElementMetrics &out) const override { file_.report_metrics(out); }

 public:
  // Each packet becomes a record (the 16-byte record header of the pcap
  // format, then its first caplen bytes) in the file's buffer; it counts as
  // absorbed once written, or as dropped ("write error") when its write failed.
  void push(int, PacketBatch &batch) override {
    for (int i = 0; i < batch.count; ++i) {
      rte_mbuf *m = batch.pkts[i];
      const PacketAnno &a = anno(m);
      uint32_t caplen = std::min<uint32_t>(m->pkt_len, snaplen_);
      uint32_t header[4] = {uint32_t(a.time_ns / 1000000000ull), uint32_t(a.time_ns % 1000000000ull), caplen,
                            std::max<uint32_t>(a.wire_len, m->pkt_len)};
      uint8_t *rec = file_.extend(sizeof header + caplen);
      memcpy(rec, header, sizeof header);
      // a chained mbuf is gathered; rte_pktmbuf_read returns the data in place when it is contiguous
      const void *data = rte_pktmbuf_read(m, 0, caplen, rec + sizeof header);
      if (data != rec + sizeof header) memcpy(rec + sizeof header, data, caplen);
      file_.end_record();
    }
    free_packets(batch.pkts, batch.count);
    batch.count = 0;
    if (file_.full()) write_out();
  }

 private:
  void write_out() {
    RecordFile::Written w = file_.write_buffer();
    counters.absorbed.add(w.records);
    if (w.lost) counters.drops[write_error_].add(w.lost);
  }

  std::string path_;
  uint32_t snaplen_;
  RecordFile file_;
  int write_error_;
};
SLUICE_ELEMENT(PcapSinkRuntime, pcap_sink_spec);

}  // namespace sluice::elements
