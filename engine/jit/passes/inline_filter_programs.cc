#include "engine/jit/passes/inline_filter_programs.hh"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>

#include "engine/packet/bpf_ir.hh"
#include "engine/jit/jit_common.hh"
#include "engine/packet/pcap_filter.hh"

namespace sluice {

llvm::PreservedAnalyses InlineFilterProgramsPass::run(llvm::Module &m, llvm::ModuleAnalysisManager &) {
  replaced_ = 0;
  emitted_.clear();
  llvm::Function *match_fn = m.getFunction(match_name_);
  if (!match_fn) return llvm::PreservedAnalyses::all();
  const llvm::DataLayout &dl = m.getDataLayout();
  for (llvm::Function &f : m) {
    if (f.isDeclaration()) continue;
    std::vector<llvm::Instruction *> dead;
    for (llvm::BasicBlock &bb : f)
      for (llvm::Instruction &in : bb) {
        auto *call = llvm::dyn_cast<llvm::CallInst>(&in);
        if (!call || call->getCalledFunction() != match_fn) continue;
        auto a = constant_address(call->getArgOperand(0), dl);
        auto it = a ? filters_.find(*a) : filters_.end();
        if (it == filters_.end()) continue;
        llvm::Function *&program = programs_[it->second];
        if (!program) {
          program = emit_bpf_function(m, "filter." + sanitize(it->second->expression()), it->second->insns(),
                                      it->second->insn_count());
          program->setLinkage(llvm::GlobalValue::InternalLinkage);
          emitted_.push_back(it->second->expression());
        }
        llvm::IRBuilder<> b(call);
        // matches(data, caplen, wirelen); the program takes (packet, wirelen, caplen)
        llvm::Value *len =
            b.CreateCall(program, {call->getArgOperand(1), call->getArgOperand(3), call->getArgOperand(2)});
        call->replaceAllUsesWith(b.CreateICmpNE(len, b.getInt32(0)));
        dead.push_back(call);
      }
    for (llvm::Instruction *i : dead) i->eraseFromParent();
    replaced_ += dead.size();
  }
  if (!replaced_) return llvm::PreservedAnalyses::all();
  // Calls replaced and a function added; no block changed.
  llvm::PreservedAnalyses kept;
  kept.preserveSet<llvm::CFGAnalyses>();
  kept.preserve<llvm::FunctionAnalysisManagerModuleProxy>();
  return kept;
}

std::string InlineFilterProgramsPass::report() const {
  std::string r =
      std::to_string(replaced_) + (replaced_ == 1 ? " call" : " calls") + " of PcapFilter::matches replaced";
  for (size_t i = 0; i < emitted_.size(); ++i) r += (i ? ", '" : "; the program of '") + emitted_[i] + "'";
  if (!emitted_.empty()) r += " emitted as IR";
  return r;
}

}  // namespace sluice
