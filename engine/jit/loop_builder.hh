// The fused loop of a segment, generated into its module after the bitcode
// is linked (bitcode_linker.hh): segment_N_step(), what the interpreter's
// InterpretedProgram::step does, unrolled over this segment (poll each
// source, take a batch from each input channel, hand it on, tick the
// timers), with a copy of each element instance's push per input port
// (instance and port as constants), emits between two elements of the
// segment as direct calls, and chains of packet stages run in one pass over
// the batch (docs/jit.md). The functions it generates are always-inline:
// the pipeline (jit_pipeline.hh) inlines them into the loop.
// LLVM's headers: include only from engine/jit.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "engine/jit/bitcode_linker.hh"

namespace sluice {

class Counter;
class SegmentRunner;

class LoopBuilder {
 public:
  LoopBuilder(llvm::Module &m, SegmentRunner &seg, const LinkedBitcode &linked);
  // Generates segment_N_step(); throws JitError.
  llvm::Function *build();

  // What runs of each element in the loop (its push copies, or its
  // classify() and batch_done() in a one-pass chain), for the checks.
  std::vector<std::pair<RuntimeElement *, llvm::Function *>> element_code() const;
  // Every function build() generated (the loop, the push copies, the
  // deliveries, emits and one-pass chains): what the verifier checks before
  // the pipeline runs.
  std::vector<llvm::Function *> generated() const;

 private:
  llvm::Type *ptr();
  llvm::Constant *address(const void *p);
  llvm::Function *support(const char *name) { return m_.getFunction(name); }
  llvm::Function *new_function(const std::string &name, llvm::FunctionType *type);
  llvm::FunctionType *batch_fn_type();
  bool in_segment(const RuntimeElement *e) const;
  std::string fn_name(const char *what, const RuntimeElement *e, int port);
  llvm::Value *batch_count(llvm::IRBuilder<> &b, llvm::Value *batch);
  void count(llvm::IRBuilder<> &b, const Counter &c, llvm::Value *n);

  llvm::Function *push_fn(RuntimeElement *e, int port);
  llvm::Function *deliver_fn(RuntimeElement *e, int port);
  llvm::Function *emit_fn(RuntimeElement *e, int port);

  // A chain of packet stages run in one pass (one_pass_fn).
  struct StageNode {
    RuntimeElement *e;
    std::vector<std::unique_ptr<StageNode>> next;  // per output; null: an exit
    llvm::Value *packets = nullptr, *bytes = nullptr;
    std::vector<llvm::Value *> exit_batch, exit_count;  // per output that is an exit
  };
  bool is_stage(const RuntimeElement *e) const;
  RuntimeElement *chain_successor(RuntimeElement *e, int port);
  std::unique_ptr<StageNode> chain_from(RuntimeElement *e, const std::map<RuntimeElement *, int> &reached);
  llvm::Function *one_pass_fn(RuntimeElement *root);

  llvm::Module &m_;
  llvm::LLVMContext &cx_;
  SegmentRunner &seg_;
  const LinkedBitcode &linked_;
  llvm::Function *step_ = nullptr;
  std::map<std::pair<RuntimeElement *, int>, llvm::Function *> push_, deliver_, emit_;
  std::map<RuntimeElement *, llvm::Function *> one_pass_;
};

}  // namespace sluice
