// FlowLog: flow records as CSV or JSON lines, to a file or stdout.
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &flow_log_spec();
}  // namespace sluice::elements
