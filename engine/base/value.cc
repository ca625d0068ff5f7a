#include "engine/base/value.hh"

#include <arpa/inet.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sluice {

namespace {

struct Unit {
  const char *suffix;
  int64_t scale;
};

// Shortest exact form: the largest unit that divides n (65536 -> 64K, 1500 -> 1500).
template <size_t N>
std::string exact_with_unit(int64_t n, const Unit (&units)[N]) {
  if (n == 0) return std::string("0") + units[0].suffix;
  for (size_t i = N; i-- > 0;)
    if (n % units[i].scale == 0) return std::to_string(n / units[i].scale) + units[i].suffix;
  return std::to_string(n) + units[0].suffix;
}

constexpr Unit kCountUnits[] = {{"", 1}, {"K", 1LL << 10}, {"M", 1LL << 20}, {"G", 1LL << 30}};
constexpr Unit kByteUnits[] = {{"B", 1}, {"KB", 1LL << 10}, {"MB", 1LL << 20}, {"GB", 1LL << 30}, {"TB", 1LL << 40}};
// Days are not in the list the language documents first, but the parser takes
// them and "7d" reads better than "168h" in ranges.
constexpr Unit kDurationUnits[] = {{"ns", 1},
                                   {"us", 1000},
                                   {"ms", 1000000},
                                   {"s", 1000000000},
                                   {"min", 60LL * 1000000000},
                                   {"h", 3600LL * 1000000000},
                                   {"d", 86400LL * 1000000000}};

// A double without trailing zeros; 15 significant digits hide binary noise
// (14.88e6 / 1e6 prints as 14.88).
std::string plain_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

// Fractions read best as the user likely wrote them: 0.01 stays 0.01, 1/3
// becomes "1/3" rather than 0.333333333333333.
std::string fraction_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  if (std::strtod(buf, nullptr) == v && !std::strchr(buf, 'e')) return buf;
  if (v > 0 && v < 1) {
    double n = std::round(1 / v);
    if (n <= 1e15 && std::fabs(1 / n - v) <= 1e-15 * v) return "1/" + plain_number(n);
  }
  return plain_number(v);
}

}  // namespace

const char *arg_type_name(ArgType t) {
  switch (t) {
    case ArgType::Count: return "count";
    case ArgType::Bytes: return "bytes";
    case ArgType::Duration: return "duration";
    case ArgType::Rate: return "rate";
    case ArgType::Bool: return "bool";
    case ArgType::String: return "string";
    case ArgType::Symbol: return "symbol";
    case ArgType::Address: return "address";
    case ArgType::Prefix: return "prefix";
    case ArgType::HostPort: return "host:port";
    case ArgType::Element: return "element";
    case ArgType::Fraction: return "fraction";
  }
  return "value";
}

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  if (!inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf)) return "?";
  return buf;
}

std::string Value::to_string() const {
  if (is_list) {
    std::string s = "[";
    for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i].to_string();
    return s + "]";
  }
  if (is_symbol) return text;  // also a word beside a number type (`sizes imix`)
  switch (type) {
    case ArgType::Count: return format_count(integer);
    case ArgType::Bytes: return format_bytes(integer);
    case ArgType::Duration: return format_duration_ns(integer);
    case ArgType::Rate: return format_rate(real, rate_unit);
    case ArgType::Bool: return integer ? "true" : "false";
    case ArgType::String:
    case ArgType::Symbol:
    case ArgType::Element: return text;
    case ArgType::Address: return address.to_string();
    case ArgType::Prefix: return address.to_string() + "/" + std::to_string(integer);
    case ArgType::HostPort: {
      // an IPv6 host needs brackets to keep its colons apart from the port's
      std::string host = text.find(':') != std::string::npos ? "[" + text + "]" : text;
      return host + ":" + std::to_string(integer);
    }
    case ArgType::Fraction: return fraction_text(real);
  }
  return text;
}

std::string format_count(int64_t n) { return n < 0 ? "-" + exact_with_unit(-n, kCountUnits) : exact_with_unit(n, kCountUnits); }

std::string format_bytes(int64_t n) { return n < 0 ? "-" + exact_with_unit(-n, kByteUnits) : exact_with_unit(n, kByteUnits); }

std::string format_duration_ns(int64_t ns) {
  if (ns == 0) return "0s";
  return ns < 0 ? "-" + exact_with_unit(-ns, kDurationUnits) : exact_with_unit(ns, kDurationUnits);
}

std::string format_rate(double v, RateUnit u) {
  // network rates are decimal: 10Gbps is 1e10 bit/s
  static const char *const kBits[] = {"bps", "Kbps", "Mbps", "Gbps", "Tbps"};
  static const char *const kPackets[] = {"pps", "Kpps", "Mpps", "Gpps"};
  const char *const *units = u == RateUnit::Bits ? kBits : kPackets;
  int last = u == RateUnit::Bits ? 4 : 3;
  int i = 0;
  double scaled = v;
  while (i < last && std::fabs(scaled) >= 1000) {
    scaled /= 1000;
    ++i;
  }
  return plain_number(scaled) + units[i];
}

}  // namespace sluice
