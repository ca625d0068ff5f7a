// libFuzzer target: any bytes as a control request line, decoded and
// answered by the real commands (stats, read, write, handlers, flows, plan,
// help) of a probe running in this process: a small graph on DPDK without
// hugepages or devices. Every input gets an answer or an error, never a
// crash, hang or sanitizer report; a decoded request encodes back to itself.
//
//   build/tests/fuzz_control -dict=tests/fuzz/fuzz_control.dict CORPUS_DIR
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "engine/driver/compile_pipe.hh"
#include "engine/control/control_server.hh"
#include "engine/control/control_socket.hh"
#include "engine/control/probe_control.hh"
#include "engine/control/probe_lock.hh"
#include "engine/driver/lanes.hh"
#include "engine/runtime/runtime.hh"

namespace {

using namespace sluice;

// Two lanes and a shared element, with a handler of each kind to read and
// write; runs until the fuzzer exits.
constexpr const char *kGraph =
    "src :: TrafficGen(flows 100, new_flows_per_s 2, duration 30min, rate 200pps, queues 2) -> Timestamp(clock tsc) -> "
    "f :: Filter(\"tcp or udp\") -> c :: Counter -> r :: Ring(capacity 256) -> "
    "ft :: FlowTable(capacity 1K, idle 15s) -> gc :: GCSlicer(table ft) -> log :: shared FlowLog(\"/dev/null\");\n";

struct Probe {
  std::shared_ptr<CompiledPipe> pipe;
  std::unique_ptr<Runtime> rt;
  ProbeLock lock;
  std::unique_ptr<ControlServer> server;
  std::unique_ptr<ProbeControl> control;
  std::thread runner;
};

Probe *g_probe = nullptr;

void stop_probe() {
  g_probe->rt->request_abort();
  g_probe->runner.join();
}

Probe &probe() {
  if (g_probe) return *g_probe;
  auto *p = new Probe;  // lives until exit: segment threads use it
  CompileOptions opts;
  opts.allow_require = false;
  p->pipe = compile_pipe_text("fuzz_control.pipe", kGraph, opts);
  if (!p->pipe->ok) {
    std::cerr << p->pipe->printed();
    std::abort();
  }
  RunOptions ro;
  ro.eal_args = {"--no-huge"};
  ro.status_line = false;
  ro.jit = false;
  p->rt = std::make_unique<Runtime>(p->pipe, ro);
  std::string err;
  if (!p->rt->setup(&err)) {
    std::fprintf(stderr, "fuzz_control: %s\n", err.c_str());
    std::abort();
  }
  p->server = std::make_unique<ControlServer>(p->lock);
  p->control = std::make_unique<ProbeControl>(*p->rt, "fuzz_control.pipe");
  p->control->add_commands(*p->server);
  p->runner = std::thread([p] { p->rt->run(); });
  g_probe = p;
  std::atexit(stop_probe);  // before static destructors: no segment outlives what it uses
  return *p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > ControlServer::kMaxRequest) return 0;  // the server refuses it unread
  std::string line(reinterpret_cast<const char *>(data), size);
  ControlArgs args;
  std::string err;
  if (!decode_control_request(line, args, &err)) {
    if (err.rfind("bad request: ", 0) != 0 || err.find(" at byte ") == std::string::npos) std::abort();
    return 0;
  }
  ControlArgs again;
  if (!decode_control_request(encode_control_request(args), again, &err) || again != args) std::abort();
  ControlServer::Reply reply = probe().server->handle(args);
  if (!reply.ok && reply.text.empty()) std::abort();  // an error says what it is
  return 0;
}
