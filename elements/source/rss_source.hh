// RSSSource: packets from a NIC or a virtual device, one lane per receive queue.
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &rss_source_spec();
}  // namespace sluice::elements
