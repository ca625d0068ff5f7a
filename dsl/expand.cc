// Expansion: from syntax trees to an ElementGraph. Compound classes are
// instantiated (lexically scoped, recursion refused), variables substituted,
// anonymous elements named `Class@N`, arguments bound to their specs and
// typed, connections resolved through compound inputs and outputs.
#include <dlfcn.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "dsl/check.hh"
#include "dsl/frontend.hh"
#include "dsl/lexer.hh"
#include "dsl/literals.hh"

namespace sluice {

namespace fs = std::filesystem;

namespace {

// Parses one file of `sm` into `out`; false on syntax errors (reported).
bool parse_file(SourceManager &sm, int file, Diagnostics &diags, ast::File &out) {
  Lexer lexer(sm, file, diags);
  out.file_index = file;
  PipeParser parser(lexer, diags, out);
  int before = diags.error_count();
  parser.parse();
  return diags.error_count() == before;
}


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

class Expander {
public:
  Expander(SourceManager &sm, Diagnostics &diags, ElementGraph &graph) : sm_(sm), diags_(diags), g_(graph) {}

  void run(ast::File &main, const FrontendOptions &opts) {
    opts_ = opts;
    // --define values are read as literals from a pseudo-file so that errors in them have a location
    std::string cmdline;
    for (auto &[name, text] : opts.defines) cmdline += name + "=" + text + "\n";
    int cmd_file = opts.defines.empty() ? -1 : sm_.add("<command line>", cmdline);
    uint32_t off = 0;
    for (auto &[name, text] : opts.defines) {
      off += static_cast<uint32_t>(name.size() + 1);
      ast::Literal lit;
      if (!lex_single_literal(text, lit)) {  // anything else is taken as a string
        lit = ast::Literal{};
        lit.kind = ast::LiteralKind::String;
        lit.text = text;
      }
      SourceRange r{{cmd_file, off}, {cmd_file, off + static_cast<uint32_t>(text.size())}};
      set_range(lit, r);
      top_.vars[name] = lit;
      top_.var_ranges[name] = r;
      overridden_.insert(name);
      off += static_cast<uint32_t>(text.size() + 1);
    }
    std::vector<ast::Statement> statements;
    collect_requires(main, statements);
    instantiate_body(statements, top_);
    resolve_pending_refs();
    warn_unused(main.file_index);
  }

  // Defines and classes of the main file that nothing uses are likely typos
  // (a library file's unused classes are not: it serves many configurations).
  void warn_unused(int main_file) {
    for (auto &[name, lit] : top_.vars) {
      SourceRange r = top_.var_ranges[name];
      if (r.begin.file == main_file && !used_vars_.count(&lit))
        diags_.warning(r, "variable '$" + name + "' is defined but never used");
    }
    for (auto &[name, cd] : top_.classes)
      if (cd.def->name_range.begin.file == main_file && !used_classes_.count(cd.def.get()))
        diags_.warning(cd.def->name_range, "elementclass '" + name + "' is defined but never used");
  }

private:
  static void set_range(ast::Literal &lit, SourceRange r) {
    lit.range = r;
    for (auto &i : lit.items) set_range(i, r);
  }

  // Gathers the statements of the main file and, in place of each `require
  // "x.pipe"`, those of x.pipe (once each). `require "x.so"` loads a plugin.
  void collect_requires(ast::File &file, std::vector<ast::Statement> &out) {
    for (auto &st : file.statements) {
      if (st.kind != ast::Statement::Kind::Require) {
        out.push_back(std::move(st));
        continue;
      }
      const std::string &req = st.require.path;
      if (!opts_.allow_require) {
        diags_.error(st.require.range, "'require' is disabled here");
        continue;
      }
      fs::path base = fs::path(sm_.file(file.file_index).name).parent_path();
      fs::path p = fs::path(req).is_absolute() ? fs::path(req) : base / req;
      std::error_code ec;
      // A plugin named without a directory that is not beside the file: the
      // installed plugin directory's (the sluice-plugins package).
      if (!fs::exists(p, ec) && req.find('/') == std::string::npos && fs::path(req).extension() == ".so")
        if (fs::path installed = installed_plugin_dir() / req; fs::exists(installed, ec)) p = installed;
      if (!fs::exists(p, ec)) {
        diags_.error(st.require.range, "cannot find required file '" + req + "'",
                     "paths are relative to the file that requires them (" + (base.empty() ? std::string(".") : base.string()) + ")");
        continue;
      }
      if (!fs::is_regular_file(p, ec)) {
        diags_.error(st.require.range, "'" + req + "' is not a regular file");
        continue;
      }
      // what was checked is what is opened: the file's absolute path, links resolved
      fs::path canon = fs::canonical(p, ec);
      if (ec) {
        diags_.error(st.require.range, "cannot read required file '" + req + "': " + ec.message());
        continue;
      }
      if (p.extension() == ".so") {
        load_plugin(canon, st.require.range);
        continue;
      }
      if (!required_.insert(canon.string()).second) continue;  // already included
      std::string text, error;
      if (!read_user_file(p.string(), kMaxPipeFileBytes, text, &error)) {
        diags_.error(st.require.range, error);
        continue;
      }
      int f = sm_.add(p.string(), std::move(text));
      ast::File sub;
      if (!parse_file(sm_, f, diags_, sub)) ++syntax_errors_;
      collect_requires(sub, out);
    }
  }

  // Where packaged plugins are installed: SLUICE_PLUGIN_DIR_FROM_BIN (set by
  // the build: "../lib/x86_64-linux-gnu/sluice/plugins" under /usr) from the
  // directory of the running executable, so an unpacked root works too.
  static fs::path installed_plugin_dir() {
#ifdef SLUICE_PLUGIN_DIR_FROM_BIN
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) return (exe.parent_path() / SLUICE_PLUGIN_DIR_FROM_BIN).lexically_normal();
#endif
    return {};
  }

  // `p` is absolute: dlopen takes a name without a slash from the library
  // search path (LD_LIBRARY_PATH, the cache), not from the file checked.
  void load_plugin(const fs::path &p, SourceRange where) {
    if (std::string why = untrusted_as_root(p.string()); !why.empty()) {
      diags_.error(where, "refusing to load plugin '" + p.string() + "' as root: " + why,
                   "a plugin runs as this process: it and its directories must be root's and writable only by root");
      return;
    }
    ElementRegistry::global().take_refused();
    void *h = dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      diags_.error(where, std::string("cannot load plugin: ") + dlerror());
      return;
    }
    for (const std::string &name : ElementRegistry::global().take_refused())
      diags_.error(where, "plugin '" + p.string() + "' defines element '" + name + "', a name taken already",
                   "an element class is defined once: built in, or by one plugin; rename the plugin's");
    using AbiFn = int (*)();
    auto abi = reinterpret_cast<AbiFn>(dlsym(h, "sluice_plugin_abi"));
    if (!abi) {
      diags_.error(where, "'" + p.string() + "' is not a Sluice plugin (it has no sluice_plugin_abi symbol)");
      return;
    }
    if (abi() != kPluginAbi)
      diags_.error(where, "plugin '" + p.string() + "' was built for ABI " + std::to_string(abi()) +
                              ", this sluice has ABI " + std::to_string(kPluginAbi),
                   "rebuild the plugin against this version of Sluice");
  }

  // ---- variables ----

  // Substitutes $variables (except $queue, bound per lane) in a literal.
  ast::Literal substitute(const ast::Literal &lit, const Scope &scope) {
    switch (lit.kind) {
      case ast::LiteralKind::Variable: {
        if (lit.text == "queue") return lit;
        if (const ast::Literal *v = scope.find_var(lit.text)) {
          used_vars_.insert(v);
          return *v;
        }
        undefined_var(lit.text, lit.range, scope);
        ast::Literal bad = lit;
        bad.kind = ast::LiteralKind::Word;
        bad.text = "";
        poisoned_.insert(std::make_pair(lit.range.begin.file, lit.range.begin.offset));
        return bad;
      }
      case ast::LiteralKind::String: {
        ast::Literal out = lit;
        out.text = interpolate(lit, scope);
        return out;
      }
      case ast::LiteralKind::List: {
        ast::Literal out = lit;
        for (auto &i : out.items) i = substitute(i, scope);
        return out;
      }
      default:
        return lit;
    }
  }

  void undefined_var(const std::string &name, SourceRange r, const Scope &scope) {
    std::string m = closest_match(name, scope.visible_var_names());
    diags_.error(r, "undefined variable '$" + name + "'",
                 m.empty() ? "define it with `define $" + name + " VALUE;` or --define " + name + "=VALUE"
                           : "did you mean '$" + m + "'?");
  }

  // "$name" and "${name}" inside strings; "\$" is left for the converter, "$queue" for lanes.
  std::string interpolate(const ast::Literal &lit, const Scope &scope) {
    const std::string &s = lit.text;
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '$') { out += "\\$"; ++i; continue; }
      if (s[i] != '$') { out += s[i]; continue; }
      bool braced = i + 1 < s.size() && s[i + 1] == '{';
      size_t b = i + (braced ? 2 : 1), e = b;
      while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
      if (e == b || (braced && (e >= s.size() || s[e] != '}'))) { out += s[i]; continue; }
      std::string name = s.substr(b, e - b);
      size_t next = braced ? e + 1 : e;
      if (name == "queue") {
        out += "${queue}";
      } else if (const ast::Literal *v = scope.find_var(name)) {
        used_vars_.insert(v);
        out += v->text;
      } else {
        undefined_var(name, lit.range, scope);
      }
      i = next - 1;
    }
    return out;
  }

  // ---- statements ----

  void instantiate_body(std::vector<ast::Statement> &body, Scope &scope) {
    // 1. classes and defines are visible in the whole scope, whatever their order
    for (auto &st : body) {
      if (st.kind == ast::Statement::Kind::ElementClass) {
        auto &ec = st.element_class;
        if (ElementRegistry::global().find(ec->name)) {
          diags_.error(ec->name_range, "elementclass '" + ec->name + "' has the name of a built-in element");
          continue;
        }
        for (auto &inner : ec->body)
          if (inner.kind == ast::Statement::Kind::Require)
            diags_.error(inner.range, "'require' is only allowed at the top level of a file");
        auto [it, fresh] = scope.classes.emplace(ec->name, ClassDef{ec, &scope});
        if (!fresh) {
          diags_.error(ec->name_range, "redefinition of elementclass '" + ec->name + "'")
              .notes.push_back(note(it->second.def->name_range, "previous definition is here"));
        }
      } else if (st.kind == ast::Statement::Kind::Define) {
        auto &d = st.define;
        if (&scope == &top_ && overridden_.count(d.name)) continue;  // --define wins
        if (scope.vars.count(d.name)) {
          diags_.error(d.range, "redefinition of variable '$" + d.name + "'")
              .notes.push_back(note(scope.var_ranges[d.name], "previous definition is here"));
          continue;
        }
        if (d.name == "queue") {
          diags_.error(d.range, "'$queue' is reserved: it is the queue of the lane");
          continue;
        }
        scope.vars[d.name] = substitute(d.value, scope);
        scope.var_ranges[d.name] = d.range;
      }
    }
    // 2. declarations, so that connections and references may come before them
    for (auto &st : body) {
      if (st.kind != ast::Statement::Kind::Connection) continue;
      for (auto &hop : st.connection.hops)
        for (auto &ref : hop)
          if (ref.declares) declare(ref, scope);
    }
    // 3. connections
    for (auto &st : body) {
      if (st.kind != ast::Statement::Kind::Connection) continue;
      auto &c = st.connection;
      std::vector<std::vector<std::pair<NodeRef, const ast::ElementRef *>>> hops;
      for (auto &hop : c.hops) {
        hops.emplace_back();
        for (auto &ref : hop) hops.back().emplace_back(resolve_endpoint(ref, scope), &ref);
      }
      for (size_t h = 0; h + 1 < hops.size(); ++h)
        for (auto &[from, fref] : hops[h])
          for (auto &[to, tref] : hops[h + 1]) connect(from, *fref, to, *tref, c.arrows[h], scope);
    }
  }

  static Diagnostic note(SourceRange r, std::string msg) {
    return Diagnostic{Severity::Note, r, std::move(msg), {}, {}};
  }

  void declare(const ast::ElementRef &ref, Scope &scope) {
    if (ref.name == "input" || ref.name == "output") return;
    auto prev = scope.names.find(ref.name);
    if (prev != scope.names.end()) {
      diags_.error(ref.name_range, "redefinition of element '" + ref.name + "'")
          .notes.push_back(note(prev->second.declared, "previous declaration is here"));
      scope.declared[&ref] = prev->second;
      return;
    }
    NodeRef n = instantiate(ref, ref.name, scope);
    n.declared = ref.name_range;
    scope.names[ref.name] = n;
    scope.declared[&ref] = n;
  }

  NodeRef resolve_endpoint(const ast::ElementRef &ref, Scope &scope) {
    if (ref.declares) return scope.declared[&ref];
    if (ref.name == "input" || ref.name == "output") {
      if (!scope.compound) {
        diags_.error(ref.name_range, "'" + ref.name + "' is only meaningful inside an elementclass");
        return {};
      }
      return NodeRef{ref.name == "input" ? NodeRef::Input : NodeRef::Output, -1, ref.name_range};
    }
    if (!ref.has_args && !ref.shared) {
      auto it = scope.names.find(ref.name);
      if (it != scope.names.end()) return it->second;
    }
    // an anonymous instance: Class or Class(args)
    int &count = scope.anonymous_count[ref.class_name.empty() ? ref.name : ref.class_name];
    std::string name = (ref.class_name.empty() ? ref.name : ref.class_name) + "@" + std::to_string(++count);
    return instantiate(ref, name, scope, /*anonymous=*/true);
  }

  std::vector<std::string> class_candidates(const Scope &scope, bool with_elements) {
    std::vector<std::string> c = ElementRegistry::global().names();
    for (const Scope *s = &scope; s; s = s->parent)
      for (auto &[k, v] : s->classes) c.push_back(k);
    if (with_elements)
      for (auto &[k, v] : scope.names) c.push_back(k);
    return c;
  }

  NodeRef instantiate(const ast::ElementRef &ref, const std::string &name, Scope &scope, bool anonymous = false) {
    const std::string &cls = ref.class_name.empty() ? ref.name : ref.class_name;
    SourceRange cls_range = ref.class_name.empty() ? ref.name_range : ref.class_range;
    if (const ClassDef *cd = scope.find_class(cls)) {
      used_classes_.insert(cd->def.get());
      return instantiate_compound(*cd, ref, name, scope);
    }
    const ElementSpec *spec = ElementRegistry::global().find(cls);
    if (!spec) {
      bool bare_ref = anonymous && !ref.has_args && !ref.shared;
      std::string m = closest_match(cls, class_candidates(scope, bare_ref));
      diags_.error(cls_range, bare_ref ? "unknown element or class '" + cls + "'" : "unknown element class '" + cls + "'",
                   m.empty() ? "`sluice elements` lists the element classes" : "did you mean '" + m + "'?");
      return {};
    }
    Element e;
    e.name = scope.prefix + name;
    e.spec = spec;
    e.shared = ref.shared;
    e.range = ref.declares ? ref.name_range : cls_range;
    e.context = context_;
    int index = static_cast<int>(g_.elements.size());
    g_.elements.push_back(std::move(e));
    bind_args(index, ref, scope);
    return NodeRef{NodeRef::Element, index, ref.name_range};
  }

  void bind_args(int index, const ast::ElementRef &ref, Scope &scope) {
    const ElementSpec &spec = *g_.elements[index].spec;
    std::vector<BoundArg> bound(spec.args.size());
    std::vector<const ast::Arg *> given(spec.args.size(), nullptr);
    size_t next_positional = 0;
    std::vector<std::string> arg_names;
    for (auto &a : spec.args) arg_names.push_back(a.name);
    for (const ast::Arg &arg : ref.args) {
      int slot = -1;
      if (!arg.keyword.empty()) {
        for (size_t i = 0; i < spec.args.size(); ++i)
          if (spec.args[i].name == arg.keyword) slot = static_cast<int>(i);
        if (slot < 0) {
          std::string m = closest_match(arg.keyword, arg_names);
          diags_.error(arg.keyword_range, "unknown argument '" + arg.keyword + "' for " + spec.name,
                       m.empty() ? "`sluice elements " + spec.name + "` lists its arguments" : "did you mean '" + m + "'?");
          continue;
        }
      } else {
        while (next_positional < spec.args.size() &&
               (!spec.args[next_positional].positional || given[next_positional]))
          ++next_positional;
        if (next_positional >= spec.args.size()) {
          diags_.error(arg.range, "too many positional arguments for " + spec.name,
                       "name the argument, e.g. " + spec.name + "(" + (spec.args.empty() ? std::string("") : spec.args[0].name + " ...") + ")");
          continue;
        }
        slot = static_cast<int>(next_positional++);
      }
      if (given[slot]) {
        diags_.error(arg.keyword.empty() ? arg.range : arg.keyword_range,
                     "duplicate argument '" + spec.args[slot].name + "' for " + spec.name)
            .notes.push_back(note(given[slot]->range, "first given here"));
        continue;
      }
      given[slot] = &arg;
      bound[slot].spec = &spec.args[slot];
      bound[slot].literal = substitute(arg.value, scope);
    }
    for (size_t i = 0; i < spec.args.size(); ++i) {
      const ArgSpec &as = spec.args[i];
      bound[i].spec = &as;
      if (given[i]) continue;
      if (as.required) {
        SourceRange where = ref.has_args ? ref.args_range : ref.class_range.valid() ? ref.class_range : ref.name_range;
        diags_.error(where, "missing argument '" + as.name + "' for " + spec.name,
                     "add `" + as.name + " VALUE` (" + as.type_text() + ")");
        continue;
      }
      if (as.default_text.empty()) continue;  // optional, no default: absent
      ast::Literal lit;
      if (lex_single_literal(as.default_text, lit)) {
        bound[i].literal = lit;
        bound[i].from_default = true;
      }
    }
    // type-check now ($queue as 0) so that errors are reported once, lanes or not
    for (size_t i = 0; i < bound.size(); ++i) {
      if (!given[i] || (bound[i].literal.kind == ast::LiteralKind::Word && bound[i].literal.text.empty())) continue;
      if (spec.args[i].type == ArgType::Element) {
        pending_refs_.push_back({index, static_cast<int>(i), &scope});
      }
      if (poisoned(bound[i].literal)) continue;
      check_value(bound[i], 0);
    }
    g_.elements[index].args = std::move(bound);
  }

  bool poisoned(const ast::Literal &lit) const {
    return poisoned_.count(std::make_pair(lit.range.begin.file, lit.range.begin.offset)) > 0;
  }

  void check_value(const BoundArg &b, int queue) {
    Value v;
    LiteralProblem p;
    ast::Literal lit = bind_queue(b.literal, queue);
    if (!convert_literal(lit, *b.spec, v, p)) diags_.error(problem_range(b.literal, lit.text, p), p.message, p.hint);
  }

  // A problem a validator placed inside the value (a filter expression's bad
  // token) is shown at its column when the literal is a plain string, whose
  // bytes are the value's: no escapes, no $variables. Otherwise: the literal.
  SourceRange problem_range(const ast::Literal &lit, const std::string &value, const LiteralProblem &p) const {
    SourceRange r = lit.range;
    if (p.offset < 0 || lit.kind != ast::LiteralKind::String || !r.valid()) return r;
    const std::string &text = sm_.file(r.begin.file).text;
    if (r.end.offset > text.size() || r.end.offset < r.begin.offset + 2) return r;
    std::string_view src(text.data() + r.begin.offset, r.end.offset - r.begin.offset);
    if (src.front() != '"' || src.back() != '"' || src.substr(1, src.size() - 2) != value ||
        value.find_first_of("\\$") != std::string::npos || static_cast<size_t>(p.offset) > value.size())
      return r;
    uint32_t begin = r.begin.offset + 1 + static_cast<uint32_t>(p.offset);
    uint32_t len = std::min<uint32_t>(static_cast<uint32_t>(std::max(p.length, 0)),
                                      static_cast<uint32_t>(value.size() - p.offset));
    return SourceRange{{r.begin.file, begin}, {r.begin.file, begin + len}};
  }

  // A separate scope object per compound instance; kept alive for the pending references.
  NodeRef instantiate_compound(const ClassDef &cd, const ast::ElementRef &ref, const std::string &name, Scope &caller) {
    const ast::ElementClass &ec = *cd.def;
    if (stack_.size() >= kMaxCompoundDepth) {
      diags_.error(ref.class_range.valid() ? ref.class_range : ref.name_range,
                   "compounds instantiated more than " + std::to_string(kMaxCompoundDepth) + " deep");
      return {};
    }
    for (const ast::ElementClass *active : stack_)
      if (active == &ec) {
        diags_.error(ref.class_range.valid() ? ref.class_range : ref.name_range,
                     "recursive elementclass '" + ec.name + "': it instantiates itself");
        return {};
      }
    if (ref.shared) diags_.error(ref.range, "a compound cannot be shared; declare its elements shared instead");
    auto scope = std::make_unique<Scope>();
    scope->parent = cd.defined_in;
    scope->prefix = caller.prefix + name + "/";
    // bind parameters: positional first, in order; then by keyword
    std::vector<const ast::Arg *> given(ec.params.size(), nullptr);
    size_t next = 0;
    std::vector<std::string> keywords;
    for (auto &p : ec.params) keywords.push_back(p.keyword);
    SourceRange call = ref.has_args ? ref.args_range : ref.range;
    for (const ast::Arg &arg : ref.args) {
      int slot = -1;
      if (arg.keyword.empty()) {
        while (next < ec.params.size() && (ec.params[next].keyword_only || given[next])) ++next;
        if (next >= ec.params.size()) {
          size_t npos = 0;
          for (auto &p : ec.params) npos += !p.keyword_only;
          diags_.error(arg.range, "too many arguments for '" + ec.name + "': it takes " + std::to_string(npos) +
                                      " positional argument" + (npos == 1 ? "" : "s"));
          continue;
        }
        slot = static_cast<int>(next++);
      } else {
        for (size_t i = 0; i < ec.params.size(); ++i)
          if (ec.params[i].keyword == arg.keyword) slot = static_cast<int>(i);
        if (slot < 0) {
          std::string m = closest_match(arg.keyword, keywords);
          diags_.error(arg.keyword_range, "unknown argument '" + arg.keyword + "' for '" + ec.name + "'",
                       m.empty() ? std::string() : "did you mean '" + m + "'?");
          continue;
        }
        if (given[slot]) {
          diags_.error(arg.keyword_range, "duplicate argument '" + arg.keyword + "' for '" + ec.name + "'");
          continue;
        }
      }
      given[slot] = &arg;
      scope->vars[ec.params[slot].var] = substitute(arg.value, caller);
    }
    for (size_t i = 0; i < ec.params.size(); ++i) {
      if (given[i]) continue;
      const ast::Param &p = ec.params[i];
      if (p.default_value) {
        scope->vars[p.var] = substitute(*p.default_value, *cd.defined_in);
      } else {
        diags_.error(call, "too few arguments for '" + ec.name + "': missing '$" + p.var + "'")
            .notes.push_back(note(p.range, "parameter declared here"));
        ast::Literal placeholder;
        placeholder.range = call;
        poisoned_.insert(std::make_pair(call.begin.file, call.begin.offset));
        scope->vars[p.var] = placeholder;
      }
    }
    auto inst = std::make_unique<CompoundInstance>();
    inst->name = caller.prefix + name;
    inst->class_name = ec.name;
    scope->compound = inst.get();
    int errors_before = diags_.error_count();
    stack_.push_back(&ec);
    context_.push_back(ref.range);
    diags_.push_context(note(ref.range, "in instantiation of '" + ec.name + "' here"));
    instantiate_body(cd.def->body, *scope);
    diags_.pop_context();
    context_.pop_back();
    stack_.pop_back();
    if (diags_.error_count() != errors_before) inst->broken = true;
    int index = static_cast<int>(compounds_.size());
    compounds_.push_back(std::move(inst));
    scopes_.push_back(std::move(scope));
    return NodeRef{NodeRef::Compound, index, ref.name_range};
  }

  // ---- connections ----

  std::string describe(const NodeRef &n) const {
    if (n.kind == NodeRef::Element) return "'" + g_.elements[n.index].name + "' (" + g_.elements[n.index].spec->name + ")";
    if (n.kind == NodeRef::Compound) return "'" + compounds_[n.index]->name + "' (" + compounds_[n.index]->class_name + ")";
    return "?";
  }

  // Resolves the port of an endpoint: explicit [n] or [name], else 0.
  bool port_index(const NodeRef &n, const ast::PortRef &p, bool output, int &index) {
    index = p.present ? p.index : 0;
    if (!p.present || !p.named) return true;
    if (n.kind != NodeRef::Element) {
      diags_.error(p.range, "ports of " + std::string(n.kind == NodeRef::Compound ? "compound " + describe(n) : "'input' and 'output'") + " are numbered, not named");
      return false;
    }
    const ElementSpec &spec = *g_.elements[n.index].spec;
    index = output ? spec.output_index(p.name) : spec.input_index(p.name);
    if (index >= 0) return true;
    std::vector<std::string> names;
    for (auto &ps : output ? spec.outputs : spec.inputs) names.push_back(ps.name);
    std::string m = closest_match(p.name, names);
    std::string list;
    for (auto &nm : names) list += (list.empty() ? "" : ", ") + nm;
    diags_.error(p.range, spec.name + " has no " + (output ? "output" : "input") + " named '" + p.name + "'",
                 m.empty() ? (list.empty() ? spec.name + " has no " + (output ? "outputs" : "inputs") : "its " + std::string(output ? "outputs" : "inputs") + ": " + list)
                           : "did you mean '" + m + "'?");
    return false;
  }

  // The real element ports behind port `port` of a node: the element's own,
  // or for a compound, the inner ports its input or output leads to.
  std::vector<PortEnd> ends_of(const NodeRef &n, int port, bool output, SourceRange where) {
    const char *side = output ? "output" : "input";
    size_t count = 0;
    if (n.kind == NodeRef::Element) {
      const ElementSpec &spec = *g_.elements[n.index].spec;
      if (output ? spec.output_port(port) : spec.input_port(port)) return {{n.index, port}};
      count = output ? spec.outputs.size() : spec.inputs.size();
    } else if (n.kind == NodeRef::Compound) {
      auto &c = *compounds_[n.index];
      auto &ports = output ? c.outs : c.ins;
      if (port < static_cast<int>(ports.size())) return ports[port];
      if (c.broken) return {};  // its ports are incomplete: reported inside
      count = ports.size();
    } else {
      return {};
    }
    diags_.error(where, std::string(side) + " port " + std::to_string(port) + " is out of range: " + describe(n) +
                            " has " + (count == 0 ? std::string("no ") + side + "s"
                                                  : std::to_string(count) + " " + side + (count == 1 ? "" : "s")));
    return {};
  }

  // A connection dropped for an error already reported leaves its ends
  // incomplete; their unconnected ports are then not reported again.
  void taint(const NodeRef &n) {
    if (n.kind == NodeRef::Element) incomplete_.insert(n.index);
    if (n.kind == NodeRef::Compound)
      for (auto *side : {&compounds_[n.index]->ins, &compounds_[n.index]->outs})
        for (auto &ends : *side)
          for (auto &e : ends) incomplete_.insert(e.element);
  }

  void connect(const NodeRef &from, const ast::ElementRef &fref, const NodeRef &to, const ast::ElementRef &tref,
               SourceRange arrow, Scope &scope) {
    int before = diags_.error_count();
    connect_checked(from, fref, to, tref, arrow, scope);
    auto broken = [&](const NodeRef &n) { return n.kind == NodeRef::Compound && compounds_[n.index]->broken; };
    if (diags_.error_count() != before || from.kind == NodeRef::None || to.kind == NodeRef::None || broken(from) ||
        broken(to)) {
      taint(from);
      taint(to);
      if (scope.compound && (from.kind == NodeRef::Input || to.kind == NodeRef::Output || from.kind == NodeRef::None ||
                             to.kind == NodeRef::None))
        scope.compound->broken = true;
    }
  }

  void connect_checked(const NodeRef &from, const ast::ElementRef &fref, const NodeRef &to, const ast::ElementRef &tref,
                       SourceRange arrow, Scope &scope) {
    if (from.kind == NodeRef::None || to.kind == NodeRef::None) return;  // already reported
    int fp, tp;
    if (!port_index(from, fref.out_port, true, fp) || !port_index(to, tref.in_port, false, tp)) return;
    SourceRange fwhere = fref.out_port.present ? fref.out_port.range : fref.range;
    SourceRange twhere = tref.in_port.present ? tref.in_port.range : tref.range;
    if (from.kind == NodeRef::Output) {
      diags_.error(fref.name_range, "'output' can only be connected to, not from");
      return;
    }
    if (to.kind == NodeRef::Input) {
      diags_.error(tref.name_range, "'input' can only be connected from, not to");
      return;
    }
    if (from.kind == NodeRef::Input && to.kind == NodeRef::Output) {
      diags_.error(arrow, "connecting 'input' straight to 'output' is not supported; put an element between them");
      return;
    }
    CompoundInstance *c = scope.compound;
    if (from.kind == NodeRef::Input) {
      if (c->ins.size() <= static_cast<size_t>(fp)) c->ins.resize(fp + 1);
      auto ends = ends_of(to, tp, false, twhere);
      c->ins[fp].insert(c->ins[fp].end(), ends.begin(), ends.end());
      return;
    }
    if (to.kind == NodeRef::Output) {
      if (c->outs.size() <= static_cast<size_t>(tp)) c->outs.resize(tp + 1);
      auto ends = ends_of(from, fp, true, fwhere);
      c->outs[tp].insert(c->outs[tp].end(), ends.begin(), ends.end());
      return;
    }
    std::vector<PortEnd> sources = ends_of(from, fp, true, fwhere), sinks = ends_of(to, tp, false, twhere);
    for (const PortEnd &a : sources)
      for (const PortEnd &b : sinks) {
        const PortSpec *op = g_.elements[a.element].spec->output_port(a.port);
        const PortSpec *ip = g_.elements[b.element].spec->input_port(b.port);
        if (op->type != ip->type) {
          diags_.error(arrow, std::string("stream type mismatch: ") + stream_type_name(op->type) + " output " +
                                  std::to_string(a.port) + " of '" + g_.elements[a.element].name + "' cannot feed " +
                                  stream_type_name(ip->type) + " input " + std::to_string(b.port) + " of '" +
                                  g_.elements[b.element].name + "'",
                       op->type == StreamType::Packets ? "a FlowTable turns packets into flows" : std::string());
          continue;
        }
        g_.connections.push_back(Connection{a.element, a.port, b.element, b.port, arrow});
      }
  }

  // Element-typed arguments (`table ft`) name elements of the same scope,
  // which may be declared anywhere in it: resolved once the scope is complete.
  void resolve_pending_refs() {
    for (auto &p : pending_refs_) {
      Element &e = g_.elements[p.element];
      BoundArg &b = e.args[p.arg];
      if (b.literal.kind != ast::LiteralKind::Word) continue;  // conversion reported the type error
      auto it = p.scope->names.find(b.literal.text);
      if (it == p.scope->names.end() || it->second.kind != NodeRef::Element) {
        std::vector<std::string> names;
        for (auto &[k, v] : p.scope->names)
          if (v.kind == NodeRef::Element && g_.elements[v.index].spec->name == b.spec->element_class) names.push_back(k);
        std::string m = closest_match(b.literal.text, names);
        diags_.error(b.literal.range, "'" + b.spec->name + "' names '" + b.literal.text + "', which is not a " +
                                          (it == p.scope->names.end() ? "declared element" : "single element") + " in this scope",
                     m.empty() ? "declare it: " + b.literal.text + " :: " + b.spec->element_class + "(...)" : "did you mean '" + m + "'?");
        continue;
      }
      const Element &target = g_.elements[it->second.index];
      if (!b.spec->element_class.empty() && target.spec->name != b.spec->element_class) {
        diags_.error(b.literal.range, "'" + b.spec->name + "' must name a " + b.spec->element_class + ", but '" +
                                          b.literal.text + "' is a " + target.spec->name);
        continue;
      }
      b.element_ref = it->second.index;
    }
  }

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

public:
  std::set<int> incomplete_;
  int syntax_errors_ = 0;  // in required files
};

bool finish(int main_file, const FrontendOptions &opts, SourceManager &sm, Diagnostics &diags, ElementGraph &out) {
  ast::File file;
  bool syntax_ok = parse_file(sm, main_file, diags, file);
  Expander ex(sm, diags, out);
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
