// What a fused segment loop (engine/jit/loop_builder.cc) calls besides the
// elements: built only as bitcode and linked into every loop, where these
// functions are inlined. Each does what the interpreter's loop
// (InterpretedProgram, engine/runtime/segment.cc) does at the same point,
// so that the counters come out the same.
#include "engine/packet/pcap_filter.hh"
#include "engine/runtime/channel.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/segment.hh"

using namespace sluice;

extern "C" {

// A source's next batch; true when it gave packets.
bool sluice_jit_poll(SegmentRunner::Source *s, PacketBatch *batch) {
  if (s->ended) return false;
  switch (s->element->poll(*batch)) {
    case PollStatus::Packets: return true;
    case PollStatus::Idle: return false;
    case PollStatus::End: s->ended = true; return false;
  }
  return false;
}

unsigned sluice_jit_channel_receive(Channel *c, PacketBatch *batch, unsigned burst) {
  return c->receive(*batch, burst);
}

// A flows stream between segments: records are not fused; they go through
// the element as in the interpreter.
bool sluice_jit_channel_flows(Channel *c) {
  FlowBatch flows;
  if (c->receive(flows, kMaxFlowBatch) == 0) return false;
  c->target().element->receive_flows(c->target().port, flows);
  return true;
}

void sluice_jit_tick(RuntimeElement *e) { e->tick(); }

// An output the loop does not fuse (to a channel, to several elements, or
// unconnected): the element's own emit().
void sluice_jit_emit(RuntimeElement *e, int port, PacketBatch *batch) { e->send(port, *batch); }

void sluice_jit_count(Counter *c, uint64_t n) { c->add(n); }

// Names PcapFilter::matches for the JIT, which replaces calls to it by the
// filter's program as IR.
bool sluice_jit_filter_match(const PcapFilter *f, const uint8_t *data, uint32_t caplen, uint32_t wirelen) {
  return f->matches(data, caplen, wirelen);
}

}  // extern "C"
