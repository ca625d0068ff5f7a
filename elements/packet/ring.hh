// Ring: the SPSC ring between two segments of a lane (a thread boundary).
#pragma once
#include "engine/element_spec.hh"

const sluice::ElementSpec &ring_spec();
