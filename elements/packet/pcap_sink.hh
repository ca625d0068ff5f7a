// PcapSink: writes packets to a pcap file.
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &pcap_sink_spec();
}  // namespace sluice::elements
