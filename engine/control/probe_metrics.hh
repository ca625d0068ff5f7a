// What a running probe exposes at /metrics (docs/control.md lists every
// metric): the counters of each lane and element, read directly (they are
// single-writer atomics), and what each element reports of its own state
// (RuntimeElement::report_metrics: flow tables, rings, GC slices,
// exporters, DPDK ports), read on the element's segment thread.
#pragma once
#include <string>

#include "engine/runtime/runtime.hh"

namespace sluice {

class MetricsWriter;

// Adds every metric of the probe to `out`.
void collect_probe_metrics(const Runtime &rt, MetricsWriter &out);

// The exposition text (format 0.0.4).
std::string probe_metrics_text(const Runtime &rt);

}  // namespace sluice
