// Typed argument values, as the checker resolves them and the runtime reads
// them. Numbers are stored in base units: nanoseconds, bytes, bits or packets
// per second, plain counts.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice {

// What kind of value an element argument takes.
enum class ArgType : uint8_t {
  Count,     // integer; suffixes K M G are binary (64K = 65536)
  Bytes,     // integer bytes; B KB MB GB (binary); a bare integer is bytes
  Duration,  // ns us ms s min h; a unit is required
  Rate,      // bps Kbps Mbps Gbps Tbps (decimal) or pps Kpps Mpps Gpps
  Bool,      // true false yes no on off
  String,    // "text"; $var and ${var} are interpolated
  Symbol,    // one of a fixed set of words, e.g. `direction bi`
  Address,   // IPv4 or IPv6 address
  Prefix,    // IPv4 or IPv6 prefix, addr/len
  HostPort,  // host:port, [v6]:port
  Element,   // the name of another element in the same scope (e.g. `table ft`)
  Fraction,  // 1/N or a decimal in (0, 1]
};
const char *arg_type_name(ArgType t);

enum class RateUnit : uint8_t { Bits, Packets };

struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // v4 uses the first 4 bytes
  std::string to_string() const;
};

struct Value {
  ArgType type = ArgType::Count;
  bool is_symbol = false;    // a Symbol value, also for args that take a word or a number
  int64_t integer = 0;       // Count, Bytes, Duration (ns), Bool, HostPort port, Prefix length
  double real = 0;           // Rate, Fraction
  RateUnit rate_unit = RateUnit::Bits;
  std::string text;          // String, Symbol, Element name, HostPort host
  IpAddress address;         // Address, Prefix, HostPort when the host is numeric
  std::vector<Value> items;  // a list argument: the values in order
  bool is_list = false;

  // Canonical text with units, e.g. "15s", "64K", "10Gbps", "10.0.0.0/8".
  std::string to_string() const;
};

// Unit-aware formatting shared by `sluice elements`, plans and docs.
std::string format_count(int64_t n);
std::string format_bytes(int64_t n);
std::string format_duration_ns(int64_t ns);
std::string format_rate(double v, RateUnit u);

}  // namespace sluice
