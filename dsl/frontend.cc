// The front end's entry point (frontend.hh): a .pipe file parsed, expanded
// (dsl/expander.hh) and checked (dsl/check.hh) into an ElementGraph; and the
// $queue binding the lanes use.
#include "dsl/frontend.hh"

#include "dsl/check.hh"
#include "dsl/expander.hh"

namespace sluice {

namespace {

bool finish(int main_file, const FrontendOptions &opts, SourceManager &sm, Diagnostics &diags, ElementGraph &out) {
  ast::File file;
  bool syntax_ok = expansion::parse_file(sm, main_file, diags, file);
  expansion::Expander ex(sm, diags, out);
  ex.run(file, opts);
  check_graph(out, diags, ex.incomplete_, syntax_ok && ex.syntax_errors_ == 0);
  return !diags.has_errors();
}

}  // namespace

ast::Literal bind_queue(const ast::Literal &lit, int queue) {
  switch (lit.kind) {
    case ast::LiteralKind::Variable:
      if (lit.text == "queue") {
        ast::Literal n = lit;
        n.kind = ast::LiteralKind::Number;
        n.text = std::to_string(queue);
        return n;
      }
      return lit;
    case ast::LiteralKind::String: {
      ast::Literal n = lit;
      size_t pos;
      while ((pos = n.text.find("${queue}")) != std::string::npos) n.text.replace(pos, 8, std::to_string(queue));
      return n;
    }
    case ast::LiteralKind::List: {
      ast::Literal n = lit;
      for (auto &i : n.items) i = bind_queue(i, queue);
      return n;
    }
    default:
      return lit;
  }
}

bool uses_queue(const ast::Literal &lit) {
  if (lit.kind == ast::LiteralKind::Variable) return lit.text == "queue";
  if (lit.kind == ast::LiteralKind::String) return lit.text.find("${queue}") != std::string::npos;
  for (auto &i : lit.items)
    if (uses_queue(i)) return true;
  return false;
}

bool load_pipe_text(const std::string &name, const std::string &text, const FrontendOptions &opts, SourceManager &sm,
                    Diagnostics &diags, ElementGraph &out) {
  return finish(sm.add(name, text), opts, sm, diags, out);
}

bool load_pipe_file(const std::string &path, const FrontendOptions &opts, SourceManager &sm, Diagnostics &diags,
                    ElementGraph &out) {
  std::string text, error;
  if (!read_user_file(path, kMaxPipeFileBytes, text, &error)) {
    diags.error(SourceRange{}, error);
    return false;
  }
  return load_pipe_text(path, text, opts, sm, diags, out);
}

}  // namespace sluice
