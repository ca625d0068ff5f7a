#include "engine/jit/bitcode_index.hh"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/LLVMContext.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

#include "engine/jit/element_bitcode.hh"
#include "engine/runtime/element_runtime.hh"

namespace sluice {

BitcodeIndex &BitcodeIndex::get() {
  static BitcodeIndex index;
  return index;
}

BitcodeIndex::BitcodeIndex() {
  for (const EmbeddedBitcode &f : embedded_bitcode()) index(llvm::MemoryBufferRef(f.bytes(), f.source));
}

int BitcodeIndex::file_defining(const std::string &symbol) const {
  std::lock_guard lock(mutex_);
  auto it = symbols_.find(symbol);
  return it == symbols_.end() ? -1 : it->second;
}

llvm::MemoryBufferRef BitcodeIndex::file(int i) const {
  std::lock_guard lock(mutex_);
  return files_[size_t(i)];
}

bool BitcodeIndex::add_file(const std::string &path, std::string *error) {
  std::lock_guard lock(mutex_);
  if (std::find(read_.begin(), read_.end(), path) != read_.end()) return true;
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf) {
    *error = buf.getError().message();
    return false;
  }
  owned_.push_back(std::move(*buf));
  read_.push_back(path);
  index(owned_.back()->getMemBufferRef());
  return true;
}

void BitcodeIndex::index(llvm::MemoryBufferRef buf) {
  llvm::LLVMContext cx;
  auto m = llvm::getLazyBitcodeModule(buf, cx);
  if (!m) {
    llvm::consumeError(m.takeError());
    return;
  }
  int i = int(files_.size());
  files_.push_back(buf);
  for (llvm::GlobalValue &g : (*m)->global_values())
    if (!g.isDeclaration() && g.hasExternalLinkage()) symbols_.emplace(g.getName().str(), i);
}

std::string plugin_of(const JitEntry &entry) {
  // The built-in elements are where the runtime is: the executable, not the
  // JIT module this code may run in (jit_module.hh).
  Dl_info mine{}, theirs{};
  if (!dladdr(reinterpret_cast<const void *>(&RuntimeRegistry::global), &mine) || !dladdr(entry.stamp, &theirs) ||
      !theirs.dli_fname)
    return "";
  if (mine.dli_fname && std::string(mine.dli_fname) == theirs.dli_fname) return "";
  return theirs.dli_fname;
}

std::string stamp_problem(const llvm::Module &m, const JitEntry &entry, const JitStamp &host, const std::string &what) {
  const llvm::GlobalVariable *g = m.getGlobalVariable(entry.stamp_symbol);
  auto *init = g && g->hasInitializer() ? llvm::dyn_cast<llvm::ConstantStruct>(g->getInitializer()) : nullptr;
  if (!init) return "JIT: the bitcode of " + what + " has no stamp (" + entry.stamp_symbol + ")";
  uint64_t size = llvm::cast<llvm::ConstantInt>(init->getOperand(0))->getZExtValue();
  std::string when;
  // char[32]: the time, then zeros (clang may split it into a packed struct of both)
  llvm::Constant *text = init->getOperand(1);
  if (auto *packed = llvm::dyn_cast<llvm::ConstantStruct>(text)) text = packed->getOperand(0);
  if (auto *arr = llvm::dyn_cast<llvm::ConstantDataSequential>(text)) {
    llvm::StringRef raw = arr->getRawDataValues();
    when.assign(raw.data(), strnlen(raw.data(), raw.size()));
  }
  if (size == host.object_size && when == host.source_time) return "";
  return "JIT: the bitcode of " + what + " is stale: it was built from the source of " + when + " with objects of " +
         std::to_string(size) + " bytes, this binary from the source of " + host.source_time + " with " +
         std::to_string(host.object_size) + " bytes; rebuild, or run with --no-jit";
}

}  // namespace sluice
