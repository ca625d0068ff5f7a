#include "engine/jit/jit_common.hh"

#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/Operator.h>
#include <llvm/Support/raw_ostream.h>

#include <cctype>

#include "engine/runtime/element_runtime.hh"

namespace sluice {

void Diagnostics::handle(const llvm::DiagnosticInfo *d, void *self) {
  auto *diag = static_cast<Diagnostics *>(self);
  if (d->getSeverity() != llvm::DS_Error) return;
  llvm::raw_string_ostream os(diag->text);
  llvm::DiagnosticPrinterRawOStream printer(os);
  d->print(printer);
  os << "\n";
}

llvm::Constant *address_constant(llvm::LLVMContext &cx, const void *p) {
  return llvm::ConstantExpr::getIntToPtr(llvm::ConstantInt::get(llvm::Type::getInt64Ty(cx), uint64_t(uintptr_t(p))),
                                         llvm::PointerType::get(cx, 0));
}

std::optional<uint64_t> constant_address(const llvm::Value *p, const llvm::DataLayout &dl) {
  llvm::APInt offset(64, 0);
  const llvm::Value *base = p->stripAndAccumulateConstantOffsets(dl, offset, /*AllowNonInbounds=*/true);
  auto *ce = llvm::dyn_cast<llvm::ConstantExpr>(base);
  if (!ce || ce->getOpcode() != llvm::Instruction::IntToPtr) return std::nullopt;
  auto *ci = llvm::dyn_cast<llvm::ConstantInt>(ce->getOperand(0));
  if (!ci) return std::nullopt;
  return ci->getZExtValue() + offset.getZExtValue();
}

std::string sanitize(const std::string &s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  return o;
}

std::string element_label(const RuntimeElement &e) {
  return "'" + e.name() + "'" + (e.lane() >= 0 ? " (lane " + std::to_string(e.lane()) + ")" : "");
}

}  // namespace sluice
