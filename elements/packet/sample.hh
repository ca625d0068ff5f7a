// Sample: keeps a pseudo-random fraction of the packets.
#pragma once
#include "engine/element_spec.hh"

const sluice::ElementSpec &sample_spec();
