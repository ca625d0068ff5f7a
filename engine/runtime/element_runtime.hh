// The run-time side of an element: one instance per node of the lane graph
// (one per lane, or one for a shared element), holding the element's
// configuration and state. Segment loops move batches through these
// instances; the loop itself is replaceable at a batch boundary (the JIT and
// hot reload swap it), while the instances, and so the state, stay in place.
#pragma once
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/core/graph.hh"
#include "engine/runtime/counters.hh"
#include "engine/runtime/packet.hh"

namespace sluice {

class RuntimeElement;
class Channel;
class PcapFilter;
struct RunContext;

// A handler's value cannot be written (a bad expression, out of range): the
// message goes to the `sluice ctl` caller.
struct HandlerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Where the metrics endpoint's numbers go (MetricsWriter): a name without
// the `sluice_` prefix, its help text and type, and the labels of a sample.
class MetricSink {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;
  virtual ~MetricSink() = default;
  virtual void counter(const std::string &name, const std::string &help, double value, const Labels &labels = {}) = 0;
  virtual void gauge(const std::string &name, const std::string &help, double value, const Labels &labels = {}) = 0;
  // buckets: (upper bound, observations <= it), ascending; +Inf is `count`.
  virtual void histogram(const std::string &name, const std::string &help,
                         const std::vector<std::pair<double, uint64_t>> &buckets, double sum, uint64_t count,
                         const Labels &labels = {}) = 0;
};

// Where an element reports its own metrics (RuntimeElement::report_metrics):
// by name only, since its spec declares each one's type, help and label
// names (ElementSpec::metric). A metric the spec does not declare, of
// another type or with other labels throws std::logic_error: a bug in the
// element, never input.
class ElementMetrics {
 public:
  using Labels = MetricSink::Labels;
  ElementMetrics(const ElementSpec &spec, MetricSink &out) : spec_(spec), out_(out) {}
  void counter(std::string_view name, double value, const Labels &labels = {});
  void gauge(std::string_view name, double value, const Labels &labels = {});
  void histogram(std::string_view name, const std::vector<std::pair<double, uint64_t>> &buckets, double sum,
                 uint64_t count, const Labels &labels = {});

 private:
  const MetricSpec &declared(std::string_view name, MetricKind kind, const Labels &labels) const;
  const ElementSpec &spec_;
  MetricSink &out_;
};

// Where an output port leads: an element of the same segment, or a channel
// to another segment (through a Ring, or the merge into a shared element).
struct OutputTarget {
  RuntimeElement *element = nullptr;
  int port = 0;
  Channel *channel = nullptr;
};

class RuntimeElement {
 public:
  RuntimeElement(const Node &node, RunContext &ctx);
  virtual ~RuntimeElement() = default;
  RuntimeElement(const RuntimeElement &) = delete;
  RuntimeElement &operator=(const RuntimeElement &) = delete;

  const std::string &name() const { return name_; }
  const std::string &class_name() const { return class_name_; }
  int lane() const { return lane_; }
  const Node &node() const { return *node_; }

  // Packets arriving on input `port`, counted. The element then owns them:
  // each goes to an output, is absorbed, or is dropped with a reason.
  void receive(int port, PacketBatch &batch) {
    counters.in.add(batch.count);
    push(port, batch);
  }

  // After every instance exists and the sources have started, on the main
  // thread: open files, compile expressions. Throws std::runtime_error with a
  // message for the user when the element cannot run.
  virtual void prepare() {}

  // Hot reload (engine/runtime/reload_transaction.cc). Everything that can
  // fail happens before the switch, while the old graph can still go on:
  // prepare_reconfigure() (the arguments marked live() that changed, read
  // from `next`, the element's node in the new graph) and prepare_relink()
  // (the instances it refers to in the new graph, e.g. a GCSlicer's table,
  // found through the context, which then describes the new graph) run on
  // the control thread while no segment runs; each may throw
  // std::runtime_error (the reload is then abandoned) and returns the change
  // to apply, or nullptr. At the switch, which cannot fail, a kept instance
  // is rebound to `next`, its staged wiring replaces its old one, and the
  // changes run. A migrated element's new instance takes over the old one's
  // state in adopt_state() (a flow table's flows), on its own thread.
  using Change = std::function<void()>;
  virtual Change prepare_reconfigure(const Node &next) { return nullptr; }
  virtual Change prepare_relink() { return nullptr; }
  void rebind(const Node &n) { node_ = &n; }
  virtual void adopt_state(RuntimeElement &old) {}
  // Flow records arriving on input `port` (a flows stream), counted.
  void receive_flows(int port, FlowBatch &batch) {
    counters.records_in.add(batch.count);
    push_flows(port, batch);
  }

  // Called once per loop pass of its segment, also when no packet came:
  // timers (GCSlicer's slices, an exporter's template refresh and
  // reconnects) run even on an idle lane.
  virtual bool wants_tick() const { return false; }
  virtual void tick() {}
  // End of input: emit or write whatever the element still holds. Runs once,
  // on the segment's thread, after the last batch, in topological order.
  virtual void flush() {}
  // After flush(): sends some of what the element still holds (queued
  // messages); true once nothing is left. Never blocks long (a few ms at most).
  virtual bool drain_pending(uint64_t now_ns) { return true; }
  // Gives up what is still held: counted lost, with a reason (e.g. "not sent
  // before the end" / "not sent before removal").
  virtual void abandon_pending(const char *why) {}
  // Lines for the run summary beyond the packet counters.
  virtual void report(std::vector<std::string> &lines) const {}
  // Counts by reason of what happened to packets beyond their fate (which
  // the counters and drops say): FlowTable's packets dated at its clock.
  // For the summary's JSON; any thread.
  virtual void event_counts(std::vector<std::pair<std::string, uint64_t>> &out) const {}

  // Control handlers (`sluice ctl read/write ELEMENT.HANDLER`): the common
  // counter handlers, and those the spec binds to the class's members
  // (ElementSpec::handler). Reads and applied writes run on the element's
  // segment thread between two batches (SegmentRunner::call), so they may
  // touch any state. The value as text; nullopt when the element has no such
  // handler.
  std::optional<std::string> read_handler(const std::string &name) const;
  // A write, in two steps: this runs on the control thread and may only
  // read what does not change while running (arguments, the link type); it
  // parses and prepares the value (compiles a filter) and throws
  // HandlerError for a bad one. The change it returns runs on the segment
  // thread. nullopt when the element has no such writable handler.
  using HandlerChange = std::function<void()>;
  std::optional<HandlerChange> prepare_write(const std::string &name, const std::string &value);
  // The metrics its spec declares, beyond the counters (which are read
  // from any thread). Runs on the segment thread between two batches.
  virtual void report_metrics(ElementMetrics &out) const {}
  // Whether counters.in_bytes is kept (sources, Counter).
  virtual bool counts_bytes() const { return false; }
  // Elements that hold flows (FlowTable): entry slots of the table, fixed
  // for the run (readable from any thread; 0: holds no flows), and what the
  // active flows in slots [begin, end) have counted so far, as records with
  // reason 0, without changing them. On the segment thread.
  virtual size_t flow_slots() const { return 0; }
  virtual void peek_flows(size_t begin, size_t end, const std::function<void(const FlowRecord &)> &fn) const {}

  // Sends a batch out of output `port` (for segment programs: a source's batch).
  void send(int port, PacketBatch &batch) { emit(port, batch); }
  void send_flows(int port, FlowBatch &batch) { emit_flows(port, batch); }

  // Wiring, at setup. A reload stages the new wiring of an instance that
  // keeps running meanwhile, and commits it at the switch (a swap: cannot fail).
  void connect(int out_port, OutputTarget t);
  void stage_connect(int out_port, OutputTarget t);
  void commit_wiring();
  void drop_staged_wiring() { staged_outputs_.clear(); }
  size_t output_count() const { return outputs_.size(); }
  const std::vector<OutputTarget> &targets(int out_port) const { return outputs_[out_port].targets; }

  ElementCounters counters;

  // What the element does with a batch on input `port`; receive() counts
  // and calls it. Public because a fused segment loop (the JIT) calls the
  // element's own push directly, with the counting done in the loop.
  virtual void push(int port, PacketBatch &batch) = 0;
  virtual void push_flows(int port, FlowBatch &batch);

  // For the JIT (engine/jit): bytes of this instance that do not change
  // while its segment runs (configuration, table sizes, pointers to tables),
  // which the fused loop embeds as constants. Only a reload or a handler
  // write changes them, and both make the segment's loop compiled again.
  struct ConstantBytes {
    const void *begin;
    size_t size;
  };
  virtual void jit_constants(std::vector<ConstantBytes> &out) const {}
  // Those of the element's own, then the base's: its output wiring.
  void jit_constant_bytes(std::vector<ConstantBytes> &out) const;
  // The compiled pcap filter whose sluice_filter_match() calls the JIT
  // replaces by the filter program turned into IR (Filter).
  virtual const PcapFilter *jit_pcap_filter() const { return nullptr; }

 protected:

  // Hands the batch to what output `port` is connected to. With several
  // connections each gets the packets (one more mbuf reference per extra
  // copy); with none they are dropped with the port's unconnected reason.
  void emit(int port, PacketBatch &batch);
  // Drops with a reason from counters.reason().
  // Flow records out of output `port`; every connection gets every record.
  void emit_flows(int port, FlowBatch &batch);
  // The same for records the element made (a flow table's, a GCSlicer's
  // expirations), not passed on: counted as made (records_made).
  void emit_made_flows(int port, FlowBatch &batch);
  void drop(rte_mbuf *m, int reason);
  void drop_all(PacketBatch &batch, int reason);
  // Ends packets here by design (Discard, PcapSink).
  void absorb_all(PacketBatch &batch);
  // The reason packets sent to an unconnected optional output are dropped with.
  void set_unconnected_reason(int out_port, const std::string &reason);

  // Typed argument access (resolved per lane).
  const Value &arg(std::string_view name) const;
  bool has_arg(std::string_view name) const;

  RunContext &ctx_;

 private:
  struct Output {
    std::vector<OutputTarget> targets;
    int unconnected_reason = -1;
  };
  const Node *node_;
  std::string name_, class_name_;
  int lane_;
  std::vector<Output> outputs_;
  std::vector<Output> staged_outputs_;  // a reload's wiring until the switch
};

// What a source's poll produced.
enum class PollStatus { Packets, Idle, End };

// An element that starts a lane: the segment loop polls it for batches.
class SourceElement : public RuntimeElement {
 public:
  using RuntimeElement::RuntimeElement;
  // Fills `batch` (up to burst packets, parsed and annotated).
  virtual PollStatus poll(PacketBatch &batch) = 0;
  // Live input (a NIC, an interface, paced replay): a full ring drops and
  // counts. Offline input (a trace file, unpaced replay) waits instead, so
  // that a replay gives the same result every time.
  virtual bool live() const = 0;
  // Called on the main thread after every element exists and before the
  // segment threads start: open devices, generate traffic.
  virtual void start() {}
  // Packet counts the device saw that never reached the lane (rx missed,
  // no mbuf), by reason: they count as received and dropped.
  virtual void device_drops(std::vector<std::pair<std::string, uint64_t>> &out) const {}
  uint64_t received_bytes() const { return counters.in_bytes.get(); }
  bool counts_bytes() const override { return true; }
  // The link layer of the packets (pcap files may carry others than Ethernet).
  virtual LinkType link_type() const { return LinkType::Ethernet; }
  // Whether packets carry a capture time (trace files, TrafficGen) in anno().time_ns.
  virtual bool has_capture_time() const { return false; }
  // Whether the device stamps packets itself (Timestamp(clock hw)).
  virtual bool has_hw_timestamps() const { return false; }
  // How far a finite input has been read: {done, total}, in a unit of the
  // source's (packets, bytes of a trace); nothing for an input without an
  // end. Asked from the main thread while the lane runs: the JIT compiles
  // only when the run is to go on long enough to repay it (Runtime::run).
  virtual std::optional<std::pair<double, double>> input_progress() const { return std::nullopt; }

  void push(int, PacketBatch &) override {}
};

// What the native build and the bitcode build of an element both record,
// so that the JIT can tell bitcode that does not belong to this binary: the
// instance's size and the source file's modification time.
struct JitStamp {
  uint64_t object_size;
  char source_time[32];
};

// Where the JIT finds an element class in its bitcode.
struct JitEntry {
  const char *push_symbol;  // extern "C" void (RuntimeElement *, int port, PacketBatch *)
  const char *stamp_symbol;
  const JitStamp *stamp;    // this binary's
  // A packet stage (PacketStage): extern "C" int (RuntimeElement *,
  // rte_mbuf *) and void (RuntimeElement *, uint64_t packets, uint64_t bytes).
  const char *classify_symbol = nullptr;
  const char *batch_done_symbol = nullptr;
};

// The factory registry: one factory per element class that can run.
using RuntimeFactory = std::function<std::unique_ptr<RuntimeElement>(const Node &, RunContext &)>;
class RuntimeRegistry {
 public:
  static RuntimeRegistry &global();
  void add(const std::string &cls, RuntimeFactory f) { factories_[cls] = std::move(f); }
  const RuntimeFactory *find(const std::string &cls) const {
    auto it = factories_.find(cls);
    return it == factories_.end() ? nullptr : &it->second;
  }
  void add_jit(const std::string &cls, JitEntry e);
  const JitEntry *find_jit(const std::string &cls) const;

 private:
  std::map<std::string, RuntimeFactory> factories_;
  std::map<std::string, JitEntry> jit_;
};

// A packet stage: an element with one input whose push decides each
// packet's output on its own, in arrival order. Derived has
//   int classify(rte_mbuf *m)   the output port for m, called once per packet
//   void batch_done(uint64_t packets, uint64_t wire_bytes)   once per batch,
//                               after classify (optional: the default does nothing)
// and push() is derived from them: classify every packet, batch_done, then
// emit the packets of each of the `Outputs` outputs in port order. A fused
// loop (the JIT) runs a chain of adjacent stages (Filter -> Sample ->
// Counter) in one pass over the batch, calling the same two functions.
class PacketStageBase : public RuntimeElement {
 public:
  using RuntimeElement::RuntimeElement;
};

template <class Derived, int Outputs = 1>
class PacketStage : public PacketStageBase {
  static_assert(Outputs >= 1);

 public:
  using PacketStageBase::PacketStageBase;

  void batch_done(uint64_t, uint64_t) {}

  void push(int, PacketBatch &batch) final {
    Derived &self = static_cast<Derived &>(*this);
    uint64_t packets = batch.count, bytes = batch.wire_bytes();
    if constexpr (Outputs == 1) {
      for (int i = 0; i < batch.count; ++i) self.classify(batch.pkts[i]);
      self.batch_done(packets, bytes);
      emit(0, batch);
    } else {
      PacketBatch others[Outputs - 1];
      uint16_t kept = 0;
      for (int i = 0; i < batch.count; ++i) {
        rte_mbuf *m = batch.pkts[i];
        int port = self.classify(m);
        if (port == 0) batch.pkts[kept++] = m;
        else others[port - 1].push(m);
      }
      batch.count = kept;
      self.batch_done(packets, bytes);
      emit(0, batch);
      for (int q = 1; q < Outputs; ++q) emit(q, others[q - 1]);
    }
  }
};

template <class T>
inline constexpr bool is_packet_stage = std::is_base_of_v<PacketStageBase, T>;

// SLUICE_ELEMENT's JIT entries of a packet stage (and nothing for others).
template <class T>
int stage_classify(RuntimeElement *e, rte_mbuf *m) {
  if constexpr (is_packet_stage<T>) return static_cast<T *>(e)->T::classify(m);
  else return 0;
}
template <class T>
void stage_batch_done(RuntimeElement *e, uint64_t packets, uint64_t bytes) {
  if constexpr (is_packet_stage<T>) static_cast<T *>(e)->T::batch_done(packets, bytes);
}

// What SLUICE_ELEMENT registers: the spec, the factory and the JIT's entry,
// all under the spec's name.
struct RegisterElementClass {
  RegisterElementClass(const ElementSpec &spec, RuntimeFactory make, JitEntry jit) {
    // a name taken already keeps its class: spec, factory and JIT entry together
    if (!ElementRegistry::global().add(&spec)) return;
    RuntimeRegistry::global().add(spec.name, std::move(make));
    RuntimeRegistry::global().add_jit(spec.name, jit);
  }
};

}  // namespace sluice

// An element, in its one .cc: the class (constructor (const Node &,
// RunContext &)) and a function returning its spec (a function-local static),
// registered once with
//   SLUICE_ELEMENT(FilterRuntime, filter_spec);
// The class name in the pipe language is the spec's name. Besides the spec
// and the factory this defines what the JIT finds in the file's bitcode
// (docs/jit.md): the class's entry, which calls its push directly, its stamp
// (JitStamp), and for a packet stage (PacketStage) its classify and
// batch_done.
#define SLUICE_ELEMENT(Type, spec_fn)                                                                       \
  extern "C" void sluice_jit_push_##Type(::sluice::RuntimeElement *e, int port, ::sluice::PacketBatch *b) { \
    static_cast<Type *>(e)->Type::push(port, *b);                                                          \
  }                                                                                                        \
  extern "C" const ::sluice::JitStamp sluice_jit_stamp_##Type = {sizeof(Type), __TIMESTAMP__};            \
  extern "C" int sluice_jit_classify_##Type(::sluice::RuntimeElement *e, rte_mbuf *m) {                   \
    return ::sluice::stage_classify<Type>(e, m);                                                           \
  }                                                                                                        \
  extern "C" void sluice_jit_batch_done_##Type(::sluice::RuntimeElement *e, uint64_t n, uint64_t bytes) { \
    ::sluice::stage_batch_done<Type>(e, n, bytes);                                                         \
  }                                                                                                        \
  static ::sluice::RegisterElementClass SLUICE_ELEMENT_CAT(sluice_element_, __LINE__){                     \
      spec_fn(),                                                                                           \
      [](const ::sluice::Node &n, ::sluice::RunContext &c) -> std::unique_ptr<::sluice::RuntimeElement> {  \
        return std::make_unique<Type>(n, c);                                                               \
      },                                                                                                   \
      {"sluice_jit_push_" #Type, "sluice_jit_stamp_" #Type, &sluice_jit_stamp_##Type,                      \
       ::sluice::is_packet_stage<Type> ? "sluice_jit_classify_" #Type : nullptr,                           \
       ::sluice::is_packet_stage<Type> ? "sluice_jit_batch_done_" #Type : nullptr}}
