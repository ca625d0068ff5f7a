#include "engine/core/element_spec.hh"

#include <utility>
#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sluice {

const char *stream_type_name(StreamType t) { return t == StreamType::Flows ? "flows" : "packets"; }

const char *metric_kind_name(MetricKind k) {
  switch (k) {
    case MetricKind::Counter: return "counter";
    case MetricKind::Gauge: return "gauge";
    case MetricKind::Histogram: return "histogram";
  }
  return "?";
}

namespace {

std::string join(const std::vector<std::string> &words, const char *sep) {
  std::string s;
  for (const auto &w : words) s += (s.empty() ? "" : sep) + w;
  return s;
}

// A bound in the argument's own units, as a user would write it.
std::string bound_text(const ArgSpec &a, double v) {
  switch (a.type) {
    case ArgType::Count: return format_count(std::llround(v));
    case ArgType::Bytes: return format_bytes(std::llround(v));
    case ArgType::Duration: return format_duration_ns(std::llround(v));
    case ArgType::Rate: return format_rate(v, a.rate_unit);
    default: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.15g", v);
      return buf;
    }
  }
}

const PortSpec *port_at(const std::vector<PortSpec> &ports, int i) {
  if (i < 0 || ports.empty()) return nullptr;
  if (static_cast<size_t>(i) < ports.size()) return &ports[i];
  return ports.back().variadic ? &ports.back() : nullptr;
}

int port_index(const std::vector<PortSpec> &ports, std::string_view n) {
  for (size_t i = 0; i < ports.size(); ++i)
    if (ports[i].name == n) return static_cast<int>(i);
  return -1;
}

}  // namespace

std::string ArgSpec::type_text() const {
  std::string s;
  switch (type) {
    case ArgType::Rate:
      s = any_rate_unit ? "rate (bits/s or packets/s)" : rate_unit == RateUnit::Bits ? "rate (bits/s)" : "rate (packets/s)";
      break;
    case ArgType::Symbol: s = "one of: " + join(choices, ", "); break;
    case ArgType::Element: s = element_class.empty() ? "element" : "element (" + element_class + ")"; break;
    default: s = arg_type_name(type);
  }
  if (list) s += " (or a list)";
  // words allowed beside a number type, e.g. `sizes imix`
  if (type != ArgType::Symbol && !choices.empty()) s += ", or " + join(choices, " or ");
  return s;
}

std::string ArgSpec::range_text() const {
  if (has_min && has_max) return bound_text(*this, min) + ".." + bound_text(*this, max);
  if (has_min) return ">= " + bound_text(*this, min);
  if (has_max) return "<= " + bound_text(*this, max);
  return "";
}

const std::vector<HandlerSpec> &common_handlers() {
  // answered by RuntimeElement::read_handler itself, not bound to members
  auto counter = [](const char *name, const char *doc) { return HandlerSpec{name, false, doc, nullptr, nullptr}; };
  static const std::vector<HandlerSpec> h = {
      counter("in", "packets received"),
      counter("out", "packets sent on (every copy counts)"),
      counter("absorbed", "packets that ended here by design (sinks, a flow table)"),
      counter("copies", "extra packets made by fan-out"),
      counter("dropped", "packets dropped, all reasons"),
      counter("drops", "packets and flow records dropped, one line per reason"),
      counter("bytes", "bytes received (sources and Counter count them)"),
      counter("records_in", "flow records received"),
      counter("records_out", "flow records sent on"),
      counter("records_absorbed", "flow records that ended here: written or exported"),
  };
  return h;
}

const HandlerSpec *ElementSpec::find_handler(std::string_view n) const {
  for (const HandlerSpec &h : handlers)
    if (h.name == n) return &h;
  for (const HandlerSpec &h : common_handlers())
    if (h.name == n) return &h;
  return nullptr;
}

const MetricSpec *ElementSpec::find_metric(std::string_view n) const {
  for (const MetricSpec &m : metrics)
    if (m.name == n) return &m;
  return nullptr;
}

const ArgSpec *ElementSpec::find_arg(std::string_view n) const {
  for (const ArgSpec &a : args)
    if (a.name == n) return &a;
  return nullptr;
}

int ElementSpec::input_index(std::string_view n) const { return port_index(inputs, n); }
int ElementSpec::output_index(std::string_view n) const { return port_index(outputs, n); }
const PortSpec *ElementSpec::input_port(int i) const { return port_at(inputs, i); }
const PortSpec *ElementSpec::output_port(int i) const { return port_at(outputs, i); }

ElementRegistry &ElementRegistry::global() {
  // function-local: elements register from static constructors in any order
  static ElementRegistry registry;
  return registry;
}

bool ElementRegistry::add(const ElementSpec *spec) {
  if (!spec) return false;
  if (find(spec->name)) {
    refused_.push_back(spec->name);
    return false;
  }
  specs_.push_back(spec);
  return true;
}

std::vector<std::string> ElementRegistry::take_refused() { return std::exchange(refused_, {}); }

const ElementSpec *ElementRegistry::find(std::string_view name) const {
  for (const ElementSpec *s : specs_)
    if (s->name == name) return s;
  return nullptr;
}

std::vector<const ElementSpec *> ElementRegistry::all() const {
  std::vector<const ElementSpec *> out = specs_;
  std::sort(out.begin(), out.end(), [](const ElementSpec *a, const ElementSpec *b) { return a->name < b->name; });
  return out;
}

std::vector<std::string> ElementRegistry::names() const {
  std::vector<std::string> out;
  for (const ElementSpec *s : all()) out.push_back(s->name);
  return out;
}

}  // namespace sluice
