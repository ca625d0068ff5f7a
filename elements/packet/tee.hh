// Tee: copies every packet to each connected output.
#pragma once
#include "engine/element_spec.hh"

const sluice::ElementSpec &tee_spec();
