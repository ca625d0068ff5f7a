#include "engine/runtime/element_runtime.hh"

#include <stdexcept>

#include "engine/runtime/channel.hh"
#include "engine/runtime/run_context.hh"

namespace sluice {

RuntimeRegistry &RuntimeRegistry::global() {
  static RuntimeRegistry r;
  return r;
}

RuntimeElement::RuntimeElement(const Node &node, RunContext &ctx)
    : ctx_(ctx), node_(&node), name_(node.name), lane_(node.lane) {
  const Element &e = ctx.graph().graph->elements[node.element];
  class_name_ = e.spec->name;
  outputs_.resize(e.spec->outputs.size());
}

void RuntimeElement::connect(int out_port, OutputTarget t) {
  if (out_port >= int(outputs_.size())) outputs_.resize(out_port + 1);  // variadic (Tee)
  outputs_[out_port].targets.push_back(t);
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

void RuntimeElement::drop(rte_mbuf *m, int reason) {
  counters.drops[reason].add();
  rte_pktmbuf_free(m);
}

void RuntimeElement::drop_all(PacketBatch &batch, int reason) {
  counters.drops[reason].add(batch.count);
  rte_pktmbuf_free_bulk(batch.pkts, batch.count);
  batch.count = 0;
}

void RuntimeElement::absorb_all(PacketBatch &batch) {
  counters.absorbed.add(batch.count);
  rte_pktmbuf_free_bulk(batch.pkts, batch.count);
  batch.count = 0;
}

const Value &RuntimeElement::arg(std::string_view n) const {
  const ResolvedArg *a = node_->arg(n);
  if (!a) throw std::logic_error(name_ + ": no argument '" + std::string(n) + "'");
  return a->value;
}

bool RuntimeElement::has_arg(std::string_view n) const {
  return node_->arg(n) != nullptr;  // optional arguments without a default are absent
}

}  // namespace sluice
