// Brings a flow table's fresh anonymous memory in on a thread of its own, so
// that the lane does not stop in the kernel to zero it: every 2 MiB huge
// page a lane touches first is a fault that zeroes it, and on a VM whose
// host takes freed memory back (virtio-balloon free page reporting) the
// first touch of memory costs about 2.7 ms a MiB, 0.13 ms once the host has
// it again (docs/performance.md). Two kinds of range:
// * at once: brought in first, whole (the index: touched at random from the
//   first packets on, so all of it within the first few hundred flows);
// * ahead: arrays of so many bytes a slot, used in slot order (the entries,
//   handed out from slot 0 up): brought in `lead` slots past the frontier
//   the table reports (advance()).
// MADV_POPULATE_WRITE faults the pages in as a write would, without
// writing: what the lane already wrote stays. Where the kernel lacks it
// (before 5.14), nothing is brought in and the lane faults as before.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace sluice {

class PagePopulator {
 public:
  struct Range {
    void *p = nullptr;
    size_t n = 0;
  };
  struct SlotArray {
    void *p = nullptr;
    size_t slot_bytes = 0;
    size_t slots = 0;
  };
  // Starts the thread, which runs on_thread first (where set: to place
  // it, e.g. memory preferred on the lane's node).
  PagePopulator(std::vector<Range> at_once, std::vector<SlotArray> ahead, size_t lead_slots,
                std::function<void()> on_thread);
  ~PagePopulator();  // stops the thread between two steps and joins it
  PagePopulator(const PagePopulator &) = delete;
  PagePopulator &operator=(const PagePopulator &) = delete;

  // Slots below `frontier` have been handed out: the arrays brought in up
  // to frontier + lead. Call it as the frontier crosses a step (kStepSlots).
  // Out of line: the caller's code may be a fused loop (the JIT's bitcode).
  void advance(size_t frontier);
  static constexpr size_t kStepSlots = 4096;

  // What the thread has done so far (tests): bytes brought in; whether it
  // has finished the at-once ranges and, for ahead, up to which slot.
  size_t bytes_brought_in() const { return brought_in_.load(std::memory_order_acquire); }
  bool at_once_done() const { return at_once_done_.load(std::memory_order_acquire); }
  size_t ahead_done() const { return ahead_done_.load(std::memory_order_acquire); }
  // False once the kernel refused MADV_POPULATE_WRITE (the thread stopped).
  bool supported() const { return supported_.load(std::memory_order_acquire); }
  // The cpu time every populator thread of the process has taken so far
  // (the run's report: work done for the lanes, off their threads).
  static uint64_t cpu_ns_all();

 private:
  static constexpr size_t kStop = SIZE_MAX;
  void run(std::function<void()> on_thread);
  bool bring_in(void *p, size_t n);  // in 2 MiB steps; false: stopped, or refused

  std::vector<Range> at_once_;
  std::vector<SlotArray> ahead_;
  size_t lead_;
  std::atomic<size_t> wanted_;  // slots the arrays are wanted up to; kStop: stop
  std::atomic<size_t> brought_in_{0}, ahead_done_{0};
  std::atomic<bool> at_once_done_{false}, supported_{true};
  std::thread thread_;
};

}  // namespace sluice
