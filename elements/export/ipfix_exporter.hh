// IPFIXExporter: flow records to an IPFIX collector (RFC 7011, RFC 5103).
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &ipfix_exporter_spec();
}  // namespace sluice::elements
