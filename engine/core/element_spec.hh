// Element metadata: what each element class is, its typed ports and its
// arguments with units, defaults and ranges. Every element file in elements/
// declares its spec here once; the checker, `sluice elements` and the generated
// reference (docs/elements.md) all read the same registry.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "engine/base/value.hh"
#include "engine/flow/flow_record.hh"

namespace sluice {

enum class StreamType : uint8_t { Packets, Flows };
const char *stream_type_name(StreamType t);

struct PortSpec {
  std::string name;
  StreamType type = StreamType::Packets;
  bool required = true;   // must be connected
  bool multi = false;     // may take several connections (fan-out from an output, merge into an input)
  bool variadic = false;  // the last port repeats: Tee has outputs 0..N-1
  std::string doc;

  static PortSpec packets(std::string name) { PortSpec p; p.name = std::move(name); return p; }
  static PortSpec flows(std::string name) { PortSpec p; p.name = std::move(name); p.type = StreamType::Flows; return p; }
  PortSpec &&optional() && { required = false; return std::move(*this); }
  PortSpec &&many() && { multi = true; return std::move(*this); }
  PortSpec &&repeated() && { variadic = true; return std::move(*this); }
  PortSpec &&describe(std::string d) && { doc = std::move(d); return std::move(*this); }
};

// An argument's problem found by a custom validator: message and the bytes of
// the value's text it is about (for errors inside a filter expression).
struct ArgProblem {
  std::string message;
  int offset = -1;  // -1: the whole value
  int length = 0;   // bytes from offset; 0: a point (e.g. the end of the text)
};
using ArgValidator = std::function<std::optional<ArgProblem>(const Value &)>;

struct ArgSpec {
  std::string name;
  ArgType type = ArgType::Count;
  std::string doc;
  std::string default_text;  // source text of the default ("1M", "15s"); empty with !required: no default
  bool required = false;
  bool positional = false;   // may be given without its keyword, in declaration order
  bool list = false;         // also takes a list `[a, b, c]` of the type
  bool has_min = false, has_max = false;
  double min = 0, max = 0;   // in base units (ns, bytes, count, per second)
  RateUnit rate_unit = RateUnit::Bits;
  bool any_rate_unit = false;            // Rate: bits or packets per second
  std::vector<std::string> choices;      // Symbol, or words also allowed beside another type
  std::string element_class;             // Element: the class the referenced element must have
  ArgValidator validate;                 // extra check after typing (e.g. filter syntax)
  bool reloadable = false;               // a hot reload changes it in place, state kept
  bool gives_lanes = false;              // a source's: how many lanes (queues) it starts, one graph copy each

  static ArgSpec make(std::string name, ArgType t) { ArgSpec a; a.name = std::move(name); a.type = t; return a; }
  static ArgSpec count(std::string n) { return make(std::move(n), ArgType::Count); }
  static ArgSpec bytes(std::string n) { return make(std::move(n), ArgType::Bytes); }
  static ArgSpec duration(std::string n) { return make(std::move(n), ArgType::Duration); }
  static ArgSpec rate(std::string n, RateUnit u) { auto a = make(std::move(n), ArgType::Rate); a.rate_unit = u; return a; }
  static ArgSpec any_rate(std::string n) { auto a = make(std::move(n), ArgType::Rate); a.any_rate_unit = true; return a; }
  static ArgSpec boolean(std::string n) { return make(std::move(n), ArgType::Bool); }
  static ArgSpec string(std::string n) { return make(std::move(n), ArgType::String); }
  static ArgSpec symbol(std::string n, std::vector<std::string> c) { auto a = make(std::move(n), ArgType::Symbol); a.choices = std::move(c); return a; }
  static ArgSpec address(std::string n) { return make(std::move(n), ArgType::Address); }
  static ArgSpec prefix(std::string n) { return make(std::move(n), ArgType::Prefix); }
  static ArgSpec host_port(std::string n) { return make(std::move(n), ArgType::HostPort); }
  static ArgSpec element(std::string n, std::string cls) { auto a = make(std::move(n), ArgType::Element); a.element_class = std::move(cls); return a; }
  static ArgSpec fraction(std::string n) { return make(std::move(n), ArgType::Fraction); }

  ArgSpec &&def(std::string text) && { default_text = std::move(text); return std::move(*this); }
  ArgSpec &&needed() && { required = true; return std::move(*this); }
  ArgSpec &&pos() && { positional = true; return std::move(*this); }
  ArgSpec &&lists() && { list = true; return std::move(*this); }
  ArgSpec &&counts_lanes() && { gives_lanes = true; return std::move(*this); }
  ArgSpec &&at_least(double v) && { has_min = true; min = v; return std::move(*this); }
  ArgSpec &&at_most(double v) && { has_max = true; max = v; return std::move(*this); }
  ArgSpec &&range(double lo, double hi) && { has_min = has_max = true; min = lo; max = hi; return std::move(*this); }
  ArgSpec &&or_words(std::vector<std::string> w) && { choices = std::move(w); return std::move(*this); }
  ArgSpec &&check(ArgValidator v) && { validate = std::move(v); return std::move(*this); }
  ArgSpec &&describe(std::string d) && { doc = std::move(d); return std::move(*this); }
  ArgSpec &&live() && { reloadable = true; return std::move(*this); }

  // "count", "duration", "rate (bits/s)", "bi | uni", ...
  std::string type_text() const;
  // "1..1G", ">= 1ms", "" when unbounded; with units
  std::string range_text() const;
};

class RuntimeElement;  // engine/runtime/element_runtime.hh

// A value of a running element that `sluice ctl read ELEMENT.NAME` (and, when
// writable, `write`) reaches, bound to members of the element's class
// (ElementSpec::handler). Every element also has the counter handlers of
// common_handlers(), which RuntimeElement answers itself.
struct HandlerSpec {
  std::string name;
  bool writable = false;
  std::string doc;  // one line
  // The value as text (nullopt: none now); on the element's segment thread,
  // between two batches.
  std::function<std::optional<std::string>(const RuntimeElement &)> read;
  // A write's first step, on the control thread: parses and prepares the
  // value (compiles a filter), throws HandlerError for a bad one, and returns
  // the change to run on the segment thread.
  std::function<std::function<void()>(RuntimeElement &, const std::string &)> write;
};

// A handler member's value as text: strings as they are, numbers in decimal.
inline std::optional<std::string> handler_text(std::optional<std::string> s) { return s; }
template <class N>
  requires std::is_arithmetic_v<N>
std::optional<std::string> handler_text(N v) { return std::to_string(v); }

// The handlers every element has: its packet and record counters.
const std::vector<HandlerSpec> &common_handlers();

enum class MetricKind : uint8_t { Counter, Gauge, Histogram };
const char *metric_kind_name(MetricKind k);  // "counter", "gauge", "histogram"

// A number an element reports at /metrics beyond the counters every element
// keeps. The name is without the `sluice_` prefix, in base units (seconds,
// bytes), a counter's ends in `_total`; the endpoint adds the labels `lane`
// and `element` before `labels`. An element reports only metrics its spec
// declares (ElementMetrics checks), so `sluice elements` and
// docs/elements.md list them all.
struct MetricSpec {
  std::string name;
  MetricKind kind = MetricKind::Counter;
  std::string help;                 // one line: the HELP text
  std::vector<std::string> labels;  // beyond lane and element

  static MetricSpec counter(std::string n, std::string h, std::vector<std::string> l = {}) {
    return {std::move(n), MetricKind::Counter, std::move(h), std::move(l)};
  }
  static MetricSpec gauge(std::string n, std::string h, std::vector<std::string> l = {}) {
    return {std::move(n), MetricKind::Gauge, std::move(h), std::move(l)};
  }
  static MetricSpec histogram(std::string n, std::string h, std::vector<std::string> l = {}) {
    return {std::move(n), MetricKind::Histogram, std::move(h), std::move(l)};
  }
};

enum ElementFlags : unsigned {
  kSource = 1u << 0,          // starts lanes; its argument marked counts_lanes() says how many
  kThreadBoundary = 1u << 1,  // ends one segment and starts the next (Ring)
  kStateful = 1u << 2,        // holds state that a hot reload moves into a new instance (flows)
  kGivesTime = 1u << 3,       // packets leave it with a packet time (Timestamp; a source of capture times)
  kNeedsTime = 1u << 4,       // meters packets by their time: every path from a source must give one (FlowTable)
  kSamples = 1u << 5,         // keeps the share `rate` of its packets on output 0, the rest on 1 (Sample)
  kExportsSampling = 1u << 6, // tells collectors the sampling of its flows: every path to it must have the same
};

struct Element;  // engine/core/graph.hh
struct Node;     // engine/core/graph.hh

// What the runtime and the planner need from an element before any instance
// exists (to size packet memory, start DPDK's EAL, place lanes), judged from
// one node's arguments. The element answers for its own arguments; unset:
// it needs nothing of the kind.
struct ElementNeeds {
  // The device it opens (a PCI address, `pcap:FILE`, ...): the planner puts
  // its lanes on the device's NUMA node, and EAL is allowed the PCI ones.
  std::function<std::string(const Node &)> device;
  // Packet buffers it holds on its lane beyond the channels' (a NIC's
  // receive descriptors).
  std::function<unsigned(const Node &)> lane_mbufs;
  // The largest frame it makes, when a buffer's default data room is too
  // small for it (a source: TrafficGen's sizes).
  std::function<unsigned(const Node &)> frame_room;
  // A thread boundary: packets the channel after it holds.
  std::function<unsigned(const Node &)> channel_capacity;
  // A source: the most packets one poll returns (its lane's batch).
  std::function<unsigned(const Node &)> burst;
  // A source whose input waits for the lane (a trace file, unpaced generated
  // traffic): it is never lost for want of room, so a Ring after it has no
  // burst to absorb (what SourceElement::live() says of an instance, false).
  std::function<bool(const Node &)> offline_input;
  // A source whose packets point at bytes it keeps (InPlaceRecords: a trace
  // walked in place, generated frames): its pool's buffers have no data
  // room, and RunContext::kCopyBuffers a lane have, for the few it copies.
  std::function<bool(const Node &)> buffers_in_place;
};

struct ElementSpec {
  std::string name;
  std::string group;    // "source", "packet", "flow", "export": for listings
  std::string summary;  // one line
  std::string doc;      // paragraphs
  std::vector<PortSpec> inputs, outputs;
  std::vector<ArgSpec> args;
  std::vector<HandlerSpec> handlers;  // beyond common_handlers()
  std::vector<MetricSpec> metrics;    // beyond the counters every element keeps
  unsigned flags = 0;
  // A source whose packets carry capture times with some arguments only
  // (RSSSource: a `pcap:` device), judged from the arguments as written.
  std::function<bool(const Element &)> gives_time_if;
  ElementNeeds needs;
  // Flow record extension fields (flow_extension.hh) the element puts on
  // packets: a graph with it keeps them in its flow records.
  std::vector<std::string> flow_fields;
  // A flow table: the optional record fields (FlowField) a node keeps; its
  // graph's exporters and logs write them.
  std::function<FlowFieldSet(const Node &)> record_fields;

  explicit ElementSpec(std::string n) : name(std::move(n)) {}
  ElementSpec &&in_group(std::string g) && { group = std::move(g); return std::move(*this); }
  ElementSpec &&brief(std::string s) && { summary = std::move(s); return std::move(*this); }
  ElementSpec &&describe(std::string d) && { doc = std::move(d); return std::move(*this); }
  ElementSpec &&input(PortSpec p) && { inputs.push_back(std::move(p)); return std::move(*this); }
  ElementSpec &&output(PortSpec p) && { outputs.push_back(std::move(p)); return std::move(*this); }
  ElementSpec &&arg(ArgSpec a) && { args.push_back(std::move(a)); return std::move(*this); }
  ElementSpec &&with_flags(unsigned f) && { flags |= f; return std::move(*this); }
  ElementSpec &&sets_flow_field(std::string f) && { flow_fields.push_back(std::move(f)); return std::move(*this); }
  ElementSpec &&keeps_record_fields(std::function<FlowFieldSet(const Node &)> f) && {
    record_fields = std::move(f);
    return std::move(*this);
  }
  ElementSpec &&metric(MetricSpec m) && { metrics.push_back(std::move(m)); return std::move(*this); }
  // Metrics several classes share (an exporter's, a file's).
  ElementSpec &&with_metrics(const std::vector<MetricSpec> &m) && {
    metrics.insert(metrics.end(), m.begin(), m.end());
    return std::move(*this);
  }
  ElementSpec &&with_time_if(std::function<bool(const Element &)> f) && { gives_time_if = std::move(f); return std::move(*this); }
  // ElementNeeds, one by one.
  using NodeText = std::function<std::string(const Node &)>;
  using NodeCount = std::function<unsigned(const Node &)>;
  ElementSpec &&needs_device(NodeText f) && { needs.device = std::move(f); return std::move(*this); }
  ElementSpec &&needs_lane_mbufs(NodeCount f) && { needs.lane_mbufs = std::move(f); return std::move(*this); }
  ElementSpec &&needs_frame_room(NodeCount f) && { needs.frame_room = std::move(f); return std::move(*this); }
  ElementSpec &&needs_channel_capacity(NodeCount f) && { needs.channel_capacity = std::move(f); return std::move(*this); }
  ElementSpec &&needs_burst(NodeCount f) && { needs.burst = std::move(f); return std::move(*this); }
  ElementSpec &&has_buffers_in_place(std::function<bool(const Node &)> f) && {
    needs.buffers_in_place = std::move(f);
    return std::move(*this);
  }
  ElementSpec &&has_offline_input(std::function<bool(const Node &)> f) && {
    needs.offline_input = std::move(f);
    return std::move(*this);
  }
  // A handler read by a const member of the element's class T (returning
  // text, optional text or a number); writable_handler adds the member that
  // prepares a write: std::function<void()> (T::*)(const std::string &).
  template <class T, class R>
  ElementSpec &&handler(std::string n, std::string d, R (T::*get)() const) && {
    handlers.push_back({std::move(n), false, std::move(d), reader(get), nullptr});
    return std::move(*this);
  }
  template <class T, class R, class W>
  ElementSpec &&writable_handler(std::string n, std::string d, R (T::*get)() const,
                                 std::function<void()> (W::*prepare)(const std::string &)) && {
    static_assert(std::is_base_of_v<W, T> || std::is_base_of_v<T, W>);
    handlers.push_back({std::move(n), true, std::move(d), reader(get),
                        [prepare](RuntimeElement &e, const std::string &v) { return (static_cast<W &>(e).*prepare)(v); }});
    return std::move(*this);
  }

  bool is_source() const { return flags & kSource; }
  bool is_thread_boundary() const { return flags & kThreadBoundary; }
  // Whether packets leave element `e` (of this class) with a packet time,
  // as far as its arguments tell before anything runs.
  bool gives_time(const Element &e) const { return (flags & kGivesTime) || (gives_time_if && gives_time_if(e)); }
  const ArgSpec *find_arg(std::string_view n) const;
  // This element's handler or a common one; nullptr when neither.
  const HandlerSpec *find_handler(std::string_view n) const;
  // A metric the spec declares; nullptr when none of that name.
  const MetricSpec *find_metric(std::string_view n) const;
  // Port index for a name ("flows"), or -1.
  int input_index(std::string_view n) const;
  int output_index(std::string_view n) const;
  // The spec of port `i`, repeating the last one when it is variadic; nullptr if out of range.
  const PortSpec *input_port(int i) const;
  const PortSpec *output_port(int i) const;

 private:
  template <class T, class R>
  static auto reader(R (T::*get)() const) {
    return [get](const RuntimeElement &e) { return handler_text((static_cast<const T &>(e).*get)()); };
  }
};

class ElementRegistry {
public:
  static ElementRegistry &global();
  // Registers a spec; a second spec with the same name is refused (returns
  // false) and its name kept for take_refused().
  bool add(const ElementSpec *spec);
  // The names refused since the last call (a plugin's loader says so).
  std::vector<std::string> take_refused();
  const ElementSpec *find(std::string_view name) const;
  std::vector<const ElementSpec *> all() const;  // sorted by name
  std::vector<std::string> names() const;

private:
  std::vector<const ElementSpec *> specs_;
  std::vector<std::string> refused_;
};

struct RegisterElement {
  explicit RegisterElement(const ElementSpec &spec) { ElementRegistry::global().add(&spec); }
};

}  // namespace sluice

// An element that can be checked and planned but not run (a test's, the
// fuzzers'): `SLUICE_ELEMENT_SPEC(spec_function)`, where spec_function
// returns a `const ElementSpec &` (a function-local static, so that
// registration order never matters). Elements that run are registered with
// SLUICE_ELEMENT(Class, spec_function) (engine/runtime/element_runtime.hh).
#define SLUICE_ELEMENT_CAT2(a, b) a##b
#define SLUICE_ELEMENT_CAT(a, b) SLUICE_ELEMENT_CAT2(a, b)
#define SLUICE_ELEMENT_SPEC(spec_fn) \
  static ::sluice::RegisterElement SLUICE_ELEMENT_CAT(sluice_register_, __LINE__){spec_fn()}

namespace sluice {
// Plugins export `int sluice_plugin_abi()` returning the ABI they were built for.
// 2: elements register with SLUICE_ELEMENT, handlers bound in the spec, ElementNeeds.
// 3: flow record extension fields (FlowRecord::ext, PacketAnno::labels); ArgSpec::gives_lanes.
// 4: metrics declared in the spec (ElementSpec::metric), reported through ElementMetrics.
// 5: optional flow record fields (FlowField, ElementSpec::record_fields; FlowCounters and
//    FlowRecord grew, PacketAnno has if_index and flow_direction).
// 6: SourceElement::input_progress (sources' vtables grew).
// 7: ElementNeeds::buffers_in_place (ElementSpec grew).
inline constexpr int kPluginAbi = 7;
}  // namespace sluice
