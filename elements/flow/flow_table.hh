// FlowTable: the per-lane flow cache that turns packets into flow records.
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &flow_table_spec();
}  // namespace sluice::elements
