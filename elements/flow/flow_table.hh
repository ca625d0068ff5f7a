// FlowTable: the per-lane flow cache that turns packets into flow records.
#pragma once
#include "engine/element_spec.hh"

const sluice::ElementSpec &flow_table_spec();
