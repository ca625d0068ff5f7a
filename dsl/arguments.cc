// Arguments bound to the element's spec: positional and keyword, defaults,
// missing and duplicate ones, each value typed ($queue as 0 here, again per
// lane later).
#include "dsl/check.hh"
#include "dsl/expander.hh"
#include "dsl/literals.hh"

namespace sluice::expansion {

void Expander::bind_args(int index, const ast::ElementRef &ref, Scope &scope) {
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

bool Expander::poisoned(const ast::Literal &lit) const {
  return poisoned_.count(std::make_pair(lit.range.begin.file, lit.range.begin.offset)) > 0;
}

void Expander::check_value(const BoundArg &b, int queue) {
  Value v;
  LiteralProblem p;
  ast::Literal lit = bind_queue(b.literal, queue);
  if (!convert_literal(lit, *b.spec, v, p)) diags_.error(problem_range(b.literal, lit.text, p), p.message, p.hint);
}

SourceRange Expander::problem_range(const ast::Literal &lit, const std::string &value, const LiteralProblem &p) const {
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

}  // namespace sluice::expansion
