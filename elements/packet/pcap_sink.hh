// PcapSink: writes packets to a pcap file.
#pragma once
#include "engine/element_spec.hh"

const sluice::ElementSpec &pcap_sink_spec();
