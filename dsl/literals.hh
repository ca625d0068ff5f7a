// Converting literals to typed values, against an argument's spec: units,
// suffixes, ranges, addresses, host:port. A string literal is accepted for any
// type and its contents converted (so `define $C "127.0.0.1:4739"` works for a
// host:port argument).
#pragma once
#include <optional>
#include <string>

#include "dsl/ast.hh"
#include "engine/core/element_spec.hh"

namespace sluice {

struct LiteralProblem {
  std::string message;
  std::string hint;
  // Where inside the converted text the problem is (a validator's ArgProblem):
  // byte offset and length in Value::text; offset -1: the whole literal.
  int offset = -1;
  int length = 0;
};

// Converts `lit` (variables already substituted) for `spec`. On failure returns
// false and fills `problem`; the caller reports it at lit.range, or inside a
// plain string literal at problem.offset.
bool convert_literal(const ast::Literal &lit, const ArgSpec &spec, Value &out, LiteralProblem &problem);

// Converts a value written as text (a spec's default, a --define value) for `spec`.
std::optional<Value> parse_value_text(const std::string &text, const ArgSpec &spec, std::string *error = nullptr);

// Lexes `text` as a single literal; false if it is not exactly one literal.
bool lex_single_literal(const std::string &text, ast::Literal &out);

}  // namespace sluice
