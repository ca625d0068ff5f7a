#include "engine/flow/flow_record.hh"

namespace sluice {

const char *flow_end_reason_name(FlowEndReason r) {
  switch (r) {
    case FlowEndReason::IdleTimeout: return "idle timeout";
    case FlowEndReason::ActiveTimeout: return "active timeout";
    case FlowEndReason::EndOfFlow: return "end of flow";
    case FlowEndReason::ForcedEnd: return "forced end";
    case FlowEndReason::LackOfResources: return "lack of resources";
  }
  return "unknown";
}

}  // namespace sluice
