// A segment runs on its own thread: a loop that takes batches from the
// segment's sources or incoming channels and pushes them through its
// elements. The loop body is a SegmentProgram behind an atomic pointer, so it
// can be swapped (for a JIT-compiled one, or a reloaded graph) between two
// batches; the elements, and their state, are not touched by the swap.
#pragma once
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/channel.hh"
#include "engine/runtime/element_runtime.hh"

namespace sluice {

class SegmentRunner;

class SegmentProgram {
 public:
  virtual ~SegmentProgram() = default;
  // One pass: at most one batch from each source and input channel.
  // Returns false when there was nothing to do.
  virtual bool step(SegmentRunner &segment) = 0;
  virtual const char *kind() const = 0;
};

// The interpreter: every element called through the graph.
class InterpretedProgram : public SegmentProgram {
 public:
  bool step(SegmentRunner &segment) override;
  const char *kind() const override { return "interpreter"; }
};

class SegmentRunner {
 public:
  explicit SegmentRunner(const Segment &seg) : seg_(&seg) {}
  ~SegmentRunner();

  const Segment &segment() const { return *seg_; }
  std::string label() const;

  // Wiring, at setup.
  void add_source(SourceElement *s) { sources_.push_back({s, false}); }
  void add_input(Channel *c) { inputs_.push_back(c); }
  void add_output(Channel *c) { outputs_.push_back(c); }
  void add_element(RuntimeElement *e);
  void set_burst(unsigned b) { burst_ = b; }

  void start(SegmentProgram *program);
  void join();
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Swaps the loop body at the next batch boundary.
  void replace_program(SegmentProgram *p) { program_.store(p, std::memory_order_release); }

  // For programs.
  struct Source {
    SourceElement *element;
    bool ended;
  };
  std::vector<Source> &sources() { return sources_; }
  const std::vector<Channel *> &inputs() const { return inputs_; }
  const std::vector<RuntimeElement *> &tickers() const { return tickers_; }
  unsigned burst() const { return burst_; }

 private:
  void run();
  bool inputs_done() const;

  const Segment *seg_;
  std::vector<Source> sources_;
  std::vector<Channel *> inputs_, outputs_;
  std::vector<RuntimeElement *> elements_, tickers_;
  unsigned burst_ = 32;
  std::atomic<SegmentProgram *> program_{nullptr};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace sluice
