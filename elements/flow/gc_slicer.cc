#include "elements/flow/gc_slicer.hh"

#include "elements/units.hh"

using namespace sluice;
using namespace sluice::units;

namespace sluice::elements {

const ElementSpec &gc_slicer_spec() {
  static const ElementSpec spec =
      ElementSpec("GCSlicer")
          .in_group("flow")
          .brief("Expire a FlowTable's flows, a slice at a time")
          .describe(
              "Applies the idle and active timeouts of the FlowTable named by `table`. Rather than scanning "
              "the whole table at once, it scans 1/`slices` of it every `period`/`slices` of packet time, so "
              "the work is spread evenly and no batch pays for a full scan. With `period 1s, slices 1000` a "
              "thousandth of the table is scanned every millisecond and each flow is looked at once a "
              "second; a flow therefore ends at most `period` after its timeout.\n\n"
              "The expired flows leave on `out` together with the records arriving on `in`, so connecting "
              "the table's `flows` output here gives one stream with every ended flow.\n\n"
              "Time is packet time; on live input an idle lane still advances it, so flows expire even when "
              "no packet arrives.")
          .arg(ArgSpec::element("table", "FlowTable")
                   .needed()
                   .describe("The FlowTable to expire: the name of a FlowTable in the same scope, usually "
                             "the element just before."))
          .arg(ArgSpec::duration("period")
                   .def("1s")
                   .range(1 * kMs, 1 * kHour)
                   .describe("Time in which the whole table is scanned once: how late, at most, a flow is "
                             "expired."))
          .arg(ArgSpec::count("slices")
                   .def("1000")
                   .range(1, 1 * kM)
                   .describe("Pieces the table is scanned in per period. More slices make each scan shorter "
                             "and more frequent."))
          .input(PortSpec::flows("in").many().describe("Flow records to pass on: the table's `flows` output."))
          .output(PortSpec::flows("out").many().describe(
              "Records of ended flows: those arriving on `in` and those expired here."));
  return spec;
}

SLUICE_ELEMENT(gc_slicer_spec);

}  // namespace sluice::elements
