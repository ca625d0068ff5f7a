// Classic BPF, the program libpcap compiles a filter expression to, turned
// into LLVM IR and run as native code through ORC (LLJIT). It gives, for
// every packet, what libpcap's bpf_filter() interpreter gives. The IR is
// what a fused segment loop takes in (bpf_ir.hh); alone, as here, it is
// what the tests compare with libpcap and bench_filter times. (The Filter
// element no longer runs it between two fused loops: compiling it loaded
// LLVM at the start of every --jit run.)
//
// LLVM's headers stay in bpf_jit.cc.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

struct bpf_insn;  // <pcap/bpf.h>

// On a function that calls code the JIT made: UBSan's function-type check
// (-fsanitize=function) reads a signature before the callee, which JIT code
// does not have (the word before it may be another page, unmapped).
#if defined(__clang__)
#define SLUICE_CALLS_JIT_CODE __attribute__((no_sanitize("function")))
#else
#define SLUICE_CALLS_JIT_CODE
#endif

namespace sluice {

class BpfJit {
 public:
  // The accept length bpf_filter() would return: 0 rejects.
  using Function = uint32_t (*)(const uint8_t *packet, uint32_t wirelen, uint32_t caplen);

  // Compiles the program (which libpcap validated) to native code. nullptr,
  // with *error, when LLVM cannot.
  static std::unique_ptr<BpfJit> compile(const bpf_insn *insns, size_t count, std::string *error);
  // Virtual: the executable deletes what the JIT module made (jit_module.hh)
  // and calls the module's destructor, never one of its own.
  virtual ~BpfJit();
  BpfJit(const BpfJit &) = delete;
  BpfJit &operator=(const BpfJit &) = delete;

  SLUICE_CALLS_JIT_CODE uint32_t run(const uint8_t *packet, uint32_t wirelen, uint32_t caplen) const {
    return fn_(packet, wirelen, caplen);
  }
  // The optimized IR of the function, for `--emit-ir` and tests.
  const std::string &ir() const { return ir_; }

 private:
  BpfJit() = default;
  struct Engine;
  std::unique_ptr<Engine> engine_;  // owns the code fn_ points into
  Function fn_ = nullptr;
  std::string ir_;
};

}  // namespace sluice
