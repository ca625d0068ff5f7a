// `sluice plan` output: the checked graph after expansion, its lanes and
// segments, as text for people or Graphviz dot for pictures.
#pragma once
#include <ostream>
#include <string>

#include "engine/graph.hh"

namespace sluice {

void print_plan_text(std::ostream &os, const std::string &config_name, const LaneGraph &lg);
void print_plan_dot(std::ostream &os, const std::string &config_name, const LaneGraph &lg);

// `clock pcap, capacity 64K` (defaults marked), for listings.
std::string format_args(const std::vector<ResolvedArg> &args, bool mark_defaults);

}  // namespace sluice
