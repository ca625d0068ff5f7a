// A .pipe text compiled (by the compile driver) into the graph a Runtime
// runs or a hot reload switches to, for tests that run graphs in this process.
#pragma once
#include <memory>
#include <string>

#include "engine/driver/compile_pipe.hh"

namespace sluice::test {

// Null when it does not compile; *diagnostics gets what was printed, with
// `name` as the file's name.
inline std::shared_ptr<CompiledPipe> compile_graph(const std::string &text, std::string *diagnostics,
                                                   const std::string &name = "test.pipe") {
  std::shared_ptr<CompiledPipe> c = compile_pipe_text(name, text);
  *diagnostics = c->printed();
  return c->ok ? c : nullptr;
}

}  // namespace sluice::test
