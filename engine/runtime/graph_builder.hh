// What runs a lane graph, built in two steps so that a hot reload can make
// everything that may fail while the old graph still runs: make_segments()
// allocates the segment runners and the channels (rings need memory);
// wire_segments() connects instances, channels and runners (at setup; in a
// reload while every segment is stopped, into the staged wiring of
// instances that keep running, committed at the switch).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/runtime/channel.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/run_context.hh"
#include "engine/runtime/segment.hh"

namespace sluice {

// The merge of a lane into a shared element: items it holds.
constexpr unsigned kMergeCapacity = 4096;

// One instance of a node, from its class's factory. Throws
// std::runtime_error when the class has no run-time implementation.
std::unique_ptr<RuntimeElement> make_instance(const Node &n, RunContext &ctx);

// Channels of the running graph that a reload keeps, with what they hold:
// by producer instance, its output port and the name of the element they
// lead to.
using ChannelKey = std::tuple<RuntimeElement *, int, std::string>;
using KeptChannels = std::map<ChannelKey, Channel *>;

struct SegmentSet {
  std::vector<std::unique_ptr<SegmentRunner>> segments;  // by segment id
  std::vector<std::unique_ptr<Channel>> channels;        // made for this graph
  // Per edge between segments (by edge index): its channel, made here or
  // taken over from the running graph.
  std::vector<Channel *> edge_channel;
  std::vector<Channel *> taken_over;
};

// The runners of `lg`'s segments on their sites in `plan` (null: anywhere), and a channel per
// edge between segments (a kept one where `kept` has it). Throws
// std::runtime_error when memory runs out.
SegmentSet make_segments(const LaneGraph &lg, const std::vector<RuntimeElement *> &inst, const Placement *plan,
                         const KeptChannels *kept = nullptr);

// Connects `inst` (by node) along `lg`'s edges: within a segment a direct
// call, between segments the edge's channel; gives each runner its
// elements, sources and channels. Instances marked in `running` belong to
// the running graph: their new wiring is staged (commit_wiring() at the
// switch), and changes to channels taken over are returned, to run at the
// switch. Throws std::runtime_error (an element out of drop reasons).
std::vector<std::function<void()>> wire_segments(SegmentSet &set, const LaneGraph &lg,
                                                 const std::vector<RuntimeElement *> &inst,
                                                 const std::vector<bool> &running, RunContext &ctx);

}  // namespace sluice
