// GCSlicer: incremental expiry of a FlowTable's idle and long-running flows.
#pragma once
#include "engine/element_spec.hh"

const sluice::ElementSpec &gc_slicer_spec();
