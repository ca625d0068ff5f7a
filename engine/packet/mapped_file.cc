#include "engine/packet/mapped_file.hh"

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mutex>

namespace sluice {

namespace {

constexpr size_t kHugeAlign = MappedFile::kHugeAlign;

// The live mappings, as the SIGBUS handler sees them: lock-free, since a
// handler may take no lock. A slot is live while `begin` is not 0.
struct GuardSlot {
  std::atomic<bool> taken{false};
  std::atomic<uintptr_t> begin{0}, end{0};  // end: the mapping's, page-rounded
  std::atomic<std::atomic<size_t> *> intact_below{nullptr};
  std::atomic<int> fd{-1};
};
constexpr int kGuardSlots = 64;
GuardSlot guard_slots[kGuardSlots];
struct sigaction previous_action;  // SIGBUS's before ours
uintptr_t page_size;

void lower(std::atomic<size_t> &value, size_t to) {  // lock-free: safe in a handler
  size_t was = value.load(std::memory_order_relaxed);
  while (to < was && !value.compare_exchange_weak(was, to, std::memory_order_release)) {
  }
}

void on_sigbus(int sig, siginfo_t *info, void *context) {
  uintptr_t at = reinterpret_cast<uintptr_t>(info->si_addr);
  if (info->si_code == BUS_ADRERR) {
    for (GuardSlot &s : guard_slots) {
      uintptr_t begin = s.begin.load(std::memory_order_acquire), end = s.end.load(std::memory_order_relaxed);
      if (!begin || at < begin || at >= end) continue;
      // Past the file's new end: zeros from this page to the mapping's end.
      uintptr_t page = at & ~(page_size - 1);
      if (mmap(reinterpret_cast<void *>(page), end - page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
               0) == MAP_FAILED)
        break;
      struct stat st;
      size_t cut = page - begin;
      if (fstat(s.fd.load(std::memory_order_relaxed), &st) == 0 && size_t(st.st_size) < cut) cut = size_t(st.st_size);
      lower(*s.intact_below.load(std::memory_order_relaxed), cut);
      return;  // the access is made again, and reads zeros
    }
  }
  // Not a trace's page: as it would have been without this handler.
  if (previous_action.sa_flags & SA_SIGINFO) {
    if (previous_action.sa_sigaction) return previous_action.sa_sigaction(sig, info, context);
  } else if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
    return previous_action.sa_handler(sig);
  }
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGBUS, &dfl, nullptr);  // the access faults again, and the default ends the process
}

// The file mapped at an address aligned to kHugeAlign (the file's offset 0
// aligned as its huge folios in the page cache are), or MAP_FAILED.
void *map_aligned(int fd, size_t length) {
  const size_t reserve = length + kHugeAlign;
  void *r = mmap(nullptr, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return MAP_FAILED;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(r);
  const uintptr_t at = (begin + kHugeAlign - 1) & ~uintptr_t(kHugeAlign - 1);
  void *m = mmap(reinterpret_cast<void *>(at), length, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
  if (m == MAP_FAILED) {
    munmap(r, reserve);
    return MAP_FAILED;
  }
  // The reservation's slack on either side, given back.
  if (at > begin) munmap(r, at - begin);
  const uintptr_t end = at + length, reserved_end = begin + reserve;
  if (reserved_end > end) munmap(reinterpret_cast<void *>(end), reserved_end - end);
  return m;
}

void install_guard() {
  static std::once_flag once;
  std::call_once(once, [] {
    page_size = uintptr_t(sysconf(_SC_PAGESIZE));
    struct sigaction action = {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &previous_action);
  });
}

}  // namespace

MappedFile::MappedFile(int fd) : fd_(fd), intact_below_(0) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return;
  size_t size = size_t(st.st_size);
  install_guard();
  for (int i = 0; i < kGuardSlots && guard_slot_ < 0; ++i) {
    bool free = false;
    if (guard_slots[i].taken.compare_exchange_strong(free, true)) guard_slot_ = i;
  }
  if (guard_slot_ < 0) return;  // read() it is
  size_t rounded = (size + page_size - 1) & ~(page_size - 1);
  void *m = map_aligned(fd, rounded);
  if (m == MAP_FAILED) {
    guard_slots[guard_slot_].taken = false;
    guard_slot_ = -1;
    return;
  }
  madvise(m, rounded, MADV_SEQUENTIAL);  // the kernel reads ahead of the faults, and further
  // Where the disk is read, in folios of kHugeAlign (a fault in a huge-page
  // vma reads ahead that much); a PMD maps each such folio (header comment).
  madvise(m, rounded, MADV_HUGEPAGE);
  data_ = static_cast<const uint8_t *>(m), size_ = size, mapped_size_ = rounded;
  intact_below_ = size;
  GuardSlot &g = guard_slots[guard_slot_];
  g.end.store(reinterpret_cast<uintptr_t>(m) + rounded, std::memory_order_relaxed);
  g.intact_below.store(&intact_below_, std::memory_order_relaxed);
  g.fd.store(fd, std::memory_order_relaxed);
  g.begin.store(reinterpret_cast<uintptr_t>(m), std::memory_order_release);
}

MappedFile::~MappedFile() {
  if (guard_slot_ < 0) return;
  GuardSlot &g = guard_slots[guard_slot_];
  g.begin.store(0, std::memory_order_release);  // before the range can be anyone else's
  if (data_) munmap(const_cast<uint8_t *>(data_), mapped_size_);
  g.taken = false;
}

void MappedFile::check_size() {
  struct stat st;
  if (fstat(fd_, &st) == 0) lower(intact_below_, size_t(st.st_size));
}

bool MappedFile::bring_in(size_t begin, size_t end) const {
  end = std::min(end, size_);
  if (!data_ || begin >= end) return data_ != nullptr;
  uintptr_t from = reinterpret_cast<uintptr_t>(data_) + begin, to = reinterpret_cast<uintptr_t>(data_) + end;
  // A read every kFaultAround bytes: each fault maps its whole window of
  // cached pages (or, in a huge folio, all of it), taken here rather than by
  // the reader; past a shrunk file's end, the handler's zeros. Not
  // MADV_POPULATE_READ: it walks the page tables page by page after the
  // faults, and took about twice these reads' time (docs/performance.md).
  from &= ~uintptr_t(kFaultAround - 1);
  for (uintptr_t p = from; p < to; p += kFaultAround) (void)*reinterpret_cast<const volatile uint8_t *>(p);
  (void)*reinterpret_cast<const volatile uint8_t *>(to - 1);
  return intact_below() >= end;
}

void MappedFile::let_go(size_t begin, size_t end) const {
  if (!data_) return;
  uintptr_t from = reinterpret_cast<uintptr_t>(data_) + begin, to = reinterpret_cast<uintptr_t>(data_) + std::min(end, size_);
  from = (from + page_size - 1) & ~(page_size - 1), to &= ~(page_size - 1);
  if (from < to) madvise(reinterpret_cast<void *>(from), to - from, MADV_DONTNEED);
}

}  // namespace sluice
