// Counter: counts the packets and bytes passing through.
#pragma once
#include "engine/element_spec.hh"

const sluice::ElementSpec &counter_spec();
