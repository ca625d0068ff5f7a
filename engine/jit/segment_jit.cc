#include "engine/jit/segment_jit.hh"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "engine/jit/bitcode_index.hh"
#include "engine/jit/bitcode_linker.hh"
#include "engine/packet/bpf_jit.hh"
#include "engine/jit/element_bitcode.hh"
#include "engine/jit/jit_common.hh"
#include "engine/jit/jit_pipeline.hh"
#include "engine/jit/loop_builder.hh"
#include "engine/jit/perf_jitdump.hh"
#include "engine/jit/passes/check_thread_locals.hh"
#include "engine/runtime/element_runtime.hh"

namespace sluice {

namespace {

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

class FusedProgram final : public SegmentProgram {
 public:
  FusedProgram(std::unique_ptr<llvm::orc::LLJIT> jit, bool (*step)()) : jit_(std::move(jit)), step_(step) {}
  SLUICE_CALLS_JIT_CODE bool step(SegmentRunner &) override { return step_(); }
  const char *kind() const override { return "jit"; }

 private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;  // owns the code step_ points into
  bool (*step_)();
};

// One segment's compilation: the target, the linked bitcode, the loop, the
// passes (jit_pipeline.hh), then ORC.
class SegmentCompilation {
 public:
  SegmentCompilation(SegmentRunner &seg, const JitSettings &settings, const std::atomic<bool> *cancel)
      : seg_(seg), settings_(settings), cancel_(cancel) {
    cx_ = std::make_unique<llvm::LLVMContext>();
    cx_->setDiagnosticHandlerCallBack(&Diagnostics::handle, &diag_);
    m_ = std::make_unique<llvm::Module>("segment_" + std::to_string(seg.segment().id), *cx_);
  }

  ProgramCompiler::Result run(bool want_ir) {
    auto t0 = std::chrono::steady_clock::now();
    ProgramCompiler::Result r;
    try {
      make_target();
      LinkedBitcode linked = link_segment_bitcode(*m_, seg_, diag_, cancel_);
      check_cancelled(cancel_);
      LoopBuilder loop(*m_, seg_, linked);
      llvm::Function *step = loop.build();
      PipelineInputs in;
      for (auto &[e, f] : loop.element_code())
        in.element_code.push_back({element_label(*e) + " (class " + e->class_name() + ")", f});
      in.generated = loop.generated();
      read_segment_constants(seg_, in);
      in.filter_match_name = linked.filter_match_name;
      JitPipeline pipeline(*tm_, std::move(in), want_ir ? settings_.print_after : "", seg_.segment().id, cancel_);
      pipeline.run(*m_);
      check_cancelled(cancel_);  // before code generation, which cannot be cut short
      if (want_ir && !settings_.print_after.empty()) {
        r.ir = pipeline.printed();
      } else if (want_ir) {
        llvm::raw_string_ostream os(r.ir);
        m_->print(os, nullptr);
      }
      r.program = run_through_orc(step->getName().str());
    } catch (const JitError &e) {
      r.error = e.what();
    }
    r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

 private:
  void make_target() {
    const std::string &cpu = settings_.cpu;
    auto jtmb = take(llvm::orc::JITTargetMachineBuilder::detectHost(), "JIT: no target for this machine");
    if (cpu != llvm::sys::getHostCPUName()) jtmb.getFeatures() = llvm::SubtargetFeatures();  // the CPU's own features
    jtmb.setCPU(cpu);
    jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    jtmb_ = std::make_unique<llvm::orc::JITTargetMachineBuilder>(jtmb);
    tm_ = take(jtmb.createTargetMachine(), "JIT: target " + cpu);
    m_->setDataLayout(tm_->createDataLayout());
    m_->setTargetTriple(tm_->getTargetTriple().str());
  }

  std::unique_ptr<SegmentProgram> run_through_orc(const std::string &step) {
    auto jit = take(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb_).create(), "JIT: ORC");
    jit->getMainJITDylib().addGenerator(take(
        llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(jit->getDataLayout().getGlobalPrefix()),
        "JIT: host symbols"));
    if (settings_.perf) {
      add_perf_dump(*jit);
      // JITLink's graph names only the module's global symbols: the loop's
      // own functions (NAME.at, ...) become hidden globals to be named too.
      for (llvm::Function &f : *m_)
        if (!f.isDeclaration() && f.hasLocalLinkage()) {
          f.setLinkage(llvm::GlobalValue::ExternalLinkage);
          f.setVisibility(llvm::GlobalValue::HiddenVisibility);
        }
    }
    if (auto e = jit->addIRModule(llvm::orc::ThreadSafeModule(std::move(m_), std::move(cx_))))
      throw JitError("JIT: ORC: " + llvm::toString(std::move(e)));
    auto sym = take(jit->lookup(step), "JIT: ORC could not make the loop");
    return std::make_unique<FusedProgram>(std::move(jit), sym.toPtr<bool (*)()>());
  }

  // --jit-perf: the loop's code and name in perf's jitdump (perf_jitdump.hh).
  static void add_perf_dump(llvm::orc::LLJIT &jit) {
    auto *layer = llvm::dyn_cast<llvm::orc::ObjectLinkingLayer>(&jit.getObjLinkingLayer());
    if (!layer) throw JitError("JIT: --jit-perf needs ORC's JITLink layer, which LLJIT does not use on this machine");
    try {
      PerfJitDump::path();  // opened here, where an error can say so
    } catch (const std::runtime_error &e) {
      throw JitError(e.what());
    }
    layer->addPlugin(std::make_unique<PerfJitDump>());
  }

  SegmentRunner &seg_;
  const JitSettings &settings_;
  const std::atomic<bool> *cancel_;
  Diagnostics diag_;
  std::unique_ptr<llvm::LLVMContext> cx_;
  std::unique_ptr<llvm::Module> m_;
  std::unique_ptr<llvm::TargetMachine> tm_;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb_;
};

class SegmentJit final : public ProgramCompiler {
 public:
  explicit SegmentJit(JitSettings settings) : settings_(std::move(settings)) {}
  Result compile(SegmentRunner &segment, bool want_ir, const std::atomic<bool> *cancel) override {
    return SegmentCompilation(segment, settings_, cancel).run(want_ir);
  }
  std::string describe() const override { return "LLVM ORC, " + settings_.cpu; }

 private:
  JitSettings settings_;  // with the cpu resolved
};

}  // namespace

std::string default_jit_cpu() {
  init_llvm();
  auto features = llvm::sys::getHostCPUFeatures();
  for (const char *f : {"avx2", "bmi2", "fma", "movbe", "f16c", "lzcnt", "bmi"})
    if (!features.lookup(f)) return llvm::sys::getHostCPUName().str();
  return "x86-64-v3";
}

const std::vector<std::string> &jit_pass_names() { return JitPipeline::pass_names(); }

void warm_up_jit(bool bitcode) {
  init_llvm();
  if (bitcode) BitcodeIndex::get();
}

std::unique_ptr<ProgramCompiler> make_segment_jit(const JitSettings &settings, std::string *error) {
  init_llvm();
  std::string cpu = settings.cpu.empty() ? default_jit_cpu() : settings.cpu == "host" ? llvm::sys::getHostCPUName().str()
                                                                                       : settings.cpu;
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) {
    *error = "JIT: no target for this machine: " + llvm::toString(jtmb.takeError());
    return nullptr;
  }
  std::string triple_error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(jtmb->getTargetTriple().str(), triple_error);
  if (!target) {
    *error = "JIT: " + triple_error;
    return nullptr;
  }
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(jtmb->getTargetTriple().str(), cpu, ""));
  if (!sti || !sti->isCPUStringValid(cpu)) {
    *error = "JIT: unknown CPU '" + cpu + "' for --jit-cpu (try x86-64-v3, x86-64-v2, host, or a name llc -mcpu=help lists)";
    return nullptr;
  }
  const std::vector<std::string> &passes = jit_pass_names();
  if (!settings.print_after.empty() && settings.print_after != "all" &&
      std::find(passes.begin(), passes.end(), settings.print_after) == passes.end()) {
    *error = "JIT: no pass named '" + settings.print_after + "' to print the IR after; the passes:";
    for (const std::string &p : passes) *error += " " + p;
    *error += ", or all";
    return nullptr;
  }
  if (embedded_bitcode().empty()) {
    *error = "JIT: this binary embeds no element bitcode; run with --no-jit";
    return nullptr;
  }
  JitSettings resolved = settings;
  resolved.cpu = cpu;
  return std::make_unique<SegmentJit>(std::move(resolved));
}

std::string check_bitcode_stamp_for_tests(const std::string &class_name, const JitStamp &host) {
  init_llvm();
  const JitEntry *entry = RuntimeRegistry::global().find_jit(class_name);
  if (!entry) return "no JIT entry for class " + class_name;
  int file = BitcodeIndex::get().file_defining(entry->push_symbol);
  if (file < 0) return "JIT: no bitcode for class " + class_name;
  llvm::MemoryBufferRef f = BitcodeIndex::get().file(file);
  llvm::LLVMContext cx;
  auto m = llvm::parseBitcodeFile(f, cx);
  if (!m) return llvm::toString(m.takeError());
  return stamp_problem(**m, *entry, host, "class " + class_name + " (" + f.getBufferIdentifier().str() + ")");
}

std::string check_thread_locals_for_tests(const std::string &ir_text, const std::string &entry,
                                          const std::string &element) {
  llvm::LLVMContext cx;
  llvm::SMDiagnostic err;
  auto m = llvm::parseIR(llvm::MemoryBufferRef(ir_text, "test"), err, cx);
  if (!m) return "cannot parse: " + err.getMessage().str();
  llvm::Function *f = m->getFunction(entry);
  if (!f) return "no function " + entry;
  return thread_local_error(*f, element);
}

}  // namespace sluice
