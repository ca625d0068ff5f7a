// Who may use a running probe's graph at the same time: control commands,
// metrics scrapes and a hot reload's switch.
//
//   read()     many at once: stats, read, handlers, flows, plan, a scrape.
//              They walk Runtime::elements() and segments() and send jobs to
//              segment threads (which run one job at a time anyway).
//   change()   one at a time, alongside reads: a handler write. Its value is
//              prepared (a filter compiled) and applied between two batches;
//              the graph stays the same, but two writes, or a write and a
//              reload, must not both restart the JIT's background compile.
//   replace()  alone: a reload's switch (Runtime::reload), which replaces
//              elements() and segments(). No read or change runs meanwhile.
//
// Nothing slow that needs none of these (compiling a .pipe file, placing it
// on the host) may run under them: a scrape waits for whatever holds replace().
// Lock order: the changer's mutex, then the graph's; nothing takes them the
// other way round.
#pragma once
#include <mutex>
#include <shared_mutex>

namespace sluice {

class ProbeLock {
 public:
  using Read = std::shared_lock<std::shared_mutex>;
  using Change = std::unique_lock<std::mutex>;
  struct Replace {
    std::unique_lock<std::mutex> changer;
    std::unique_lock<std::shared_mutex> graph;
  };

  Read read() { return Read(graph_); }
  Change change() { return Change(changer_); }
  Replace replace() {
    Change changer(changer_);
    return {std::move(changer), std::unique_lock(graph_)};
  }

 private:
  std::mutex changer_;
  std::shared_mutex graph_;
};

}  // namespace sluice
