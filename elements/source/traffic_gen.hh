// TrafficGen: deterministic synthetic traffic, generated into memory and replayed.
#pragma once
#include "engine/element_spec.hh"

const sluice::ElementSpec &traffic_gen_spec();
