// libFuzzer target: the hot-reload plan of any running graph and any new
// one. The input is two .pipe texts separated by a line "===" (the first
// part alone: the running graph reloads itself); each is compiled by the
// driver, and when both compile the plan is made and printed. Never a
// crash, hang or sanitizer report; a refusal is a diagnostic.
#include <cstdint>
#include <sstream>
#include <string>

#include "engine/driver/compile_pipe.hh"
#include "engine/packet/pcap_filter.hh"
#include "engine/reload/reload_plan.hh"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace sluice;
  set_filter_checks_use_libpcap(false);  // no DNS lookups for `host name` while fuzzing
  std::string text(reinterpret_cast<const char *>(data), size);
  size_t cut = text.find("\n===\n");
  std::string running_text = text.substr(0, cut);
  std::string next_text = cut == std::string::npos ? running_text : text.substr(cut + 5);
  CompileOptions opts;
  opts.allow_require = false;
  auto running = compile_pipe_text("running.pipe", running_text, opts);
  if (!running->ok) return 0;
  auto next = compile_pipe_text("next.pipe", next_text, opts);
  if (!next->ok) return 0;
  Diagnostics diags(next->sources);
  ReloadPlan plan;
  bool ok = plan_reload(running->lanes, next->lanes, diags, plan);
  std::ostringstream sink;
  diags.print(sink);
  sink << plan.text();
  // A refusal always says why.
  if (!ok && diags.error_count() == 0) __builtin_trap();
  return 0;
}
