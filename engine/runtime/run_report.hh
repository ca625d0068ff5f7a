// What a run tells: the status line once a second, and at the end the
// summary (per lane and element, every packet's fate, the accounting), its
// JSON for tools and tests, and the totals the exit status is made from.
// Instances reloads replaced are part of all of it, marked as replaced.
#pragma once
#include <string>
#include <vector>

#include "engine/runtime/counters.hh"

namespace sluice {

class Runtime;
class SourceElement;
struct RunTotals;
struct RecordTotals;

// One row of the report: a running instance, or the replaced instances of
// an element in a lane.
struct ReportRow {
  std::string name, class_name;
  int lane = -1;
  bool replaced = false;
  CounterValues counters;
  std::vector<std::string> lines;  // the element's own summary lines
  const SourceElement *source = nullptr;  // a running source: its device drops
  std::vector<std::pair<std::string, uint64_t>> events;  // RuntimeElement::event_counts
};

class RunReport {
 public:
  // with_lines: each element's own summary lines too (RuntimeElement::report,
  // which reads its state: only once no segment runs, at the end of a run).
  explicit RunReport(const Runtime &rt, bool with_lines = false);
  std::string text() const;
  std::string json() const;
  std::string elements_json() const;
  RunTotals totals() const;
  RecordTotals record_totals() const;

 private:
  std::vector<const ReportRow *> lane_rows(int lane) const;
  std::string where_it_ran(size_t segment) const;
  const Runtime &rt_;
  std::vector<ReportRow> rows_;
};

// The live status line: rate and drops per lane since the last one.
class StatusLine {
 public:
  explicit StatusLine(const Runtime &rt);
  std::string line(double t, double dt);

 private:
  const Runtime &rt_;
  std::vector<uint64_t> last_pkts_, last_bytes_;
};

}  // namespace sluice
