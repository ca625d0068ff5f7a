// Filter: splits packets by a pcap-filter expression.
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &filter_spec();
}  // namespace sluice::elements
