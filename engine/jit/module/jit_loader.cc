// The executable's side of the JIT module (jit_module.hh): the functions of
// segment_jit.hh that the executable calls, forwarded to sluice-jit.so,
// which is opened the first time one of them needs it (a compiler made at
// the start of a run opens it at its first compilation).
#include <dlfcn.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "engine/jit/jit_module.hh"

namespace sluice {

namespace {

struct LoadedModule {
  const JitModuleApi *api = nullptr;
  std::string error;  // why api is null
};

// Beside the executable (the build tree), then where the package installs
// it, relative to the executable (an unpacked or relocated tree works too).
std::vector<std::filesystem::path> module_candidates() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  std::vector<std::filesystem::path> paths = {exe.parent_path() / kJitModuleFile};
#ifdef SLUICE_JIT_MODULE_FROM_BIN
  paths.push_back((exe.parent_path() / SLUICE_JIT_MODULE_FROM_BIN).lexically_normal());
#endif
  return paths;
}

// Its path, or empty with *missing saying where it was looked for.
std::filesystem::path find_module(std::string *missing) {
  std::string tried;
  for (const std::filesystem::path &p : module_candidates()) {
    std::error_code ec;
    if (std::filesystem::exists(p, ec)) return p;
    tried += (tried.empty() ? "" : ", ") + p.string();
  }
  *missing = "JIT: the JIT module " + std::string(kJitModuleFile) + " is not installed (looked for " + tried +
             "); reinstall sluice, or run with --no-jit";
  return {};
}

LoadedModule load_module() {
  LoadedModule m;
  std::filesystem::path p = find_module(&m.error);
  if (p.empty()) return m;
  // RTLD_LOCAL: LLVM's symbols and the module's stay out of the process's
  // global scope (the fused loops resolve against the executable's).
  void *h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    m.error = "JIT: cannot load " + p.string() + ": " + dlerror() + "; run with --no-jit";
    return m;
  }
  auto entry = reinterpret_cast<const JitModuleApi *(*)()>(dlsym(h, kJitModuleEntry));
  const JitModuleApi *api = entry ? entry() : nullptr;
  if (!api || api->api_size != sizeof(JitModuleApi) || std::string(api->version) != SLUICE_VERSION) {
    m.error = "JIT: " + p.string() + " is not the JIT module of this sluice (" SLUICE_VERSION
              ": reinstall, or rebuild both); run with --no-jit";
    dlclose(h);
    return m;
  }
  m.api = api;  // never closed: fused loops run in its code until the process ends
  return m;
}

const LoadedModule &jit_module() {
  static const LoadedModule m = load_module();  // once, thread-safe
  return m;
}

// The module's compiler, made on first use: a --jit run that decides not to
// compile (its input ends too soon to repay it) never loads LLVM, and runs
// as fast as --no-jit (loading and relocating it, and LLVM's destructors at
// exit, were 20 ms of a short run). The first compilation, in the
// background, loads it instead.
class CompilerLoadedOnFirstUse final : public ProgramCompiler {
 public:
  explicit CompilerLoadedOnFirstUse(JitSettings settings) : settings_(std::move(settings)) {}

  Result compile(SegmentRunner &segment, bool want_ir, const std::atomic<bool> *cancel) override {
    if (ProgramCompiler *c = compiler()) return c->compile(segment, want_ir, cancel);
    Result r;
    r.error = error_;
    r.compile_ms = 0;
    return r;
  }
  std::string describe() const override {
    ProgramCompiler *c = compiler();
    return c ? c->describe() : "LLVM ORC, not loaded: " + error_;
  }
  const std::string &error() const { return error_; }
  // The module's compiler, or null with error_ (both set once).
  ProgramCompiler *compiler() const {
    std::call_once(made_, [this] {
      const LoadedModule &m = jit_module();
      if (m.api) compiler_ = m.api->make_segment_jit(settings_, &error_);
      else error_ = m.error;
    });
    return compiler_.get();
  }

 private:
  JitSettings settings_;
  mutable std::once_flag made_;
  mutable std::unique_ptr<ProgramCompiler> compiler_;
  mutable std::string error_;
};

}  // namespace

std::unique_ptr<ProgramCompiler> make_segment_jit(const JitSettings &settings, std::string *error) {
  auto jit = std::make_unique<CompilerLoadedOnFirstUse>(settings);
  // A missing module is an error at once, as are settings only LLVM can
  // check (--jit-cpu, --emit-ir-after): with those the module loads now.
  if (settings.cpu.empty() && settings.print_after.empty()) {
    if (!find_module(error).empty()) return jit;
    return nullptr;
  }
  if (!jit->compiler()) {
    *error = jit->error();
    return nullptr;
  }
  return jit;
}

void warm_up_jit(bool bitcode) {
  if (const JitModuleApi *api = jit_module().api) api->warm_up_jit(bitcode);
}

const std::vector<std::string> &jit_pass_names() { return jit_pass_names_listed(); }

}  // namespace sluice
