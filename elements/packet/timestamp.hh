// Timestamp: stamps packets with packet time from a chosen clock.
#pragma once
#include "engine/element_spec.hh"

const sluice::ElementSpec &timestamp_spec();
