// The elements' LLVM bitcode, built with clang 19 from the same sources as
// their native code (CMakeLists.txt, sluice_element_bitcode) and embedded in
// the binary, so that it cannot go missing or be found stale on disk.
#pragma once
#include <cstddef>
#include <string_view>
#include <vector>

namespace sluice {

struct EmbeddedBitcode {
  const char *source;  // the source file it was compiled from, e.g. "elements/packet/filter.cc"
  const char *begin, *end;
  std::string_view bytes() const { return {begin, size_t(end - begin)}; }
};

const std::vector<EmbeddedBitcode> &embedded_bitcode();

}  // namespace sluice
