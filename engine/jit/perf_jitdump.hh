#pragma once
// perf's view of the fused loops (`sluice run --jit-perf`): a jitdump, the
// file `perf inject --jit` reads to give code ORC made a name and its bytes,
// so that perf report names a loop and perf annotate shows its instructions.
//
// Written here rather than by LLVM's PerfSupportPlugin: LLVM 19's leaves
// the header's flags field unset (whatever the stack held), and perf 6.1
// refuses a dump with flags it does not know ("jitdump file contains invalid
// or unsupported flags"). The format: tools/perf/util/jitdump.h in Linux;
// the header and JIT_CODE_LOAD records only.
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>

#include <string>

namespace sluice {

// One per ObjectLinkingLayer; all write the process's one dump,
// $JITDUMPDIR/jit-PID.dump (else /tmp/jit-PID.dump), opened by the first.
class PerfJitDump final : public llvm::orc::ObjectLinkingLayer::Plugin {
 public:
  // The dump's path; an error (the dump cannot be made) throws.
  static std::string path();

  void modifyPassConfig(llvm::orc::MaterializationResponsibility &, llvm::jitlink::LinkGraph &,
                        llvm::jitlink::PassConfiguration &config) override;
  llvm::Error notifyFailed(llvm::orc::MaterializationResponsibility &) override { return llvm::Error::success(); }
  llvm::Error notifyRemovingResources(llvm::orc::JITDylib &, llvm::orc::ResourceKey) override {
    return llvm::Error::success();
  }
  void notifyTransferringResources(llvm::orc::JITDylib &, llvm::orc::ResourceKey, llvm::orc::ResourceKey) override {}
};

}  // namespace sluice
