#include "elements/export/flow_log.hh"

using namespace sluice;

namespace sluice::elements {

const ElementSpec &flow_log_spec() {
  static const ElementSpec spec =
      ElementSpec("FlowLog")
          .in_group("export")
          .brief("Write flow records as CSV or JSON lines")
          .describe(
              "Writes one line per flow record, for people and scripts: the flow key, start and end times, "
              "packet and octet counts (in each direction for biflows), TCP flags and the end reason.\n\n"
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

}  // namespace sluice::elements
