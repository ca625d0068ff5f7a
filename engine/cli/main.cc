// The `sluice` command line. Exit status: 0 clean, 1 errors in the
// configuration (or a device, or accounting that does not balance), 2 usage
// errors, 3 a run that completed but lost data.
#include <sched.h>
#include <signal.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <mutex>
#include <sstream>
#include <thread>

#include "dsl/literals.hh"
#include "engine/control/control_server.hh"
#include "engine/control/control_socket.hh"
#include "engine/control/metrics_server.hh"
#include "engine/control/probe_control.hh"
#include "engine/control/probe_lock.hh"
#include "engine/control/probe_metrics.hh"
#include "engine/driver/compile_pipe.hh"
#include "engine/core/element_docs.hh"
#include "engine/jit/segment_jit.hh"
#include "engine/driver/lanes.hh"
#include "engine/placement/host_profile.hh"
#include "engine/placement/placement.hh"
#include "engine/placement/plan_format.hh"
#include "engine/probe/probe_reload.hh"
#include "engine/runtime/log.hh"
#include "engine/runtime/runtime.hh"

using namespace sluice;

namespace {

constexpr int kExitClean = 0, kExitErrors = 1, kExitUsage = 2, kExitDataLost = 3;

struct ConfigArgs {
  std::string file;
  std::vector<std::string> defines;

  void add_to(CLI::App *cmd) {
    cmd->add_option("file", file, "the .pipe configuration")->required();
    cmd->add_option("-D,--define", defines, "set (or override) a variable: NAME=VALUE")->type_name("NAME=VALUE");
  }
};

// -D values as the driver takes them; nullopt (the error printed) for a
// malformed one.
std::optional<CompileOptions> compile_options(const ConfigArgs &args) {
  CompileOptions opts;
  for (const std::string &d : args.defines) {
    std::pair<std::string, std::string> define;
    std::string err;
    if (!parse_define(d, define, &err)) {
      std::cerr << "sluice: " << err << "\n";
      return std::nullopt;
    }
    opts.defines.push_back(define);
  }
  return opts;
}

// The configuration compiled by the driver, its diagnostics printed to
// stderr; null (with the exit status in *rc) when it does not compile.
std::shared_ptr<CompiledPipe> compile(const ConfigArgs &args, int *rc) {
  std::optional<CompileOptions> opts = compile_options(args);
  if (!opts) {
    *rc = kExitUsage;
    return nullptr;
  }
  std::shared_ptr<CompiledPipe> pipe = compile_pipe_file(args.file, *opts);
  std::cerr << pipe->printed(isatty(2)) << pipe->count_line();
  *rc = pipe->ok ? kExitClean : kExitErrors;
  return pipe->ok ? pipe : nullptr;
}

// Places the lanes on the host profile (the default one when `host` is
// empty); the error printed. Returns the exit status.
int place(CompiledPipe &pipe, const std::string &host) {
  std::string err;
  if (place_pipe(pipe, host, &err)) return kExitClean;
  std::cerr << err << "\n";  // file:line:column: error: ...
  return kExitErrors;
}

// Graphviz renders the plan's dot as SVG on stdout.
int print_svg(const std::string &config, const LaneGraph &lanes, const Placement &placement) {
  if (std::system("command -v dot > /dev/null 2>&1") != 0) {
    std::cerr << "sluice: error: --format svg needs Graphviz's `dot` (apt-get install graphviz); "
                 "--format dot prints its input\n";
    return kExitErrors;
  }
  std::cout.flush();
  FILE *dot = popen("dot -Tsvg", "w");
  if (!dot) return kExitErrors;
  std::ostringstream src;
  print_plan_dot(src, config, lanes, &placement);
  fwrite(src.str().data(), 1, src.str().size(), dot);
  return pclose(dot) == 0 ? kExitClean : kExitErrors;
}

// Moves the calling thread to `cpu` (-1: stays) until destroyed; threads it
// starts meanwhile keep that cpu.
class ThreadOnCpu {
 public:
  explicit ThreadOnCpu(int cpu) {
    if (cpu < 0 || sched_getaffinity(0, sizeof saved_, &saved_) != 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    moved_ = sched_setaffinity(0, sizeof one, &one) == 0;
  }
  ~ThreadOnCpu() {
    if (moved_) sched_setaffinity(0, sizeof saved_, &saved_);
  }
  ThreadOnCpu(const ThreadOnCpu &) = delete;
  ThreadOnCpu &operator=(const ThreadOnCpu &) = delete;

 private:
  cpu_set_t saved_;
  bool moved_ = false;
};

// Ctrl-C (or SIGTERM) once: sources stop and the run drains; twice: stop
// waiting for full rings too.
Runtime *g_running = nullptr;
std::atomic<int> g_interrupts{0};  // lock-free: safe in a signal handler
std::atomic<bool> g_reload_requested{false};  // SIGHUP: reload the file the run started with
void on_hangup(int) { g_reload_requested = true; }
void on_interrupt(int) {
  int n = ++g_interrupts;
  if (!g_running) return;  // still setting up: the run stops as soon as it starts
  if (n == 1) g_running->request_stop();
  else g_running->request_abort();
}

// How a running probe is reached: --control PATH (empty: the default
// place), --metrics [ADDR:]PORT (empty: no endpoint).
struct ProbeAccess {
  std::string control, metrics;
};

// Listens on the control socket. When the default place cannot be used the
// run goes on without one; a --control PATH that cannot be used is an error.
int open_control(ControlServer &server, const std::string &given, bool quiet) {
  std::string err, path = given.empty() ? default_control_path() : given;
  if ((!given.empty() || prepare_control_dir(default_control_dir(), &err)) && server.listen(path, &err)) {
    server.start();
    if (!quiet) log::info("control socket " + path + " (sluice ctl --socket " + path + " help)");
    return kExitClean;
  }
  if (!given.empty()) {
    log::error("--control: " + err);
    return kExitErrors;
  }
  log::warning("running without a control socket: " + err + " (--control PATH puts it elsewhere)");
  return kExitClean;
}

// `sluice ctl`: one request to a running probe; its answer on stdout, or its
// error on stderr and exit status 1.
int control_client(const std::string &socket, const std::vector<std::string> &args) {
  if (args.empty()) {
    std::cerr << "sluice ctl: a command is needed: stats [--json], read ELEMENT.HANDLER, write ELEMENT.HANDLER VALUE, "
                 "handlers [ELEMENT], flows [--top N], plan, help\n";
    return kExitUsage;
  }
  std::string path = socket;
  if (path.empty()) {
    std::vector<std::string> live = running_probe_sockets();
    if (live.empty()) {
      std::cerr << "sluice ctl: no running probe of this user (no live socket in " << default_control_dir()
                << "); start one with `sluice run`, or give --socket PATH\n";
      return kExitErrors;
    }
    if (live.size() > 1) {
      std::cerr << "sluice ctl: " << live.size() << " probes are running; choose one with --socket PATH:\n";
      for (const std::string &p : live) {
        std::string who = describe_probe_socket(p);
        std::cerr << "  " << p << (who.empty() ? "" : "  (" + who + ")") << "\n";
      }
      return kExitErrors;
    }
    path = live[0];
  }
  // The probe runs elsewhere: the file to reload is named from here.
  std::vector<std::string> request = args;
  if (request[0] == "reload" && request.size() >= 2 && !request[1].empty() && request[1][0] != '/')
    request[1] = (std::filesystem::current_path() / request[1]).string();
  ControlReply reply;
  std::string err;
  if (!control_request(path, request, reply, &err)) {
    std::cerr << "sluice ctl: " << err << "\n";
    return kExitErrors;
  }
  if (reply.ok) {
    std::cout << reply.text << std::flush;
    return kExitClean;
  }
  std::cerr << "sluice ctl: " << reply.text << (reply.text.empty() || reply.text.back() != '\n' ? "\n" : "");
  return kExitErrors;
}

// --jit (the default) or --no-jit, and --jit-cpu.
struct JitChoice {
  bool enabled = true;
  bool wait = false;  // --jit-wait: every loop compiled before the run starts
  std::string cpu;
  std::string print_after;  // plan --emit-ir-after: a pass of the JIT, or "all"
  int nice = 19;  // --jit-nice: of the compilations while the segments run
  bool perf = false;  // --jit-perf
};

// The JIT for a run: with `wait` (or for the IR) every segment's loop
// compiled before the segments start, else compiled while they run. False,
// with the error printed, when the JIT cannot be set up (a bad --jit-cpu) or,
// with `wait`, a loop cannot be compiled.
bool compile_loops(Runtime &rt, const JitChoice &jit, int housekeeping_cpu, std::vector<std::string> *ir) {
  std::string err;
  std::shared_ptr<ProgramCompiler> compiler = make_segment_jit({jit.cpu, jit.print_after, jit.perf}, &err);
  if (compiler) {
    rt.set_compiler(compiler, housekeeping_cpu, jit.nice);
    if (!jit.wait && !ir) {
      rt.compile_when_running();
      return true;
    }
    if (rt.compile_programs(&err, ir)) return true;
  }
  log::error(err);
  return false;
}

// How much `sluice run` prints while it runs: nothing but errors and the
// summary (-q); the status line once a second (on a terminal, or --status).
struct RunOutput {
  bool quiet = false;
  bool status = false;  // --status: also when stderr is not a terminal (a journal would get 86,400 lines a day)
  bool status_line() const { return !quiet && (status || isatty(STDERR_FILENO)); }
};

int run_config(const ConfigArgs &args, const std::string &host, const std::string &duration, const RunOutput &output,
               const std::string &stats_json, const ProbeAccess &access, const JitChoice &jit) {
  const bool quiet = output.quiet;
  int rc = kExitClean;
  std::shared_ptr<CompiledPipe> pipe = compile(args, &rc);
  if (!pipe) return rc;

  RunOptions opts;
  if (!duration.empty()) {
    // The same literal syntax and units as in a .pipe file.
    Value v;
    ast::Literal lit;
    LiteralProblem problem;
    ArgSpec spec = ArgSpec::duration("duration").at_least(1);
    if (!lex_single_literal(duration, lit) || !convert_literal(lit, spec, v, problem)) {
      std::cerr << "sluice: --duration: '" << duration << "' is not a duration"
                << (problem.message.empty() ? "" : ": " + problem.message) << " (e.g. 30s, 5min)\n";
      return kExitUsage;
    }
    opts.duration_ns = uint64_t(v.integer);
  }
  std::string mhost, err;
  int mport = 0;
  if (!access.metrics.empty() && !MetricsServer::parse_address(access.metrics, mhost, mport, &err)) {
    std::cerr << "sluice: --metrics: " << err << "\n";
    return kExitUsage;
  }
  if (int prc = place(*pipe, host); prc != kExitClean) return prc;
  const Placement &placement = *pipe->placement;
  opts.eal_args = pipe->profile.eal_args;
  opts.status_line = output.status_line();
  opts.jit = jit.enabled;

  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A reader that goes away (`sluice run ... -D FLOWS=- | head`) is a write
  // error of the element that wrote to it, counted; never the end of the probe.
  signal(SIGPIPE, SIG_IGN);
  struct sigaction hup {};  // from the start: SIGHUP must never end the probe
  hup.sa_handler = on_hangup;
  sigaction(SIGHUP, &hup, nullptr);
  // The JIT's one-time set-up goes on beside DPDK's (EAL, pools, devices)
  // where the run is to compile before it starts (--jit-wait) or its
  // settings load the JIT at once (--jit-cpu); else the first compilation
  // loads it, and a run that compiles nothing never does (segment_jit.hh).
  std::thread jit_warm_up;
  if (jit.enabled && (jit.wait || !jit.cpu.empty())) jit_warm_up = std::thread(warm_up_jit, jit.wait);
  Runtime rt(pipe, opts);
  bool ready = rt.setup(&err);
  if (jit_warm_up.joinable()) jit_warm_up.join();
  if (!ready) {
    log::error(err);
    return kExitErrors;
  }
  if (jit.enabled && !compile_loops(rt, jit, placement.housekeeping_cpu, nullptr)) return kExitErrors;
  // The probe's control plane, on threads of its own while the run lasts.
  // Commands and metrics scrapes read the graph together; a reload's switch
  // has it alone (probe_lock.hh).
  ProbeLock probe_lock;
  ControlServer control(probe_lock);
  ProbeControl probe(rt, args.file);
  probe.add_commands(control);
  // Hot reload: `sluice ctl reload FILE [--dry-run]`, and SIGHUP for the
  // file the run started with. The new file gets the run's --define values
  // and is placed on the same host profile.
  ProbeReloads reloads(rt, probe_lock, probe, ReloadSettings{compile_options(args)->defines, host}, args.file);
  reloads.add_command(control);
  rt.on_tick([&] { reloads.on_tick(g_reload_requested); });
  // The control and metrics threads do housekeeping: they start on the
  // plan's housekeeping cpu (threads inherit their creator's cpus).
  std::optional<ThreadOnCpu> housekeeping(std::in_place, placement.housekeeping_cpu);
  if (int crc = open_control(control, access.control, quiet); crc != kExitClean) return crc;
  MetricsServer metrics;
  if (!access.metrics.empty()) {
    auto render = [&] {
      ProbeLock::Read lock = probe_lock.read();
      return probe_metrics_text(rt);
    };
    if (!metrics.start(mhost, mport, render, &err)) {
      log::error(err);
      return kExitErrors;
    }
    log::info("metrics on " + metrics.url());
  }
  housekeeping.reset();
  g_running = &rt;
  if (g_interrupts) rt.request_stop();
  const LaneGraph &lanes = pipe->lanes;
  if (!quiet)
    log::info("running " + args.file + " (" + std::to_string(lanes.lanes.size()) + " lane" +
              (lanes.lanes.size() == 1 ? "" : "s") + ", " + std::to_string(lanes.segments.size()) + " segments, " +
              (jit.enabled ? "fused loops (JIT)" : "interpreter") + ", host " +
              (pipe->profile.path.empty() ? pipe->profile.name : pipe->profile.path) + "); Ctrl-C stops");
  // systemd (Type=notify): ready once the devices are open, the loops
  // compiled and the control socket answers. A no-op elsewhere.
  sd_notify(0, ("READY=1\nSTATUS=running " + args.file).c_str());
  rt.run();
  sd_notify(0, "STOPPING=1\nSTATUS=stopping: draining and exporting the last records");
  reloads.finish();
  metrics.stop();
  control.stop();
  g_running = nullptr;
  std::cout << rt.summary() << std::flush;
  if (!stats_json.empty()) {
    std::ofstream f(stats_json);
    f << rt.summary_json();
    if (!f) log::error("cannot write " + stats_json);
  }
  // Flow records lost and failed writes are data lost; packet drops
  // (filtered, not sampled, a full ring) are counted by reason in the summary.
  RecordTotals records = rt.record_totals();
  if (!rt.totals().balanced() || !records.balanced()) return kExitErrors;
  return records.data_lost() ? kExitDataLost : kExitClean;
}

// `sluice plan --emit-ir`: the graph set up as `sluice run` would (devices
// opened, traffic generated), every segment's loop compiled, its optimized
// IR printed (with --emit-ir-after, the module after a pass instead);
// nothing runs.
int emit_ir(std::shared_ptr<const CompiledPipe> pipe, const JitChoice &jit) {
  RunOptions opts;
  opts.eal_args = pipe->profile.eal_args;
  opts.status_line = false;
  opts.jit = true;
  Runtime rt(pipe, opts);
  std::string err;
  if (!rt.setup(&err)) {
    std::cerr << "sluice: error: " << err << "\n";
    return kExitErrors;
  }
  std::vector<std::string> ir;
  if (!compile_loops(rt, jit, pipe->placement->housekeeping_cpu, &ir)) return kExitErrors;
  for (const std::string &s : ir) std::cout << s << "\n";
  return kExitClean;
}

// The subcommands: each declares its options and runs.

struct CheckCommand {
  ConfigArgs args;
  CLI::App *cmd = nullptr;

  void add_to(CLI::App &app) {
    cmd = app.add_subcommand("check", "parse, expand and check a configuration; errors as file:line:column");
    args.add_to(cmd);
  }
  int execute() {
    int rc = kExitClean;
    std::shared_ptr<CompiledPipe> pipe = compile(args, &rc);
    if (pipe) {
      const LaneGraph &lanes = pipe->lanes;
      std::cout << args.file << ": ok (" << pipe->graph.elements.size() << " elements, " << lanes.lanes.size()
                << " lane" << (lanes.lanes.size() == 1 ? "" : "s") << ", " << lanes.segments.size() << " segment"
                << (lanes.segments.size() == 1 ? "" : "s") << ")\n";
    }
    return rc;
  }
};

struct PlanCommand {
  ConfigArgs args;
  std::string format = "text", host;
  bool emit_ir = false;
  JitChoice jit;
  CLI::App *cmd = nullptr;

  void add_to(CLI::App &app) {
    cmd = app.add_subcommand(
        "plan", "print the checked graph placed on a host: lanes, segments, the node and cpu of each, and why");
    args.add_to(cmd);
    cmd->add_option("--format", format, "text, dot, svg (Graphviz) or json")
        ->check(CLI::IsMember({"text", "dot", "svg", "json"}));
    cmd->add_option("--host", host, "host profile (YAML) to place on; default configs/laptop.yaml")
        ->type_name("PROFILE.yaml");
    cmd->add_flag("--emit-ir", emit_ir,
                  "set the graph up as `run` would and print the optimized LLVM IR of every segment's fused loop");
    std::string pass_list;
    for (const std::string &p : jit_pass_names()) pass_list += (pass_list.empty() ? "" : ", ") + p;
    cmd->add_option("--emit-ir-after", jit.print_after,
                    "as --emit-ir, but print each segment's module after each run of PASS of the JIT (" + pass_list +
                        "), or of every pass (all), with what the pass did")
        ->type_name("PASS");
    cmd->add_option("--jit-cpu", jit.cpu, "with --emit-ir: the code generation target (as for run)")
        ->type_name("NAME");
  }
  int execute() {
    int rc = kExitClean;
    std::shared_ptr<CompiledPipe> pipe = compile(args, &rc);
    if (!pipe) return rc;
    if (rc = place(*pipe, host); rc != kExitClean) return rc;
    const LaneGraph &lanes = pipe->lanes;
    const Placement &placement = *pipe->placement;
    if (emit_ir || !jit.print_after.empty()) return ::emit_ir(pipe, jit);
    if (format == "svg") return print_svg(args.file, lanes, placement);
    if (format == "dot") print_plan_dot(std::cout, args.file, lanes, &placement);
    else if (format == "json") print_plan_json(std::cout, args.file, lanes, placement);
    else print_plan_text(std::cout, args.file, lanes, &placement);
    return kExitClean;
  }
};

struct RunCommand {
  ConfigArgs args;
  std::string host, duration, stats_json, log_level = "info";
  RunOutput output;
  ProbeAccess access;
  JitChoice jit;
  bool no_jit = false;
  CLI::App *cmd = nullptr;

  void add_to(CLI::App &app) {
    cmd = app.add_subcommand("run", "run a configuration on DPDK: live status, then a summary of every packet");
    args.add_to(cmd);
    cmd->add_option("--host", host, "host profile (YAML); default configs/laptop.yaml")->type_name("PROFILE.yaml");
    cmd->add_option("--duration", duration, "stop after this long (e.g. 30s, 5min); default: end of input or Ctrl-C")
        ->type_name("T");
    cmd->add_flag("-q,--quiet", output.quiet,
                  "print nothing while running but errors: no status line, no start messages");
    cmd->add_flag("--status", output.status,
                  "print the status line once a second also when stderr is not a terminal (by default only on one)");
    cmd->add_option("--log-level", log_level,
                    "the least level of message the probe logs: debug, info (the default), warning or error; with a "
                    "time on each line when stderr is not a terminal, to the journal under systemd")
        ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
    cmd->add_option("--stats-json", stats_json, "also write the run summary as JSON to this file")->type_name("FILE");
    cmd->add_option("--control", access.control,
                    "control socket for `sluice ctl`; default $XDG_RUNTIME_DIR/sluice/PID.sock, else "
                    "/run/sluice/PID.sock for root and /tmp/sluice-UID/PID.sock for other users")
        ->type_name("PATH");
    cmd->add_option("--metrics", access.metrics,
                    "serve Prometheus metrics at http://ADDR:PORT/metrics; ADDR defaults to 127.0.0.1, PORT 0 picks "
                    "one")
        ->type_name("[ADDR:]PORT");
    cmd->add_flag("--jit", jit.enabled,
                  "fuse every segment's loop with LLVM ORC (the default): the segments start at once on the "
                  "interpreter and switch to their fused loops, between two batches, as soon as each is compiled "
                  "(in the background, on the housekeeping cpu); a loop that cannot be compiled leaves its segment "
                  "on the interpreter, with a warning. A run whose end can be told (trace files, generated traffic, "
                  "--duration) compiles only if, 0.1 s in, it is to go on for 2 s more: a shorter one cannot win "
                  "back the compilation");
    cmd->add_flag("--jit-wait", jit.wait,
                  "with the JIT: compile every segment's loop before the run starts, so that fused loops process "
                  "every packet; an element that cannot be compiled is then an error");
    cmd->add_flag("--no-jit", no_jit, "run every segment through the interpreter instead");
    cmd->footer("Exit status: 0 every packet and flow record accounted for and nothing lost; 1 a configuration or "
                "device error, or accounting that does not balance; 2 a usage error; 3 the run completed but lost "
                "data: flow records lost (a collector away, a full export queue, a failed write) or a failed write "
                "of a FlowLog or PcapSink. Packet drops (filtered, not sampled, a full ring) do not change the "
                "status: the summary counts them by reason.");
    cmd->add_option("--jit-nice", jit.nice,
                    "the nice value of the JIT's compilations while the segments run: 19 (the default) lets them "
                    "take only the cpu the segments and other programs leave, 0 compiles as fast as the machine "
                    "allows")
        ->type_name("N")
        ->check(CLI::Range(0, 19));
    cmd->add_option("--jit-cpu", jit.cpu,
                    "the JIT's code generation target: an LLVM CPU name (x86-64-v3, znver3, ...) or `host`; "
                    "default x86-64-v3 where the machine has it, which measured faster here than `host`")
        ->type_name("NAME");
    cmd->add_flag("--jit-perf", jit.perf,
                  "write the fused loops' functions (names and code) for perf: $JITDUMPDIR/jit-PID.dump (else "
                  "/tmp), which `perf inject --jit` reads after `perf record -k 1` (docs/jit.md)");
  }
  int execute() {
    if (no_jit && (cmd->count("--jit") || jit.wait || jit.perf)) {
      std::cerr << "sluice run: " << (jit.wait ? "--jit-wait" : jit.perf ? "--jit-perf" : "--jit")
                << " and --no-jit exclude each other\n";
      return kExitUsage;
    }
    jit.enabled = !no_jit;
    log::Level level = log::Level::Info;
    log::parse_level(log_level, &level);
    log::setup(level);
    return run_config(args, host, duration, output, stats_json, access, jit);
  }
};

struct CtlCommand {
  std::string socket;
  CLI::App *cmd = nullptr;

  void add_to(CLI::App &app) {
    cmd = app.add_subcommand("ctl", "talk to a running probe: COMMAND is stats [--json], read ELEMENT.HANDLER, "
                                    "write ELEMENT.HANDLER VALUE, handlers [ELEMENT], flows [--top N], plan, help");
    cmd->add_option("--socket", socket, "the probe's control socket; default: the one probe of this user that runs")
        ->type_name("PATH");
    cmd->prefix_command();  // COMMAND and its arguments, options included, go to the probe as they are
    cmd->footer("Docs: docs/control.md");
  }
  int execute() { return control_client(socket, cmd->remaining()); }
};

struct ElementsCommand {
  std::string name;
  bool markdown = false;
  std::vector<std::string> plugins;
  CLI::App *cmd = nullptr;

  void add_to(CLI::App &app) {
    cmd = app.add_subcommand("elements", "list the element library, or describe one element");
    cmd->add_option("name", name, "the element to describe");
    cmd->add_flag("--markdown", markdown, "print the whole reference as Markdown (docs/elements.md)");
    cmd->add_option("--require", plugins,
                    "load a plugin's elements (PATH.so) first, checked as `require` in a .pipe file checks it")
        ->type_name("PLUGIN.so")
        ->allow_extra_args(false);
  }
  int execute() {
    for (const std::string &plugin : plugins) {
      // the loader of .pipe files, so that the same checks apply
      std::string path = std::filesystem::absolute(plugin).string(), quoted;
      for (char c : path) quoted += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
      std::shared_ptr<CompiledPipe> loaded = compile_pipe_text("--require", "require \"" + quoted + "\";\n");
      if (loaded->diagnostics.error_count()) {
        std::cerr << loaded->printed(isatty(2)) << loaded->count_line();
        return kExitErrors;
      }
    }
    if (markdown) {
      write_elements_markdown(std::cout);
      return kExitClean;
    }
    if (name.empty()) {
      print_element_list(std::cout);
      return kExitClean;
    }
    const ElementSpec *spec = ElementRegistry::global().find(name);
    if (!spec) {
      std::string m = closest_match(name, ElementRegistry::global().names());
      std::cerr << "sluice: no element named '" << name << "'" << (m.empty() ? "" : "; did you mean '" + m + "'?")
                << "\n";
      return kExitUsage;
    }
    print_element_help(std::cout, *spec);
    return kExitClean;
  }
};

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"Sluice: a declarative packet-pipeline engine and flow probe", "sluice"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("sluice ") + SLUICE_VERSION);
  app.footer("Run `sluice COMMAND --help` for the options of a command. Docs: docs/language.md, docs/elements.md");
  CheckCommand check;
  PlanCommand plan;
  RunCommand run;
  CtlCommand ctl;
  ElementsCommand elements;
  check.add_to(app);
  plan.add_to(app);
  run.add_to(app);
  ctl.add_to(app);
  elements.add_to(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitClean : kExitUsage;
  }
  if (*elements.cmd) return elements.execute();
  if (*run.cmd) return run.execute();
  if (*ctl.cmd) return ctl.execute();
  if (*check.cmd) return check.execute();
  if (*plan.cmd) return plan.execute();
  return kExitUsage;
}
