#include "engine/runtime/element_runtime.hh"

#include <stdexcept>

#include "engine/runtime/channel.hh"
#include "engine/runtime/run_context.hh"

namespace sluice {

RuntimeRegistry &RuntimeRegistry::global() {
  static RuntimeRegistry r;
  return r;
}

void RuntimeRegistry::add_jit(const std::string &cls, JitEntry e) { jit_[cls] = e; }

const JitEntry *RuntimeRegistry::find_jit(const std::string &cls) const {
  auto it = jit_.find(cls);
  return it == jit_.end() ? nullptr : &it->second;
}

RuntimeElement::RuntimeElement(const Node &node, RunContext &ctx)
    : ctx_(ctx), node_(&node), name_(node.name), lane_(node.lane) {
  // From the node, not ctx.graph(): a hot reload makes instances of the next
  // graph while the running one is still the context's.
  class_name_ = node.spec->name;
  outputs_.resize(node.spec->outputs.size());
}

void RuntimeElement::jit_constant_bytes(std::vector<ConstantBytes> &out) const {
  jit_constants(out);
  out.push_back({&outputs_, sizeof outputs_});
  for (const Output &o : outputs_) {
    out.push_back({&o, sizeof o});
    if (!o.targets.empty()) out.push_back({o.targets.data(), o.targets.size() * sizeof(OutputTarget)});
  }
}

void RuntimeElement::connect(int out_port, OutputTarget t) {
  if (out_port >= int(outputs_.size())) outputs_.resize(out_port + 1);  // variadic (Tee)
  outputs_[out_port].targets.push_back(t);
}

void RuntimeElement::stage_connect(int out_port, OutputTarget t) {
  if (staged_outputs_.empty()) {  // the same ports, unconnected, keeping their reasons
    staged_outputs_.resize(outputs_.size());
    for (size_t p = 0; p < outputs_.size(); ++p) staged_outputs_[p].unconnected_reason = outputs_[p].unconnected_reason;
  }
  if (out_port >= int(staged_outputs_.size())) staged_outputs_.resize(out_port + 1);
  staged_outputs_[out_port].targets.push_back(t);
}

void RuntimeElement::commit_wiring() {
  if (staged_outputs_.empty()) {  // nothing connected in the new graph
    for (Output &o : outputs_) o.targets.clear();
    return;
  }
  outputs_.swap(staged_outputs_);
  staged_outputs_.clear();
}

void RuntimeElement::set_unconnected_reason(int out_port, const std::string &reason) {
  if (out_port >= int(outputs_.size())) outputs_.resize(out_port + 1);
  outputs_[out_port].unconnected_reason = counters.reason(reason);
}

void RuntimeElement::emit(int port, PacketBatch &batch) {
  if (batch.count == 0) return;
  Output &o = outputs_[port];
  size_t n = o.targets.size();
  if (n == 0) {
    if (o.unconnected_reason < 0)
      throw std::logic_error(name_ + ": packets sent to unconnected output " + std::to_string(port));
    drop_all(batch, o.unconnected_reason);
    return;
  }
  if (n > 1) {
    // Every connection gets every packet: one more reference per extra copy.
    for (int i = 0; i < batch.count; ++i) rte_mbuf_refcnt_update(batch.pkts[i], int16_t(n - 1));
    counters.copies.add(uint64_t(batch.count) * (n - 1));
  }
  for (size_t t = 0; t < n; ++t) {
    const OutputTarget &target = o.targets[t];
    PacketBatch copy;
    PacketBatch *b = &batch;
    if (t + 1 < n) {  // receivers may reorder their batch: all but the last get a copy
      copy.count = batch.count;
      std::copy(batch.pkts, batch.pkts + batch.count, copy.pkts);
      b = &copy;
    }
    if (target.channel) {
      counters.out.add(target.channel->send(*b, ctx_.stop_now));
    } else {
      counters.out.add(b->count);
      target.element->receive(target.port, *b);
    }
  }
}

void RuntimeElement::push_flows(int port, FlowBatch &) {
  throw std::logic_error(name_ + ": flow records sent to input " + std::to_string(port) + ", which takes none");
}

void RuntimeElement::emit_flows(int port, FlowBatch &batch) {
  if (batch.count == 0) return;
  Output &o = outputs_[port];
  if (o.targets.empty()) {
    if (o.unconnected_reason < 0)
      throw std::logic_error(name_ + ": flow records sent to unconnected output " + std::to_string(port));
    counters.drops[o.unconnected_reason].add(batch.count);
    batch.count = 0;
    return;
  }
  counters.records_copies.add(uint64_t(batch.count) * (o.targets.size() - 1));
  for (size_t t = 0; t < o.targets.size(); ++t) {
    const OutputTarget &target = o.targets[t];
    FlowBatch copy;
    FlowBatch *b = &batch;
    if (t + 1 < o.targets.size()) {  // receivers may change their batch: all but the last get a copy
      copy.count = batch.count;
      std::copy(batch.recs, batch.recs + batch.count, copy.recs);
      b = &copy;
    }
    if (target.channel) {
      counters.records_out.add(target.channel->send(*b, ctx_.stop_now));
    } else {
      counters.records_out.add(b->count);
      target.element->receive_flows(target.port, *b);
    }
  }
  batch.count = 0;
}

void RuntimeElement::emit_made_flows(int port, FlowBatch &batch) {
  counters.records_made.add(batch.count);
  emit_flows(port, batch);
}

void RuntimeElement::drop(rte_mbuf *m, int reason) {
  counters.drops[reason].add();
  free_packet(m);
}

void RuntimeElement::drop_all(PacketBatch &batch, int reason) {
  counters.drops[reason].add(batch.count);
  free_packets(batch.pkts, batch.count);
  batch.count = 0;
}

void RuntimeElement::absorb_all(PacketBatch &batch) {
  counters.absorbed.add(batch.count);
  free_packets(batch.pkts, batch.count);
  batch.count = 0;
}

std::optional<std::string> RuntimeElement::read_handler(const std::string &name) const {
  for (const HandlerSpec &h : node_->spec->handlers)
    if (h.name == name && h.read) return h.read(*this);
  const ElementCounters &c = counters;
  auto number = [](uint64_t v) { return std::optional<std::string>(std::to_string(v)); };
  if (name == "in") return number(c.in.get());
  if (name == "out") return number(c.out.get());
  if (name == "absorbed") return number(c.absorbed.get());
  if (name == "copies") return number(c.copies.get());
  if (name == "dropped") return number(c.dropped());
  if (name == "bytes") return number(c.in_bytes.get());
  if (name == "records_in") return number(c.records_in.get());
  if (name == "records_out") return number(c.records_out.get());
  if (name == "records_absorbed") return number(c.records_absorbed.get());
  if (name == "drops") {
    std::string lines;
    for (size_t r = 0; r < c.reasons.size(); ++r)
      lines += c.reasons[r] + (c.of_records[r] ? " (records): " : ": ") + std::to_string(c.drops[r].get()) + "\n";
    if (!lines.empty()) lines.pop_back();
    return lines;
  }
  return std::nullopt;
}

std::optional<RuntimeElement::HandlerChange> RuntimeElement::prepare_write(const std::string &name,
                                                                          const std::string &value) {
  for (const HandlerSpec &h : node_->spec->handlers)
    if (h.name == name && h.write) return h.write(*this, value);
  return std::nullopt;
}

const Value &RuntimeElement::arg(std::string_view n) const {
  const ResolvedArg *a = node_->arg(n);
  if (!a) throw std::logic_error(name_ + ": no argument '" + std::string(n) + "'");
  return a->value;
}

bool RuntimeElement::has_arg(std::string_view n) const {
  return node_->arg(n) != nullptr;  // optional arguments without a default are absent
}

const MetricSpec &ElementMetrics::declared(std::string_view name, MetricKind kind, const Labels &labels) const {
  const MetricSpec *m = spec_.find_metric(name);
  auto fault = [&](const std::string &what) {
    return std::logic_error(spec_.name + " reports metric " + std::string(name) + " " + what);
  };
  if (!m) throw fault("that its spec does not declare (ElementSpec::metric)");
  if (m->kind != kind)
    throw fault(std::string("as a ") + metric_kind_name(kind) + ", declared a " + metric_kind_name(m->kind));
  bool same = labels.size() == m->labels.size();
  for (size_t i = 0; same && i < labels.size(); ++i) same = labels[i].first == m->labels[i];
  if (!same) throw fault("with labels other than those declared");
  return *m;
}

void ElementMetrics::counter(std::string_view name, double value, const Labels &labels) {
  const MetricSpec &m = declared(name, MetricKind::Counter, labels);
  out_.counter(m.name, m.help, value, labels);
}

void ElementMetrics::gauge(std::string_view name, double value, const Labels &labels) {
  const MetricSpec &m = declared(name, MetricKind::Gauge, labels);
  out_.gauge(m.name, m.help, value, labels);
}

void ElementMetrics::histogram(std::string_view name, const std::vector<std::pair<double, uint64_t>> &buckets,
                               double sum, uint64_t count, const Labels &labels) {
  const MetricSpec &m = declared(name, MetricKind::Histogram, labels);
  out_.histogram(m.name, m.help, buckets, sum, count, labels);
}

}  // namespace sluice
