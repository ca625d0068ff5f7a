// What a running probe exposes at /metrics (docs/control.md lists the
// engine's metrics, docs/elements.md each element's): the counters of each
// lane and element, read directly (they are single-writer atomics), and the
// metrics each element's spec declares (RuntimeElement::report_metrics:
// flow tables, rings, GC slices, exporters, DPDK ports), read on the
// element's segment thread.
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
