// TopFlows: the heaviest flows seen so far, for `sluice ctl` and metrics.
// The whole element is this file (a plugin, built against the SDK).
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/runtime/element_runtime.hh"

using namespace sluice;

namespace sluice_plugins {

// Space-Saving (Metwally, Agrawal, El Abbadi, 2005): k counters; a record of
// a flow not counted takes the smallest counter over, its weight added to
// that counter's and the counter's old value kept as the error bound. Every
// flow heavier than total/k is among the k; a count is never below the
// truth and at most `error` above it. With at most k flows, exact.
class TopFlowsRuntime final : public RuntimeElement {
 public:
  TopFlowsRuntime(const Node &n, RunContext &c)
      : RuntimeElement(n, c), k_(size_t(arg("k").integer)), by_bytes_(arg("by").text == "bytes") {
    entries_.reserve(k_);
    index_.reserve(k_ * 2);
  }

  void push(int, PacketBatch &) override {}
  void push_flows(int, FlowBatch &batch) override {
    for (int i = 0; i < batch.count; ++i) count(batch.recs[i]);
    emit_flows(0, batch);
  }

  // The `top` handler: rank, weight, error bound, flow.
  std::string top() const {
    std::string out;
    std::vector<const Entry *> order = ranked();
    for (size_t r = 0; r < order.size(); ++r)
      out += std::to_string(r + 1) + " " + std::to_string(order[r]->weight) + " ±" +
             std::to_string(order[r]->error) + " " + describe(order[r]->key) + "\n";
    return out;
  }
  uint64_t counted() const { return total_; }

  void report(std::vector<std::string> &lines) const override {
    std::vector<const Entry *> order = ranked();
    lines.push_back("top " + std::to_string(std::min<size_t>(order.size(), 5)) + " of " +
                    std::to_string(order.size()) + " flows counted, by " + (by_bytes_ ? "bytes" : "packets") +
                    ", of " + std::to_string(total_) + ":");
    for (size_t r = 0; r < order.size() && r < 5; ++r)
      lines.push_back("  " + std::to_string(r + 1) + ". " + describe(order[r]->key) + " " +
                      std::to_string(order[r]->weight));
  }
  void report_metrics(ElementMetrics &out) const override {
    std::vector<const Entry *> order = ranked();
    for (size_t r = 0; r < order.size() && r < 10; ++r)
      out.gauge("top_flow_weight", double(order[r]->weight), {{"rank", std::to_string(r + 1)}, {"flow", describe(order[r]->key)}});
  }

 private:
  struct Key {
    FlowKey k;
    bool operator==(const Key &o) const { return memcmp(&k, &o.k, sizeof k) == 0; }
  };
  struct KeyHash {
    size_t operator()(const Key &key) const {  // FNV-1a: records arrive at most at the flow rate
      uint64_t h = 1469598103934665603ull;
      const auto *p = reinterpret_cast<const uint8_t *>(&key.k);
      for (size_t i = 0; i < sizeof key.k; ++i) h = (h ^ p[i]) * 1099511628211ull;
      return size_t(h);
    }
  };
  struct Entry {
    Key key;
    uint64_t weight, error;
  };

  void count(const FlowRecord &r) {
    uint64_t w = by_bytes_ ? r.octets() : r.packets();
    total_ += w;
    Key key{r.key};
    if (auto it = index_.find(key); it != index_.end()) {
      entries_[it->second].weight += w;
      return;
    }
    if (entries_.size() < k_) {
      index_.emplace(key, entries_.size());
      entries_.push_back({key, w, 0});
      return;
    }
    size_t least = 0;
    for (size_t i = 1; i < entries_.size(); ++i)
      if (entries_[i].weight < entries_[least].weight) least = i;
    Entry &e = entries_[least];
    index_.erase(e.key);
    e = {key, e.weight + w, e.weight};
    index_.emplace(key, least);
  }

  std::vector<const Entry *> ranked() const {
    std::vector<const Entry *> order;
    for (const Entry &e : entries_) order.push_back(&e);
    std::sort(order.begin(), order.end(), [](const Entry *a, const Entry *b) {
      return a->weight != b->weight ? a->weight > b->weight : memcmp(&a->key.k, &b->key.k, sizeof(FlowKey)) < 0;
    });
    return order;
  }

  static std::string describe(const Key &key) {
    const FlowKey &k = key.k;
    char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN];
    inet_ntop(k.is_ipv6 ? AF_INET6 : AF_INET, k.is_ipv6 ? k.src_addr : k.src_addr + 12, a, sizeof a);
    inet_ntop(k.is_ipv6 ? AF_INET6 : AF_INET, k.is_ipv6 ? k.dst_addr : k.dst_addr + 12, b, sizeof b);
    return std::to_string(k.proto) + " " + a + " " + std::to_string(k.src_port) + " " + b + " " +
           std::to_string(k.dst_port);
  }

  size_t k_;
  bool by_bytes_;
  uint64_t total_ = 0;
  std::vector<Entry> entries_;
  std::unordered_map<Key, size_t, KeyHash> index_;
};

const ElementSpec &top_flows_spec() {
  static const ElementSpec spec =
      ElementSpec("TopFlows")
          .in_group("flow")
          .brief("Count the heaviest flows of the records passing by")
          .describe(
              "Counts the flow records that pass through it by flow key (the FlowTable's: protocol, addresses, "
              "ports, VLAN) with the Space-Saving algorithm in `k` counters, and passes every record on. Any "
              "flow with more than a k-th of the total is among them; a count is never below the truth and at "
              "most its error bound above it, and with no more flows than `k` the counts are exact.\n\n"
              "`sluice ctl read top.top` lists them by rank (rank, weight, error bound, flow); the metrics "
              "have the first ten (`sluice_top_flow_weight{rank,flow}`) and the summary the first five. Put "
              "it after the GCSlicer, `shared` to count the flows of every lane together.")
          .arg(ArgSpec::count("k").def("100").range(1, 100000).describe("Counters: the flows followed."))
          .arg(ArgSpec::symbol("by", {"bytes", "packets"}).def("bytes").describe("What makes a flow heavy."))
          .handler("top", "The counted flows by rank: rank, weight, error bound, flow.", &TopFlowsRuntime::top)
          .handler("counted", "Bytes or packets counted in all.", &TopFlowsRuntime::counted)
          .metric(MetricSpec::gauge("top_flow_weight", "Bytes or packets of the heaviest flows (TopFlows), by rank.",
                                    {"rank", "flow"}))
          .input(PortSpec::flows("in").many().describe("Flow records."))
          .output(PortSpec::flows("out").many().describe("The same records, to each connection."));
  return spec;
}

SLUICE_ELEMENT(TopFlowsRuntime, top_flows_spec);

}  // namespace sluice_plugins
