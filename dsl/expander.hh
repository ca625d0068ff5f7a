// The front end's expansion step, shared by the files that do its jobs:
// expand.cc (scopes, variables, compound classes, element instances),
// requires.cc (required files and plugins), arguments.cc (arguments bound
// to their specs and typed), connections.cc (ports and stream types), and
// frontend.cc, the entry point (parse, expand, check). Internal to dsl/.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dsl/ast.hh"
#include "engine/base/diagnostics.hh"
#include "dsl/frontend.hh"
#include "dsl/literals.hh"
#include "engine/base/source.hh"
#include "engine/core/graph.hh"

namespace sluice::expansion {

namespace fs = std::filesystem;

// Parses one file of `sm` into `out`; false on syntax errors (reported).
bool parse_file(SourceManager &sm, int file, Diagnostics &diags, ast::File &out);

struct PortEnd {
  int element;
  int port;
};

// A compound instance as seen from outside: where its inputs lead and where its outputs come from.
struct CompoundInstance {
  std::string name, class_name;
  bool broken = false;  // an error inside left its ports incomplete: connections to it are not checked
  std::vector<std::vector<PortEnd>> ins, outs;
};

struct NodeRef {
  enum Kind { None, Element, Compound, Input, Output } kind = None;
  int index = -1;
  SourceRange declared;
};

struct ClassDef {
  std::shared_ptr<ast::ElementClass> def;
  struct Scope *defined_in = nullptr;
};

struct Scope {
  Scope *parent = nullptr;    // lexical parent: where the compound class was defined
  std::string prefix;         // "Meter@1/"
  CompoundInstance *compound = nullptr;  // the instance whose body this is; null at top level
  std::map<std::string, ast::Literal> vars;
  std::map<std::string, SourceRange> var_ranges;
  std::map<std::string, ClassDef> classes;
  std::map<std::string, NodeRef> names;
  std::map<std::string, int> anonymous_count;
  std::map<const ast::ElementRef *, NodeRef> declared;  // declaration endpoint -> what it made

  const ast::Literal *find_var(const std::string &n) const {
    for (const Scope *s = this; s; s = s->parent) {
      auto it = s->vars.find(n);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
  const ClassDef *find_class(const std::string &n) const {
    for (const Scope *s = this; s; s = s->parent) {
      auto it = s->classes.find(n);
      if (it != s->classes.end()) return &it->second;
    }
    return nullptr;
  }
  std::vector<std::string> visible_var_names() const {
    std::vector<std::string> out;
    for (const Scope *s = this; s; s = s->parent)
      for (auto &[k, v] : s->vars) out.push_back(k);
    out.push_back("queue");
    return out;
  }
};

// A compound inside a compound inside ...: deeper than this is refused, so
// that expansion never runs out of stack.
constexpr size_t kMaxCompoundDepth = 64;

// From syntax trees to an ElementGraph: compound classes instantiated
// (lexically scoped, recursion refused), variables substituted, anonymous
// elements named `Class@N`, arguments bound to their specs and typed,
// connections resolved through compound inputs and outputs.
class Expander {
 public:
  Expander(SourceManager &sm, Diagnostics &diags, ElementGraph &graph) : sm_(sm), diags_(diags), g_(graph) {}

  // Expands `main` (and what it requires) into the graph.
  void run(ast::File &main, const FrontendOptions &opts);

  std::set<int> incomplete_;  // elements whose ports an error left incomplete: not checked again
  int syntax_errors_ = 0;     // in required files

 private:
  // ---- expand.cc: scopes, variables, statements, compound classes, element instances ----
  // Defines and classes of the main file that nothing uses are likely typos
  // (a library file's unused classes are not: it serves many configurations).
  void warn_unused(int main_file);
  static void set_range(ast::Literal &lit, SourceRange r);
  // Substitutes $variables (except $queue, bound per lane) in a literal.
  ast::Literal substitute(const ast::Literal &lit, const Scope &scope);
  void undefined_var(const std::string &name, SourceRange r, const Scope &scope);
  // "$name" and "${name}" inside strings; "\$" is left for the converter, "$queue" for lanes.
  std::string interpolate(const ast::Literal &lit, const Scope &scope);
  void instantiate_body(std::vector<ast::Statement> &body, Scope &scope);
  static Diagnostic note(SourceRange r, std::string msg);
  void declare(const ast::ElementRef &ref, Scope &scope);
  NodeRef resolve_endpoint(const ast::ElementRef &ref, Scope &scope);
  std::vector<std::string> class_candidates(const Scope &scope, bool with_elements);
  NodeRef instantiate(const ast::ElementRef &ref, const std::string &name, Scope &scope, bool anonymous = false);
  // A separate scope object per compound instance; kept alive for the pending references.
  NodeRef instantiate_compound(const ClassDef &cd, const ast::ElementRef &ref, const std::string &name, Scope &caller);
  // Element-typed arguments (`table ft`) name elements of the same scope,
  // which may be declared anywhere in it: resolved once the scope is complete.
  void resolve_pending_refs();

  // ---- requires.cc: the files and plugins a file requires ----
  // Gathers the statements of the main file and, in place of each `require
  // "x.pipe"`, those of x.pipe (once each). `require "x.so"` loads a plugin.
  void collect_requires(ast::File &file, std::vector<ast::Statement> &out);
  // Where packaged plugins are installed: SLUICE_PLUGIN_DIR_FROM_BIN (set by
  // the build: "../lib/x86_64-linux-gnu/sluice/plugins" under /usr) from the
  // directory of the running executable, so an unpacked root works too.
  static fs::path installed_plugin_dir();
  // `p` is absolute: dlopen takes a name without a slash from the library
  // search path (LD_LIBRARY_PATH, the cache), not from the file checked.
  void load_plugin(const fs::path &p, SourceRange where);

  // ---- arguments.cc: arguments bound to their specs and typed ----
  void bind_args(int index, const ast::ElementRef &ref, Scope &scope);
  bool poisoned(const ast::Literal &lit) const;
  void check_value(const BoundArg &b, int queue);
  // A problem a validator placed inside the value (a filter expression's bad
  // token) is shown at its column when the literal is a plain string, whose
  // bytes are the value's: no escapes, no $variables. Otherwise: the literal.
  SourceRange problem_range(const ast::Literal &lit, const std::string &value, const LiteralProblem &p) const;

  // ---- connections.cc: ports, compound ends, stream types ----
  std::string describe(const NodeRef &n) const;
  // Resolves the port of an endpoint: explicit [n] or [name], else 0.
  bool port_index(const NodeRef &n, const ast::PortRef &p, bool output, int &index);
  // The real element ports behind port `port` of a node: the element's own,
  // or for a compound, the inner ports its input or output leads to.
  std::vector<PortEnd> ends_of(const NodeRef &n, int port, bool output, SourceRange where);
  // A connection dropped for an error already reported leaves its ends
  // incomplete; their unconnected ports are then not reported again.
  void taint(const NodeRef &n);
  void connect(const NodeRef &from, const ast::ElementRef &fref, const NodeRef &to, const ast::ElementRef &tref,
               SourceRange arrow, Scope &scope);
  void connect_checked(const NodeRef &from, const ast::ElementRef &fref, const NodeRef &to, const ast::ElementRef &tref,
                       SourceRange arrow, Scope &scope);

  // ---- state ----
  struct PendingRef {
    int element, arg;
    Scope *scope;
  };

  SourceManager &sm_;
  Diagnostics &diags_;
  ElementGraph &g_;
  FrontendOptions opts_;
  Scope top_;
  std::set<std::string> overridden_, required_;
  std::set<std::pair<int, uint32_t>> poisoned_;  // literals already reported as undefined
  std::vector<std::unique_ptr<CompoundInstance>> compounds_;
  std::vector<std::unique_ptr<Scope>> scopes_;
  std::vector<const ast::ElementClass *> stack_;
  std::vector<SourceRange> context_;
  std::vector<PendingRef> pending_refs_;
  std::set<const ast::Literal *> used_vars_;
  std::set<const ast::ElementClass *> used_classes_;
};

}  // namespace sluice::expansion
