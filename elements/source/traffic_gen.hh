// TrafficGen: deterministic synthetic traffic, generated into memory and replayed.
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &traffic_gen_spec();
}  // namespace sluice::elements
