// Expansion: scopes and variables, statements, compound classes and element
// instances (dsl/expander.hh has the whole step).
#include "dsl/expander.hh"
#include "dsl/literals.hh"

namespace sluice::expansion {

void Expander::run(ast::File &main, const FrontendOptions &opts) {
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

void Expander::warn_unused(int main_file) {
  for (auto &[name, lit] : top_.vars) {
    SourceRange r = top_.var_ranges[name];
    if (r.begin.file == main_file && !used_vars_.count(&lit))
      diags_.warning(r, "variable '$" + name + "' is defined but never used");
  }
  for (auto &[name, cd] : top_.classes)
    if (cd.def->name_range.begin.file == main_file && !used_classes_.count(cd.def.get()))
      diags_.warning(cd.def->name_range, "elementclass '" + name + "' is defined but never used");
}

void Expander::set_range(ast::Literal &lit, SourceRange r) {
  lit.range = r;
  for (auto &i : lit.items) set_range(i, r);
}

ast::Literal Expander::substitute(const ast::Literal &lit, const Scope &scope) {
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

void Expander::undefined_var(const std::string &name, SourceRange r, const Scope &scope) {
  std::string m = closest_match(name, scope.visible_var_names());
  diags_.error(r, "undefined variable '$" + name + "'",
               m.empty() ? "define it with `define $" + name + " VALUE;` or --define " + name + "=VALUE"
                         : "did you mean '$" + m + "'?");
}

std::string Expander::interpolate(const ast::Literal &lit, const Scope &scope) {
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

void Expander::instantiate_body(std::vector<ast::Statement> &body, Scope &scope) {
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

Diagnostic Expander::note(SourceRange r, std::string msg) {
  return Diagnostic{Severity::Note, r, std::move(msg), {}, {}};
}

void Expander::declare(const ast::ElementRef &ref, Scope &scope) {
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

NodeRef Expander::resolve_endpoint(const ast::ElementRef &ref, Scope &scope) {
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

std::vector<std::string> Expander::class_candidates(const Scope &scope, bool with_elements) {
  std::vector<std::string> c = ElementRegistry::global().names();
  for (const Scope *s = &scope; s; s = s->parent)
    for (auto &[k, v] : s->classes) c.push_back(k);
  if (with_elements)
    for (auto &[k, v] : scope.names) c.push_back(k);
  return c;
}

NodeRef Expander::instantiate(const ast::ElementRef &ref, const std::string &name, Scope &scope, bool anonymous) {
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

NodeRef Expander::instantiate_compound(const ClassDef &cd, const ast::ElementRef &ref, const std::string &name, Scope &caller) {
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

void Expander::resolve_pending_refs() {
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

}  // namespace sluice::expansion
