#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "elements/export/flow_json.hh"
#include "engine/base/clock.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/record_file.hh"
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
              "Then the optional fields the graph's FlowTables keep (`FlowTable(fields ...)`, all by default), "
              "each direction's own: `in_if out_if direction src_mac dst_mac tos min_ttl max_ttl inner_vlan "
              "icmp_type icmp_code mpls_label`; `direction` 0 ingress, 1 egress; MAC addresses as "
              "`aa:bb:cc:dd:ee:ff`; `mpls_label` the top label's 20 bits (docs/flow-records.md).\n\n"
              "Elements that add fields to flow records (`sluice elements` lists the fields each sets, e.g. "
              "ServerNames and TunnelDecap from the plugin library) add columns after those, one per field, "
              "named as the element says (`server_name`; in JSON the field's name, `serverName`): empty (no "
              "JSON key) where a flow got no value. A text value is written as it came, except that every "
              "octet that is not printable ASCII, and `\"`, `\\` and `,`, is written `\\xHH`. The columns are "
              "those of the graph the log started with: a hot reload that adds or removes such an element changes "
              "them for a new log (on another path), not for a log that goes on.\n\n"
              "With several lanes, give each its own file with `$queue` (`FlowLog(\"flows-$queue.csv\")`), or "
              "declare the log `shared` to write the records of all lanes into one file.\n\n"
              "Lines are written in blocks of about 1 MiB, at least once a second, and at the end of the run. "
              "A file that exists when the run starts is appended to (`existing append`, the default): a "
              "restarted probe loses no earlier line. A file that is moved or removed while the probe runs "
              "(logrotate, `mv`) is started anew at its path with the next write.\n\n"
              "Rotation: with `rotate_size` or `rotate_every`, the file is renamed `FILE.YYYYMMDDTHHMMSSZ` "
              "(the time it was closed, UTC) and a new one begun, with its own CSV header, before a block "
              "would take it past `rotate_size` (records are never split between files) and at every "
              "multiple of `rotate_every` on the clock (`rotate_every 1h`: on the hour); `keep` removes the "
              "oldest rotated files beyond that number.\n\n"
              "A record counts as "
              "written (`records_absorbed`) once all its lines are in the file. A write that fails (a full "
              "disk, an I/O error) loses the records of its block: they are counted as lost, reason "
              "\"write error\", the error is printed once, and the next block is tried again. A record cut "
              "by the error is removed from the file again, so it holds whole lines only (standard output "
              "and pipes cannot be cut). The run then exits with status 3.\n\n"
              "When a hot reload makes a new log for a path a log of this run has written (another "
              "`format`, `shared` added or removed, or a new log on the path of one that goes), the new log "
              "appends to the file: every line written before stays, and the old log's last lines come "
              "before the new one's first. The CSV header is "
              "written only into an empty file, so a format changed on the same path leaves the file with "
              "the lines of the old format, then those of the new one; give the new format its own file to "
              "keep them apart.")
          .arg(ArgSpec::string("file")
                   .def("\"-\"")
                   .pos()
                   .describe("Path of the file to write; `-` is standard output."))
          .arg(ArgSpec::symbol("existing", {"append", "replace"})
                   .def("append")
                   .describe("A file that exists when the run starts: `append` to it (the CSV header only "
                             "into an empty file), or `replace` it. After a hot reload the file is always "
                             "appended to."))
          .arg(ArgSpec::bytes("rotate_size")
                   .def("0B")
                   .describe("Rotate the file before it would grow past this size; 0: never."))
          .arg(ArgSpec::duration("rotate_every")
                   .def("0s")
                   .describe("Rotate the file at every multiple of this time on the wall clock (UTC), when "
                             "it holds records; 0: never."))
          .arg(ArgSpec::count("keep")
                   .def("0")
                   .describe("Rotated files to keep, the oldest removed beyond; 0: keep them all."))
          .arg(ArgSpec::symbol("format", {"csv", "jsonl"})
                   .def("csv")
                   .describe("`csv`: comma-separated values after a header line naming the columns; `jsonl`: "
                             "one JSON object per line."))
          .metric(MetricSpec::counter("flow_log_lines_total", "Lines a FlowLog wrote."))
          .metric(MetricSpec::counter("flow_log_rotations_total", "Files a FlowLog rotated."))
          .with_metrics(RecordFile::metric_specs())
          .input(PortSpec::flows("in").many().describe("Flow records to write; takes any number of connections."));
  return spec;
}

namespace {

class FlowLogRuntime final : public RuntimeElement {
  static constexpr size_t kBlock = 1 << 20;  // as stdio's buffer was

 public:
  FlowLogRuntime(const Node &n, RunContext &c) : RuntimeElement(n, c), file_(name(), "records", counters.write_errors, kBlock) {
    path_ = arg("file").text;
    jsonl_ = arg("format").text == "jsonl";
    replace_ = arg("existing").text == "replace";
    write_error_ = counters.reason("write error", true);
    file_.set_rotation({uint64_t(arg("rotate_size").integer), uint64_t(arg("rotate_every").integer),
                        unsigned(arg("keep").integer)});
    fields_ = c.flow_fields();
    optional_ = c.record_fields();
  }

  void prepare() override {
    bool written_before = ctx_.claim_output_file(path_, name());
    std::string header = "start_ms,end_ms,proto,src,sport,dst,dport,packets,bytes,tcp_flags,end_reason,vlan,lane";
    for (const std::string &column : optional_flow_columns(optional_)) header += "," + column;
    for (const FlowExtField *f : fields_) header += std::string(",") + f->def.column;
    file_.open(path_, replace_ && !written_before ? RecordFile::Open::Replace : RecordFile::Open::Append,
               jsonl_ ? "" : header + "\n");
  }
  // Lines reach the file within about a second (a reader tailing it, a
  // crash), and a time rotation happens on time even with no record coming.
  bool wants_tick() const override { return true; }
  void tick() override {
    if (++ticks_ % 256) return;
    uint64_t now = mono_ns();
    if (now - last_write_ns_ < 1000000000ull) return;
    last_write_ns_ = now;
    if (!file_.empty()) write_out();
    else file_.rotate_if_due();
  }
  void flush() override {
    write_out();
    file_.close();
  }
  void report(std::vector<std::string> &lines) const override {
    std::string where = path_ == "-" ? "standard output" : path_;
    std::string failed = !file_.failed_writes() ? ""
                         : "; " + std::to_string(file_.failed_writes()) + " failed writes (" + file_.last_error() +
                               ") lost " + std::to_string(counters.drops[write_error_].get()) + " records";
    std::string rotated = file_.rotations() ? ", rotated " + std::to_string(file_.rotations()) + " times" : "";
    lines.push_back("wrote " + std::to_string(lines_) + " lines to " + where + rotated + failed);
  }
  void report_metrics(ElementMetrics &out) const override {
    out.counter("flow_log_lines_total", double(lines_));
    out.counter("flow_log_rotations_total", double(file_.rotations()));
    file_.report_metrics(out);
  }

 public:
  void push(int, PacketBatch &) override {}
  void push_flows(int, FlowBatch &batch) override {
    for (int i = 0; i < batch.count; ++i) {
      const FlowRecord &r = batch.recs[i];
      uint32_t lines = 1;
      write(r, r.fwd, false);
      if (flow_json_directions(r) == 2) write(r, r.rev, true), ++lines;
      file_.end_record(lines);
    }
    batch.count = 0;
    if (file_.full()) write_out();
  }

 private:
  // A record counts as written once all its lines are in the file.
  void write_out() {
    last_write_ns_ = mono_ns();
    RecordFile::Written w = file_.write_buffer();
    counters.records_absorbed.add(w.records);
    lines_ += w.weight;
    if (w.lost) counters.drops[write_error_].add(w.lost);
  }

  void write(const FlowRecord &r, const FlowCounters &c, bool reverse) {
    if (jsonl_) {
      line_.clear();
      append_flow_json(line_, r, reverse, FlowJsonKeys::FlowLog, fields_, optional_);
      line_ += '\n';
      file_.append(line_.data(), line_.size());
      return;
    }
    const FlowKey &k = r.key;
    bool v6 = k.is_ipv6;
    std::string src = flow_address_text(reverse ? k.dst_addr : k.src_addr, v6),
              dst = flow_address_text(reverse ? k.src_addr : k.dst_addr, v6);
    unsigned sport = reverse ? k.dst_port : k.src_port, dport = reverse ? k.src_port : k.dst_port;
    unsigned long long start = c.first_ns / 1000000, end = c.last_ns / 1000000;
    char line[512];
    int n = snprintf(line, sizeof line, "%llu,%llu,%u,%s,%u,%s,%u,%llu,%llu,%u,%s,%u,%u", start, end, k.proto,
                     src.c_str(), sport, dst.c_str(), dport, (unsigned long long)c.packets, (unsigned long long)c.octets,
                     c.tcp_flags, flow_end_reason_name(r.reason), k.vlan, r.lane);
    file_.append(line, size_t(std::min<int>(n, int(sizeof line) - 1)));
    std::string ext;
    append_optional_flow_csv(ext, r, reverse, optional_);
    for (const FlowExtField *f : fields_) ext += ',' + flow_ext_text(r, *f);
    ext += '\n';
    file_.append(ext.data(), ext.size());
  }
  std::string line_;  // a jsonl line, reused
  std::vector<const FlowExtField *> fields_;
  FlowFieldSet optional_ = 0;  // the optional fields of the graph's tables

  std::string path_;
  bool jsonl_ = false, replace_ = false;
  RecordFile file_;
  uint64_t ticks_ = 0, last_write_ns_ = 0;
  int write_error_;
  uint64_t lines_ = 0;
};

}  // namespace

SLUICE_ELEMENT(FlowLogRuntime, flow_log_spec);

}  // namespace sluice::elements
