#include "engine/jit/passes/check_thread_locals.hh"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/GlobalVariable.h>

#include <functional>
#include <set>

namespace sluice {

namespace {

// The first thread-local global that `root`, or a function it reaches,
// uses; with the function that uses it.
std::pair<const llvm::GlobalVariable *, const llvm::Function *> find_thread_local(const llvm::Function &root) {
  std::set<const llvm::Function *> seen;
  std::vector<const llvm::Function *> todo{&root};
  std::function<const llvm::GlobalVariable *(const llvm::Value *, int)> tls_in =
      [&](const llvm::Value *v, int depth) -> const llvm::GlobalVariable * {
    if (auto *g = llvm::dyn_cast<llvm::GlobalVariable>(v)) return g->isThreadLocal() ? g : nullptr;
    if (auto *ce = llvm::dyn_cast<llvm::ConstantExpr>(v); ce && depth < 8)
      for (const llvm::Value *op : ce->operands())
        if (auto *g = tls_in(op, depth + 1)) return g;
    return nullptr;
  };
  while (!todo.empty()) {
    const llvm::Function *f = todo.back();
    todo.pop_back();
    if (!seen.insert(f).second || f->isDeclaration()) continue;
    // the loop's own functions lead to other elements' code, checked on its own
    if (f != &root && (f->getName().starts_with("emit.") || f->getName().starts_with("deliver.") ||
                       f->getName().starts_with("push.") || f->getName().starts_with("pass.")))
      continue;
    for (const llvm::BasicBlock &bb : *f)
      for (const llvm::Instruction &in : bb)
        for (const llvm::Value *op : in.operands()) {
          if (auto *g = tls_in(op, 0)) return {g, f};
          if (auto *callee = llvm::dyn_cast<llvm::Function>(op)) todo.push_back(callee);
        }
  }
  return {nullptr, nullptr};
}

}  // namespace

std::string thread_local_error(const llvm::Function &root, const std::string &element) {
  auto [g, f] = find_thread_local(root);
  if (!g) return "";
  return "JIT: element " + element + ": its bitcode uses thread-local storage ('" + g->getName().str() +
         "', in " + f->getName().str() +
         "), which code run through ORC cannot reach correctly; route that operation through a host function, "
         "or run with --no-jit";
}

llvm::PreservedAnalyses CheckThreadLocalsPass::run(llvm::Module &, llvm::ModuleAnalysisManager &) {
  error_.clear();
  for (auto &[element, f] : code_) {
    error_ = thread_local_error(*f, element);
    if (!error_.empty()) break;
  }
  return llvm::PreservedAnalyses::all();
}

std::string CheckThreadLocalsPass::report() const {
  return error_.empty() ? std::to_string(code_.size()) + " functions of the elements checked, no thread-local storage"
                        : error_;
}

}  // namespace sluice
