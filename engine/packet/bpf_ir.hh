// Classic BPF to LLVM IR (bpf_jit.cc), for the JIT's own files: a Filter's
// program becomes a function of the module it is emitted into, either alone
// (BpfJit) or inside a fused segment loop (passes/inline_filter_programs.cc).
#pragma once
#include <cstddef>
#include <string>

#include <llvm/IR/Function.h>
#include <llvm/IR/Module.h>

struct bpf_insn;

namespace sluice {

// uint32_t NAME(const uint8_t *packet, uint32_t wirelen, uint32_t caplen):
// the accept length bpf_filter() would return, 0 rejects.
llvm::Function *emit_bpf_function(llvm::Module &m, const std::string &name, const bpf_insn *insns, size_t count);

}  // namespace sluice
