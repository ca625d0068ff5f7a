// A literal as written in a .pipe file: the front end makes it, the graph
// keeps it with each argument (errors found later point at it, `$queue` is
// bound per lane from it), the argument's spec converts it (dsl/literals).
#pragma once
#include <string>
#include <vector>

#include "engine/base/source.hh"

namespace sluice::ast {

// A literal value as written. Numbers keep their unit suffix in `text`;
// conversion to a typed value happens against an argument's spec (dsl/literals).
enum class LiteralKind {
  Number,    // 64K, 15s, 10Gbps, 14.88Mpps, 0x1f, 1.5
  String,    // "text" (text holds the unescaped contents)
  Word,      // an identifier: a symbol, an element name, a hostname, true/false
  Variable,  // $name (text holds the name without '$')
  Address,   // 10.0.0.1, fe80::1, 10.0.0.0/8, 2001:db8::/32
  HostPort,  // 127.0.0.1:4739, [::1]:4739, localhost:4739
  Fraction,  // 1/100
  List,      // [a, b, c]
};

struct Literal {
  LiteralKind kind = LiteralKind::Word;
  std::string text;
  SourceRange range;
  std::vector<Literal> items;  // List
};

}  // namespace sluice::ast
