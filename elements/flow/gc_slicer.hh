// GCSlicer: incremental expiry of a FlowTable's idle and long-running flows.
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &gc_slicer_spec();
}  // namespace sluice::elements
