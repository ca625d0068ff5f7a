// The executable's side of the JIT module (jit_module.hh): the functions of
// segment_jit.hh that the executable calls, and BpfJit::compile, forwarded
// to sluice-jit.so, which is opened the first time one of them is called.
#include <dlfcn.h>

#include <filesystem>
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

LoadedModule load_module() {
  LoadedModule m;
  std::string tried;
  for (const std::filesystem::path &p : module_candidates()) {
    std::error_code ec;
    if (!std::filesystem::exists(p, ec)) {
      tried += (tried.empty() ? "" : ", ") + p.string();
      continue;
    }
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
    m.api = api;  // never closed: fused loops and filters run in its code until the process ends
    return m;
  }
  m.error = "JIT: the JIT module " + std::string(kJitModuleFile) + " is not installed (looked for " + tried +
            "); reinstall sluice, or run with --no-jit";
  return m;
}

const LoadedModule &jit_module() {
  static const LoadedModule m = load_module();  // once, thread-safe
  return m;
}

}  // namespace

std::unique_ptr<ProgramCompiler> make_segment_jit(const JitSettings &settings, std::string *error) {
  const LoadedModule &m = jit_module();
  if (!m.api) {
    *error = m.error;
    return nullptr;
  }
  return m.api->make_segment_jit(settings, error);
}

void warm_up_jit(bool bitcode) {
  if (const JitModuleApi *api = jit_module().api) api->warm_up_jit(bitcode);
}

const std::vector<std::string> &jit_pass_names() { return jit_pass_names_listed(); }

std::unique_ptr<BpfJit> BpfJit::compile(const bpf_insn *insns, size_t count, std::string *error) {
  const LoadedModule &m = jit_module();
  if (!m.api) {
    *error = m.error;
    return nullptr;
  }
  return m.api->compile_bpf(insns, count, error);
}

}  // namespace sluice
