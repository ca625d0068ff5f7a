// NetFlowV9Exporter: flow records to a NetFlow v9 collector (RFC 3954).
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &netflow_v9_exporter_spec();
}  // namespace sluice::elements
