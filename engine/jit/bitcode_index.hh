// The bitcode files the JIT links from, and which one defines which
// external symbol: the binary's own, embedded (element_bitcode.hh), and a
// plugin's, read from beside it (PLUGIN.so.bc) when one of its classes is
// first compiled. With the checks that a class's bitcode is this binary's.
// LLVM's headers: include only from engine/jit.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>

namespace sluice {

struct JitEntry;
struct JitStamp;

// Read lazily: only the symbol tables. Thread-safe.
class BitcodeIndex {
 public:
  static BitcodeIndex &get();
  // The file that defines `symbol` (external linkage); -1: none.
  int file_defining(const std::string &symbol) const;
  llvm::MemoryBufferRef file(int i) const;
  // Reads a plugin's bitcode (once); false, with *error, when it cannot.
  bool add_file(const std::string &path, std::string *error);

 private:
  BitcodeIndex();
  void index(llvm::MemoryBufferRef buf);
  mutable std::mutex mutex_;
  std::vector<llvm::MemoryBufferRef> files_;
  std::map<std::string, int> symbols_;
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> owned_;
  std::vector<std::string> read_;
};

// The shared object a class's code was loaded from, when it is not the
// executable (a plugin's .so); empty otherwise.
std::string plugin_of(const JitEntry &entry);

// Whether the stamp the bitcode in `m` recorded for an element class (its
// instance size, its source file's time) is the binary's, `host`: empty, or
// the error, naming `what`.
std::string stamp_problem(const llvm::Module &m, const JitEntry &entry, const JitStamp &host, const std::string &what);

}  // namespace sluice
