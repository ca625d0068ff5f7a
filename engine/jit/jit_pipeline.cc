#include "engine/jit/jit_pipeline.hh"

#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/IPO/AlwaysInliner.h>
#include <llvm/Transforms/IPO/GlobalDCE.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Scalar/EarlyCSE.h>
#include <llvm/Transforms/Scalar/SROA.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>

#include "engine/jit/jit_common.hh"
#include "engine/jit/passes/check_file_locals.hh"
#include "engine/jit/passes/check_thread_locals.hh"
#include "engine/jit/passes/inline_filter_programs.hh"
#include "engine/jit/passes/specialize_constant_this.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/segment.hh"

namespace sluice {

namespace {

// The passes of LLVM's own that the pipeline runs, by the names it prints.
constexpr const char *kInlineLoop = "InlineLoop";
constexpr const char *kSimplify = "Simplify";
constexpr const char *kO3 = "O3";

// One pipeline's analysis managers, registered with each other. Once
// `cancel` reads true, the pass managers skip every optional pass (most of
// O3), so that a cancelled compilation ends within a pass.
struct Analyses {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassInstrumentationCallbacks pic;
  llvm::PassBuilder pb;
  Analyses(llvm::TargetMachine &tm, const std::atomic<bool> *cancel)
      : pb(&tm, llvm::PipelineTuningOptions(), std::nullopt, &pic) {
    if (cancel)
      pic.registerShouldRunOptionalPassCallback(
          [cancel](llvm::StringRef, llvm::Any) { return !cancel->load(std::memory_order_relaxed); });
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
  }
};

// Runs one pass as a pass manager does (without instrumentation): then
// what it did not preserve is invalidated. Whether it changed the module.
template <typename Pass>
bool run_pass(Pass &pass, llvm::Module &m, llvm::ModuleAnalysisManager &mam) {
  llvm::PreservedAnalyses kept = pass.run(m, mam);
  mam.invalidate(m, kept);
  return !kept.areAllPreserved();
}

// For what the passes of LLVM's own print: the module's size.
struct ModuleSize {
  size_t functions = 0, instructions = 0;
};
ModuleSize size_of(const llvm::Module &m) {
  ModuleSize s;
  for (const llvm::Function &f : m) {
    if (f.isDeclaration()) continue;
    ++s.functions;
    s.instructions += f.getInstructionCount();
  }
  return s;
}
std::string size_change(const ModuleSize &a, const ModuleSize &b) {
  return std::to_string(a.functions) + " -> " + std::to_string(b.functions) + " functions, " +
         std::to_string(a.instructions) + " -> " + std::to_string(b.instructions) + " instructions";
}

}  // namespace

const std::vector<std::string> &JitPipeline::pass_names() {
  static const std::vector<std::string> names = {
      CheckThreadLocalsPass::name().str(),      kInlineLoop,
      FoldConstantLoadsPass::name().str(),      InlineFilterProgramsPass::name().str(),
      SpecializeConstantThisPass::name().str(), kSimplify,
      kO3,                                      CheckFileLocalsPass::name().str()};
  return names;
}

void read_segment_constants(const SegmentRunner &seg, PipelineInputs &in) {
  for (RuntimeElement *e : seg.elements()) {
    std::vector<RuntimeElement::ConstantBytes> bytes;
    e->jit_constant_bytes(bytes);
    for (auto &c : bytes)
      in.constant_bytes.push_back({uint64_t(uintptr_t(c.begin)), uint64_t(uintptr_t(c.begin)) + c.size});
    if (const PcapFilter *pf = e->jit_pcap_filter()) in.filters[uint64_t(uintptr_t(pf))] = pf;
  }
}

JitPipeline::JitPipeline(llvm::TargetMachine &tm, PipelineInputs inputs, std::string print_after, int segment,
                         const std::atomic<bool> *cancel)
    : tm_(tm), in_(std::move(inputs)), print_after_(std::move(print_after)), segment_(segment), cancel_(cancel) {}

void JitPipeline::after(const llvm::Module &m, const std::string &pass, int round,
                        llvm::function_ref<std::string()> report) {
  if (!printing(pass)) return;
  llvm::raw_string_ostream os(printed_);
  os << "; segment " << segment_ << ", after " << pass;
  if (round > 0) os << " (round " << round << ")";
  os << "\n; " << pass << ": ";
  for (char c : report()) os << (c == '\n' ? ' ' : c);  // a filter's expression may span lines
  os << "\n";
  m.print(os, nullptr);
}

void JitPipeline::run(llvm::Module &m) {
  {
    // Until the loop is optimized: the generated functions inlined, then
    // rounds of specialization, all with one set of analyses.
    Analyses a(tm_, cancel_);
    CheckThreadLocalsPass thread_locals(std::move(in_.element_code));
    run_pass(thread_locals, m, a.mam);
    if (!thread_locals.error().empty()) throw JitError(thread_locals.error());
    after(m, CheckThreadLocalsPass::name().str(), 0, [&] { return thread_locals.report(); });
    // The generated functions verified now, the whole module once the
    // inlining has kept what the loop reaches (2.6K of the default probe's
    // 51K linked instructions: verifying them all took 21 ms a segment).
    std::string invalid;
    llvm::raw_string_ostream invalid_os(invalid);
    for (llvm::Function *f : in_.generated)
      if (llvm::verifyFunction(*f, &invalid_os)) throw JitError("JIT: generated code is invalid: " + invalid);

    ModuleSize before = printing(kInlineLoop) ? size_of(m) : ModuleSize{};
    llvm::ModulePassManager inline_loop;
    inline_loop.addPass(llvm::AlwaysInlinerPass());
    inline_loop.addPass(llvm::GlobalDCEPass());
    llvm::FunctionPassManager simplify;
    simplify.addPass(llvm::SROAPass(llvm::SROAOptions::ModifyCFG));
    simplify.addPass(llvm::EarlyCSEPass(true));
    simplify.addPass(llvm::InstCombinePass());
    simplify.addPass(llvm::SimplifyCFGPass());
    inline_loop.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(simplify)));
    inline_loop.run(m, a.mam);
    if (llvm::verifyModule(m, &invalid_os)) throw JitError("JIT: generated module is invalid: " + invalid);
    after(m, kInlineLoop, 0, [&] {
      return "AlwaysInliner, GlobalDCE, then SROA, EarlyCSE, InstCombine, SimplifyCFG: " +
             size_change(before, size_of(m));
    });

    FoldConstantLoadsPass fold(std::move(in_.constant_bytes));
    InlineFilterProgramsPass filters(std::move(in_.filters), in_.filter_match_name);
    SpecializeConstantThisPass constant_this;
    for (int round = 1; round <= 8; ++round) {
      check_cancelled(cancel_);
      bool changed = run_pass(fold, m, a.mam);
      after(m, FoldConstantLoadsPass::name().str(), round, [&] { return fold.report(); });
      changed |= run_pass(filters, m, a.mam);
      after(m, InlineFilterProgramsPass::name().str(), round, [&] { return filters.report(); });
      changed |= run_pass(constant_this, m, a.mam);
      after(m, SpecializeConstantThisPass::name().str(), round, [&] { return constant_this.report(); });
      if (!changed) break;
      before = printing(kSimplify) ? size_of(m) : ModuleSize{};
      llvm::FunctionPassManager again;
      again.addPass(llvm::EarlyCSEPass(true));
      again.addPass(llvm::InstCombinePass());
      again.addPass(llvm::SimplifyCFGPass());
      llvm::ModulePassManager mpm;
      mpm.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(again)));
      mpm.run(m, a.mam);
      after(m, kSimplify, round,
            [&] { return "EarlyCSE, InstCombine, SimplifyCFG: " + size_change(before, size_of(m)); });
    }
  }
  check_cancelled(cancel_);
  {
    Analyses a(tm_, cancel_);
    ModuleSize before = printing(kO3) ? size_of(m) : ModuleSize{};
    a.pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, a.mam);
    check_cancelled(cancel_);  // O3 skipped its passes: the module is not what a loop may run
    after(m, kO3, 0, [&] { return "LLVM's O3 pipeline: " + size_change(before, size_of(m)); });
    CheckFileLocalsPass file_locals;
    run_pass(file_locals, m, a.mam);
    if (!file_locals.error().empty()) throw JitError(file_locals.error());
    after(m, CheckFileLocalsPass::name().str(), 0, [&] { return file_locals.report(); });
  }
}

}  // namespace sluice
