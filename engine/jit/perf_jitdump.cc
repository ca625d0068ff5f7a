#include "engine/jit/perf_jitdump.hh"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace sluice {

namespace {

constexpr uint32_t kMagic = 0x4A695444;  // "JiTD" read as a little-endian word
constexpr uint32_t kVersion = 1;
constexpr uint32_t kCodeLoad = 0;

struct Header {
  uint32_t magic, version, total_size, elf_mach, pad1, pid;
  uint64_t timestamp, flags;
};
struct CodeLoad {  // followed by the name (NUL-terminated), then the code
  uint32_t id, total_size;
  uint64_t timestamp;
  uint32_t pid, tid;
  uint64_t vma, code_addr, code_size, code_index;
};

// perf record -k 1 stamps its samples with CLOCK_MONOTONIC; so are the records.
uint64_t monotonic_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1'000'000'000u + uint64_t(t.tv_nsec);
}

class Dump {
 public:
  static Dump &get() {
    static Dump d;
    return d;
  }
  const std::string &path() const { return path_; }

  void write(const std::string &name, uint64_t addr, const char *code, uint64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    CodeLoad r{kCodeLoad, 0, monotonic_ns(), uint32_t(getpid()), uint32_t(syscall(SYS_gettid)), addr, addr, size,
               index_++};
    r.total_size = uint32_t(sizeof r + name.size() + 1 + size);
    std::vector<char> rec(r.total_size);
    std::memcpy(rec.data(), &r, sizeof r);
    std::memcpy(rec.data() + sizeof r, name.c_str(), name.size() + 1);
    std::memcpy(rec.data() + sizeof r + name.size() + 1, code, size);
    put(rec.data(), rec.size());
  }

 private:
  Dump() {
    const char *dir = std::getenv("JITDUMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/jit-" + std::to_string(getpid()) + ".dump";
    fd_ = open(path_.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("JIT: --jit-perf: cannot create " + path_ + ": " + std::strerror(errno));
    Header h{kMagic, kVersion, sizeof(Header), EM_X86_64, 0, uint32_t(getpid()), monotonic_ns(), 0};
    put(&h, sizeof h);
    // The marker: perf record notes this mapping of the dump (its name tells
    // perf inject where the dump is). Kept for the process's life.
    if (mmap(nullptr, size_t(sysconf(_SC_PAGESIZE)), PROT_READ | PROT_EXEC, MAP_PRIVATE, fd_, 0) == MAP_FAILED)
      throw std::runtime_error("JIT: --jit-perf: cannot map " + path_ + ": " + std::strerror(errno));
  }
  void put(const void *p, size_t n) {
    for (const char *c = static_cast<const char *>(p); n > 0;) {
      ssize_t w = ::write(fd_, c, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return;  // a profile's aid: a short dump costs names, never the run
      c += w, n -= size_t(w);
    }
  }

  std::mutex mu_;
  std::string path_;
  int fd_ = -1;
  uint64_t index_ = 0;
};

}  // namespace

std::string PerfJitDump::path() { return Dump::get().path(); }

// After the fixups the blocks hold the code as it will run, at its address.
void PerfJitDump::modifyPassConfig(llvm::orc::MaterializationResponsibility &, llvm::jitlink::LinkGraph &,
                                   llvm::jitlink::PassConfiguration &config) {
  config.PostFixupPasses.push_back([](llvm::jitlink::LinkGraph &g) {
    for (llvm::jitlink::Symbol *s : g.defined_symbols()) {
      if (!s->hasName() || !s->isCallable() || s->getSize() == 0) continue;
      llvm::ArrayRef<char> code = s->getSymbolContent();
      Dump::get().write(s->getName().str(), s->getAddress().getValue(), code.data(), code.size());
    }
    return llvm::Error::success();
  });
}

}  // namespace sluice
