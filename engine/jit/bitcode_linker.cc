#include "engine/jit/bitcode_linker.hh"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/Instructions.h>
#include <llvm/Linker/Linker.h>

#include <set>

#include "engine/jit/bitcode_index.hh"
#include "engine/jit/jit_common.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/segment.hh"

namespace sluice {

namespace {

// engine/jit/bitcode/support.cc: what the generated loop calls.
constexpr const char *kSupportFunctions[] = {"sluice_jit_poll",  "sluice_jit_channel_receive", "sluice_jit_channel_flows",
                                             "sluice_jit_tick",  "sluice_jit_emit",            "sluice_jit_count",
                                             "sluice_jit_filter_match"};

// Declares what the segment needs: the entries of its element classes (the
// bitcode file of a plugin's class read on the way), their stamps, the
// support functions.
std::map<RuntimeElement *, const JitEntry *> declare_needed(llvm::Module &m, const SegmentRunner &seg) {
  BitcodeIndex &index = BitcodeIndex::get();
  llvm::LLVMContext &cx = m.getContext();
  llvm::Type *ptr = llvm::PointerType::get(cx, 0);
  llvm::FunctionType *push_type =
      llvm::FunctionType::get(llvm::Type::getVoidTy(cx), {ptr, llvm::Type::getInt32Ty(cx), ptr}, false);
  std::map<RuntimeElement *, const JitEntry *> entries;
  for (RuntimeElement *e : seg.elements()) {
    const JitEntry *entry = RuntimeRegistry::global().find_jit(e->class_name());
    if (!entry) throw JitError("JIT: element " + element_label(*e) + " (" + e->class_name() + ") has no JIT entry");
    int file = index.file_defining(entry->push_symbol);
    if (std::string plugin = plugin_of(*entry); file < 0 && !plugin.empty()) {
      // A plugin's element: its bitcode ships beside it.
      std::string why;
      if (!index.add_file(plugin + ".bc", &why))
        throw JitError("JIT: no bitcode for element " + element_label(*e) + " (class " + e->class_name() +
                       ", from plugin " + plugin + "): cannot read " + plugin + ".bc (" + why +
                       "); build it beside the plugin (docs/jit.md), or run with --no-jit");
      file = index.file_defining(entry->push_symbol);
    }
    if (file < 0)
      throw JitError("JIT: no bitcode for element " + element_label(*e) + " (class " + e->class_name() +
                     "): neither this binary nor a plugin's .bc has it; run with --no-jit");
    entries[e] = entry;
    m.getOrInsertFunction(entry->push_symbol, push_type);
    if (entry->classify_symbol) {
      m.getOrInsertFunction(entry->classify_symbol,
                            llvm::FunctionType::get(llvm::Type::getInt32Ty(cx), {ptr, ptr}, false));
      m.getOrInsertFunction(entry->batch_done_symbol,
                            llvm::FunctionType::get(llvm::Type::getVoidTy(cx),
                                                    {ptr, llvm::Type::getInt64Ty(cx), llvm::Type::getInt64Ty(cx)},
                                                    false));
    }
  }
  // The stamps, compared before anything is linked.
  for (auto &[e, entry] : entries) m.getOrInsertGlobal(entry->stamp_symbol, llvm::Type::getInt8Ty(cx));
  // Declared with any type: linking brings their definitions.
  for (const char *support : kSupportFunctions) {
    if (index.file_defining(support) < 0) throw JitError(std::string("JIT: the embedded bitcode lacks ") + support);
    m.getOrInsertFunction(support, llvm::FunctionType::get(llvm::Type::getVoidTy(cx), false));
  }
  return entries;
}

// Links what the module declares and some bitcode file defines, until
// nothing more is needed; the bitcode file each function came from.
std::map<std::string, std::string> link_needed(llvm::Module &m, const Diagnostics &diag,
                                               const std::atomic<bool> *cancel) {
  BitcodeIndex &index = BitcodeIndex::get();
  std::map<std::string, std::string> source_of;
  llvm::Linker linker(m);
  for (int round = 0; round < 16; ++round) {
    std::set<int> wanted;
    for (llvm::GlobalValue &g : m.global_values())
      if (g.isDeclaration() && !g.getName().starts_with("llvm."))
        if (int f = index.file_defining(g.getName().str()); f >= 0) wanted.insert(f);
    if (wanted.empty()) return source_of;
    for (int f : wanted) {
      check_cancelled(cancel);
      llvm::MemoryBufferRef buf = index.file(f);
      std::string source = buf.getBufferIdentifier().str();
      // Lazily: the linker materializes only the functions the module needs
      // (most of an element file's code is not on its data path).
      auto src = take(llvm::getLazyBitcodeModule(buf, m.getContext()), "JIT: bitcode of " + source);
      src->setDataLayout(m.getDataLayout());
      src->setTargetTriple(m.getTargetTriple());
      for (llvm::Function &fn : *src)
        if (!fn.isDeclaration()) source_of[fn.getName().str()] = source;
      if (linker.linkInModule(std::move(src), llvm::Linker::Flags::LinkOnlyNeeded))
        throw JitError("JIT: linking the bitcode of " + source + " failed: " + diag.text);
    }
  }
  throw JitError("JIT: linking the bitcode did not settle");
}

// Linkage: the linked functions become the loop's private copies
// (internal: O3 inlines or specializes them freely, and what it leaves is
// emitted here, for the JIT's target); variables are the host's
// (declarations), so that state is never duplicated; constants keep their
// values for folding.
void make_loop_linkage(llvm::Module &m) {
  if (auto *g = m.getGlobalVariable("llvm.global_ctors")) g->eraseFromParent();
  if (auto *g = m.getGlobalVariable("llvm.global_dtors")) g->eraseFromParent();
  for (llvm::Function &f : m) {
    f.removeFnAttr("target-cpu");
    f.removeFnAttr("target-features");
    f.removeFnAttr("tune-cpu");
    if (f.isDeclaration()) continue;
    if (f.hasExternalLinkage()) f.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  for (llvm::GlobalVariable &g : m.globals()) {
    if (g.isDeclaration() || g.hasLocalLinkage() || g.getName().starts_with("llvm.")) continue;
    if (g.isConstant() && g.hasExternalLinkage()) {
      g.setLinkage(llvm::GlobalValue::AvailableExternallyLinkage);
    } else if (!g.isConstant()) {
      g.setInitializer(nullptr);
      g.setLinkage(llvm::GlobalValue::ExternalLinkage);
      g.setComdat(nullptr);
    }
  }
  // An alias (a C++ constructor's second name) would define the host's
  // symbol again in the JIT: it becomes a declaration of the host's.
  std::vector<llvm::GlobalAlias *> aliases;
  for (llvm::GlobalAlias &a : m.aliases())
    if (!a.hasLocalLinkage()) aliases.push_back(&a);
  for (llvm::GlobalAlias *a : aliases) {
    llvm::GlobalValue *decl;
    if (auto *fty = llvm::dyn_cast<llvm::Function>(a->getAliaseeObject()))
      decl = llvm::Function::Create(fty->getFunctionType(), llvm::GlobalValue::ExternalLinkage, "", &m);
    else
      decl = new llvm::GlobalVariable(m, a->getValueType(), false, llvm::GlobalValue::ExternalLinkage, nullptr);
    decl->takeName(a);
    a->replaceAllUsesWith(decl);
    a->eraseFromParent();
  }
}

// The host function a support function calls (its body names it).
llvm::Function *callee_in(llvm::Module &m, const char *name) {
  llvm::Function *f = m.getFunction(name);
  if (f)
    for (llvm::BasicBlock &bb : *f)
      for (llvm::Instruction &in : bb)
        if (auto *call = llvm::dyn_cast<llvm::CallBase>(&in))
          if (llvm::Function *c = call->getCalledFunction(); c && !c->isIntrinsic()) return c;
  throw JitError(std::string("JIT: cannot find what ") + name + " calls in the support bitcode");
}

}  // namespace

LinkedBitcode link_segment_bitcode(llvm::Module &m, const SegmentRunner &seg, const Diagnostics &diagnostics,
                                   const std::atomic<bool> *cancel) {
  LinkedBitcode linked;
  linked.entries = declare_needed(m, seg);
  std::map<std::string, std::string> source_of = link_needed(m, diagnostics, cancel);
  for (auto &[e, entry] : linked.entries) {
    std::string file = source_of.count(entry->push_symbol) ? source_of[entry->push_symbol] : "?";
    std::string stale = stamp_problem(m, *entry, *entry->stamp,
                                      "element " + element_label(*e) + " (class " + e->class_name() + ", " + file + ")");
    if (!stale.empty()) throw JitError(stale);
  }
  make_loop_linkage(m);
  linked.host_emit = callee_in(m, "sluice_jit_emit");
  linked.filter_match_name = callee_in(m, "sluice_jit_filter_match")->getName().str();
  return linked;
}

}  // namespace sluice
