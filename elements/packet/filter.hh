// Filter: splits packets by a pcap-filter expression.
#pragma once
#include "engine/element_spec.hh"

const sluice::ElementSpec &filter_spec();
