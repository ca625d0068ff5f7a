// NetFlowV9Exporter: flow records to a NetFlow v9 collector (RFC 3954).
#pragma once
#include "engine/element_spec.hh"

const sluice::ElementSpec &netflow_v9_exporter_spec();
