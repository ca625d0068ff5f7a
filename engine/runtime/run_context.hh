// What the elements of a run share: the lane graph, the run's options and
// flags, and the packet pools. Elements get it at construction.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/flow/flow_extension.hh"
#include "engine/core/graph.hh"
#include "engine/placement/placement.hh"

struct rte_mempool;

namespace sluice {

class SourceElement;
class RuntimeElement;

struct RunOptions {
  std::vector<std::string> eal_args;  // from the host profile
  uint64_t duration_ns = 0;           // 0: until end of input or Ctrl-C
  bool status_line = true;            // live status once a second
  // Where each segment runs and its memory lives (sluice plan); null: anywhere.
  std::shared_ptr<const Placement> placement;
  int status_fd = 2;
  // LLVM compiles code for the run (`--jit`, the default): segments' fused
  // loops, Filter programs inside them. With --no-jit nothing is compiled.
  bool jit = false;
};

struct RunContext {
  explicit RunContext(const LaneGraph &lg, const RunOptions &o) : lanes(&lg), options(o) {}
  const LaneGraph &graph() const { return *lanes; }

  const LaneGraph *lanes;
  RunOptions options;
  // Sources stop at their next poll (Ctrl-C, --duration); the run then drains.
  std::atomic<bool> stop_sources{false};
  // Give up waiting on full rings: a second Ctrl-C.
  std::atomic<bool> stop_now{false};
  // Every instance, by lane-graph node (set once every element exists), and
  // the instance of an element in a lane (its own for a shared element):
  // how GCSlicer finds the FlowTable it names.
  std::vector<RuntimeElement *> instances;
  RuntimeElement *instance(int element, int lane) const {
    for (size_t i = 0; i < instances.size(); ++i)
      if (lanes->nodes[i].element == element && (lanes->nodes[i].lane == lane || lanes->nodes[i].lane < 0))
        return instances[i];
    return nullptr;
  }
  // An instance's node in the context's graph (during a reload's prepare
  // phase: the new graph's); nullptr when the graph has none.
  const Node *node_of(const RuntimeElement *e) const {
    for (size_t i = 0; i < instances.size(); ++i)
      if (instances[i] == e) return &lanes->nodes[i];
    return nullptr;
  }
  // Files elements write, so that two never write the same one (a sink
  // replicated per lane without $queue in its name). Throws with a message
  // naming both. Returns whether a sink wrote the path earlier in this run
  // (one that a hot reload replaced or removed): the new one appends.
  bool claim_output_file(const std::string &path, const std::string &element);
  std::vector<std::pair<std::string, std::string>> output_files;  // path, element
  std::vector<std::string> files_written;  // every path claimed in the run
  // The flow record extension fields the graph's elements set
  // (ElementSpec::flow_fields), in slot order: the columns of its FlowLogs,
  // the extra template fields of its exporters. Throws for a field no
  // element file registered.
  std::vector<const FlowExtField *> flow_fields() const;
  // The optional record fields (FlowField) its flow tables keep
  // (ElementSpec::record_fields), all tables' together: the optional
  // columns of its FlowLogs and template fields of its exporters.
  FlowFieldSet record_fields() const;

  // The source of each lane (set once every element exists).
  std::vector<SourceElement *> lane_sources;
  SourceElement *lane_source(int lane) const {
    return lane >= 0 && size_t(lane) < lane_sources.size() ? lane_sources[size_t(lane)] : nullptr;
  }

  // Memory for packets: one pool per source element, shared by its lanes,
  // sized for what the lanes can hold at once (rings, descriptors, bursts:
  // a `live` source's lanes fill whole rings, an offline one's at most
  // Channel::kOfflineWindow of each); last freed, first out unless `lifo`
  // is false (create_packet_pool).
  rte_mempool *pool_for_source(int element, unsigned data_room, bool live, bool lifo = true);
  // A trace whose records are handed on in place (walked_in_place) needs no
  // data room in that pool (every buffer of a pool is written, a page fault
  // each 4 KiB, when it is made: 2.6 KB a buffer with the room, 0.55 without),
  // and the few records it copies take this pool: kCopyBuffers a lane,
  // with no per-thread caches (it is small), made once per source.
  static constexpr unsigned kCopyBuffers = 512;
  rte_mempool *copy_pool_for_source(int element, unsigned data_room);
  // The DPDK socket for memory of a segment's lane: its planned node where
  // DPDK has memory, else any.
  int memory_socket(int segment) const;
  std::vector<unsigned> lane_mbufs;          // by lane: what a live source's lanes can hold
  std::vector<unsigned> lane_mbufs_offline;  // and an offline one's
  std::vector<std::pair<int, rte_mempool *>> pools;

  // State one source element shares between its lanes (an opened device).
  std::vector<std::pair<int, std::shared_ptr<void>>> source_state;
  template <typename T, typename Make>
  std::shared_ptr<T> shared_source_state(int element, Make make) {
    for (auto &[e, p] : source_state)
      if (e == element) return std::static_pointer_cast<T>(p);
    std::shared_ptr<T> p = make();
    source_state.emplace_back(element, p);
    return p;
  }

  // Last: a plugin built for this ABI knows every member before it where it was.
  std::vector<std::pair<int, rte_mempool *>> copy_pools;  // copy_pool_for_source's
};

}  // namespace sluice
