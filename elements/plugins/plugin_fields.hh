// The IPFIX enterprise number of the plugin library's flow record fields
// (IANA has no elements for them). 32473 is the number RFC 5612 reserves
// for examples and documentation: Sluice uses it until it has its own.
// Ids: 1 tunnelType, 2 tunnelId (TunnelDecap), 3 serverName, 4
// dnsQueryName (ServerNames).
#pragma once
#include <cstdint>

namespace sluice_plugins {
inline constexpr uint32_t kSluiceEnterprise = 32473;
}  // namespace sluice_plugins
