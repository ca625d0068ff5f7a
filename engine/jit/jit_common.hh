// What the JIT's own files share (LLVM's headers: include it only from
// engine/jit): its error, LLVM's results unwrapped, the diagnostics of its
// context, constant addresses in IR, and the names it gives things.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DataLayout.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/Support/Error.h>

namespace sluice {

class RuntimeElement;

// A segment that cannot be compiled; the message is the run's error.
struct JitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A compilation given up because its `cancel` flag was set (the run ended).
inline void check_cancelled(const std::atomic<bool> *cancel) {
  if (cancel && cancel->load(std::memory_order_relaxed)) throw JitError("cancelled");
}

template <typename T>
T take(llvm::Expected<T> v, const std::string &what) {
  if (!v) throw JitError(what + ": " + llvm::toString(v.takeError()));
  return std::move(*v);
}

// Errors of LLVM's linker and readers reach the context's diagnostic
// handler; by default an error ends the process. Install with
// cx.setDiagnosticHandlerCallBack(&Diagnostics::handle, &diagnostics).
struct Diagnostics {
  std::string text;
  static void handle(const llvm::DiagnosticInfo *d, void *self);
};

// A host address as a pointer constant of the module (`inttoptr`).
llvm::Constant *address_constant(llvm::LLVMContext &cx, const void *p);

// The absolute address a pointer value stands for, when it is a constant
// address (an instance's `inttoptr`) plus constant offsets.
std::optional<uint64_t> constant_address(const llvm::Value *p, const llvm::DataLayout &dl);

// A name made of what IR names may hold unquoted: letters, digits, '_'.
std::string sanitize(const std::string &s);

// How errors name an element instance: "'f#0' (lane 1)".
std::string element_label(const RuntimeElement &e);

}  // namespace sluice
