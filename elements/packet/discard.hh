// Discard: drops packets at the end of a branch.
#pragma once
#include "engine/element_spec.hh"

const sluice::ElementSpec &discard_spec();
