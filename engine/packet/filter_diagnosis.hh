// The part of Filter's diagnostics pcap_filter.cc needs before compiling:
// the bound on an expression's terms. check_filter_expression() (declared
// in pcap_filter.hh) is defined beside it, in filter_diagnosis.cc.
#pragma once
#include <optional>
#include <string_view>

#include "engine/packet/pcap_filter.hh"

namespace sluice {

// Terms (primitives joined by `and`/`or`) an expression may have: libpcap's
// optimizer takes time and memory that grow with about the cube of the
// program. Measured (docs/control.md): 256 `portrange` terms 34 s, 800
// `host` terms 87 s. nullopt when within the bound; else an error from the
// first term beyond it.
std::optional<FilterError> too_many_terms(std::string_view expr);

}  // namespace sluice
