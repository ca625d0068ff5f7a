// The syntax tree of a .pipe file, as the parser builds it: nothing resolved yet.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/base/source.hh"
#include "engine/core/literal.hh"

namespace sluice::ast {

// One argument inside Class(...): `keyword value` or a positional `value`.
struct Arg {
  std::string keyword;  // empty: positional
  SourceRange keyword_range;
  Literal value;
  SourceRange range;
};

struct PortRef {
  bool present = false;
  bool named = false;
  int index = 0;
  std::string name;
  SourceRange range;
};

// One endpoint of a connection, or a declaration on its own:
//   name                        a reference (or an anonymous instance of class `name`)
//   name :: [shared] Class(args)  a declaration
//   [shared] Class(args)          an anonymous instance
// with optional ports: [in]x[out].
struct ElementRef {
  std::string name;  // the element's name, or the class for anonymous instances
  SourceRange name_range;
  bool declares = false;  // `name :: Class`
  std::string class_name;
  SourceRange class_range;
  bool shared = false;
  bool has_args = false;  // parentheses were written
  std::vector<Arg> args;
  SourceRange args_range;
  PortRef in_port, out_port;
  SourceRange range;
};

// a -> b, c -> d: each hop is a list of endpoints (fan-out / fan-in).
struct Connection {
  std::vector<std::vector<ElementRef>> hops;
  std::vector<SourceRange> arrows;  // arrows[i] joins hops[i] and hops[i + 1]
  SourceRange range;
};

struct Define {
  std::string name;
  Literal value;
  SourceRange range;
};

struct Require {
  std::string path;
  SourceRange range;
};

// A compound's formal parameter: `$idle` (positional, also by keyword `idle`),
// `active $active` (keyword only), either with an optional `= default`.
struct Param {
  std::string var;      // without '$'
  std::string keyword;  // the keyword it is passed by
  bool keyword_only = false;
  std::optional<Literal> default_value;
  SourceRange range;
};

struct ElementClass;

struct Statement {
  enum class Kind { Connection, Define, Require, ElementClass } kind;
  Connection connection;
  Define define;
  Require require;
  std::shared_ptr<ElementClass> element_class;
  SourceRange range;
};

struct ElementClass {
  std::string name;
  SourceRange name_range;
  std::vector<Param> params;
  std::vector<Statement> body;
  SourceRange range;
};

struct File {
  int file_index = -1;
  std::vector<Statement> statements;
};

}  // namespace sluice::ast
