#include "elements/export/flow_log.hh"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/run_context.hh"

using namespace sluice;

namespace sluice::elements {

const ElementSpec &flow_log_spec() {
  static const ElementSpec spec =
      ElementSpec("FlowLog")
          .in_group("export")
          .brief("Write flow records as CSV or JSON lines")
          .describe(
              "Writes one line per flow record, for people and scripts. A biflow record is written as its two "
              "directions, one line each (the reverse line only when that direction carried packets). Columns "
              "(CSV header, JSON keys): `start_ms end_ms proto src sport dst dport packets bytes tcp_flags "
              "end_reason vlan lane`; times in milliseconds since the UNIX epoch, `bytes` at IP level, "
              "`tcp_flags` as a number (FIN = 1, SYN = 2, RST = 4, PSH = 8, ACK = 16, ...), `end_reason` one of "
              "`idle timeout`, `active timeout`, `end of flow`, `forced end`, `lack of resources`.\n\n"
              "With several lanes, give each its own file with `$queue` (`FlowLog(\"flows-$queue.csv\")`), or "
              "declare the log `shared` to write the records of all lanes into one file.")
          .arg(ArgSpec::string("file")
                   .def("\"-\"")
                   .pos()
                   .describe("Path of the file to write, replaced if it exists; `-` is standard output."))
          .arg(ArgSpec::symbol("format", {"csv", "jsonl"})
                   .def("csv")
                   .describe("`csv`: comma-separated values after a header line naming the columns; `jsonl`: "
                             "one JSON object per line."))
          .input(PortSpec::flows("in").many().describe("Flow records to write; takes any number of connections."));
  return spec;
}

SLUICE_ELEMENT(flow_log_spec);

namespace {

std::string address(const uint8_t *a, bool v6) {
  char buf[INET6_ADDRSTRLEN];
  if (!v6) inet_ntop(AF_INET, a + 12, buf, sizeof buf);
  else inet_ntop(AF_INET6, a, buf, sizeof buf);
  return buf;
}

class FlowLogRuntime final : public RuntimeElement {
 public:
  FlowLogRuntime(const Node &n, RunContext &c) : RuntimeElement(n, c) {
    path_ = arg("file").text;
    jsonl_ = arg("format").text == "jsonl";
  }
  ~FlowLogRuntime() override {
    if (file_ && file_ != stdout) fclose(file_);
    else if (file_) fflush(file_);
  }

  void prepare() override {
    ctx_.claim_output_file(path_, name());
    file_ = path_ == "-" ? stdout : fopen(path_.c_str(), "w");
    if (!file_) throw std::runtime_error("'" + name() + "': cannot write '" + path_ + "': " + strerror(errno));
    if (file_ != stdout) setvbuf(file_, nullptr, _IOFBF, 1 << 20);
    if (!jsonl_) fputs("start_ms,end_ms,proto,src,sport,dst,dport,packets,bytes,tcp_flags,end_reason,vlan,lane\n", file_);
  }
  void flush() override { fflush(file_); }
  void report(std::vector<std::string> &lines) const override {
    lines.push_back("wrote " + std::to_string(lines_) + " lines to " + (path_ == "-" ? "standard output" : path_));
  }

 public:
  void push(int, PacketBatch &) override {}
  void push_flows(int, FlowBatch &batch) override {
    for (int i = 0; i < batch.count; ++i) {
      const FlowRecord &r = batch.recs[i];
      write(r, r.fwd, false);
      if (r.biflow && r.rev.packets) write(r, r.rev, true);
    }
    counters.records_absorbed.add(batch.count);
    batch.count = 0;
  }

 private:
  void write(const FlowRecord &r, const FlowCounters &c, bool reverse) {
    const FlowKey &k = r.key;
    bool v6 = k.is_ipv6;
    std::string src = address(reverse ? k.dst_addr : k.src_addr, v6), dst = address(reverse ? k.src_addr : k.dst_addr, v6);
    unsigned sport = reverse ? k.dst_port : k.src_port, dport = reverse ? k.src_port : k.dst_port;
    unsigned long long start = c.first_ns / 1000000, end = c.last_ns / 1000000;
    if (jsonl_)
      fprintf(file_,
              "{\"start_ms\": %llu, \"end_ms\": %llu, \"proto\": %u, \"src\": \"%s\", \"sport\": %u, \"dst\": \"%s\", "
              "\"dport\": %u, \"packets\": %llu, \"bytes\": %llu, \"tcp_flags\": %u, \"end_reason\": \"%s\", "
              "\"vlan\": %u, \"lane\": %u}\n",
              start, end, k.proto, src.c_str(), sport, dst.c_str(), dport, (unsigned long long)c.packets,
              (unsigned long long)c.octets, c.tcp_flags, flow_end_reason_name(r.reason), k.vlan, r.lane);
    else
      fprintf(file_, "%llu,%llu,%u,%s,%u,%s,%u,%llu,%llu,%u,%s,%u,%u\n", start, end, k.proto, src.c_str(), sport,
              dst.c_str(), dport, (unsigned long long)c.packets, (unsigned long long)c.octets, c.tcp_flags,
              flow_end_reason_name(r.reason), k.vlan, r.lane);
    ++lines_;
  }

  std::string path_;
  bool jsonl_ = false;
  FILE *file_ = nullptr;
  uint64_t lines_ = 0;
};

}  // namespace

SLUICE_RUNTIME("FlowLog", FlowLogRuntime);

}  // namespace sluice::elements
