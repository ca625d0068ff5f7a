// re2c source of the .pipe lexer. Literals keep their text; units and
// address forms are checked later against what each argument expects.
#include "dsl/lexer.hh"

namespace sluice {

using P = PipeParser;

Lexer::Lexer(const SourceManager &sm, int file, Diagnostics &diags)
    : file_(file), diags_(diags) {
  const std::string &t = sm.file(file).text;
  base_ = cursor_ = t.c_str();
  limit_ = base_ + t.size();  // *limit_ == '\0': the sentinel
}

SourceRange Lexer::range_from(const char *begin) const {
  return SourceRange{{file_, static_cast<uint32_t>(begin - base_)},
                     {file_, static_cast<uint32_t>(cursor_ - base_)}};
}

std::string_view Lexer::text(const SourceRange &r) const {
  if (r.begin.file != file_ || r.end.offset < r.begin.offset) return {};
  return std::string_view(base_ + r.begin.offset, r.end.offset - r.begin.offset);
}

/*!re2c
  re2c:api = default;
  re2c:define:YYCTYPE = char;
  re2c:define:YYCURSOR = cursor_;
  re2c:yyfill:enable = 0;
  re2c:flags:tags = 0;

  digit  = [0-9];
  hex    = [0-9a-fA-F];
  ident  = [A-Za-z_][A-Za-z0-9_]*;
  dec8   = digit | [1-9] digit | "1" digit{2} | "2" [0-4] digit | "25" [0-5];
  ipv4   = dec8 "." dec8 "." dec8 "." dec8;
  h16    = hex{1,4};
  ls32   = h16 ":" h16 | ipv4;
  ipv6   = (h16 ":"){6} ls32
         | "::" (h16 ":"){5} ls32
         | h16? "::" (h16 ":"){4} ls32
         | ((h16 ":"){0,1} h16)? "::" (h16 ":"){3} ls32
         | ((h16 ":"){0,2} h16)? "::" (h16 ":"){2} ls32
         | ((h16 ":"){0,3} h16)? "::" h16 ":" ls32
         | ((h16 ":"){0,4} h16)? "::" ls32
         | ((h16 ":"){0,5} h16)? "::" h16
         | ((h16 ":"){0,6} h16) "::";  // not a bare "::": that is the declaration operator
  // an address must not run into a name: `ab::Cd(` is a declaration, not fe80-style hex
  after_addr = [^A-Za-z0-9_.:(];
  port   = digit{1,5};
  hostname = [A-Za-z] [A-Za-z0-9-]* ("." [A-Za-z0-9-]+)*;
  number = digit+ ("." digit+)? [A-Za-z]* | "0x" hex+;
*/

PipeParser::symbol_type Lexer::next() {
  for (;;) {
    const char *tok = cursor_;
    const char *YYMARKER = nullptr;
    const char *YYCTXMARKER = nullptr;
    (void)YYMARKER; (void)YYCTXMARKER;
    /*!re2c
      re2c:define:YYCTXMARKER = YYCTXMARKER;

      "\x00" {
        if (cursor_ - 1 == limit_) { cursor_ = limit_; return P::make_END(range_from(limit_)); }
        diags_.error(range_from(tok), "NUL byte in the source");
        continue;
      }
      [ \t\r\n\f\v]+ { continue; }
      "//" [^\n\x00]* { continue; }
      "/*" { block_comment(tok); continue; }

      "define"        { return P::make_DEFINE(range_from(tok)); }
      "elementclass"  { return P::make_ELEMENTCLASS(range_from(tok)); }
      "require"       { return P::make_REQUIRE(range_from(tok)); }
      "shared"        { return P::make_SHARED(range_from(tok)); }
      "input"         { return P::make_INPUT(range_from(tok)); }
      "output"        { return P::make_OUTPUT(range_from(tok)); }

      "->" { return P::make_ARROW(range_from(tok)); }
      "::" { return P::make_COLONCOLON(range_from(tok)); }
      "("  { return P::make_LPAREN(range_from(tok)); }
      ")"  { return P::make_RPAREN(range_from(tok)); }
      "["  { return P::make_LBRACKET(range_from(tok)); }
      "]"  { return P::make_RBRACKET(range_from(tok)); }
      "{"  {
        if (++depth_ > kMaxNesting) {
          diags_.error(range_from(tok), "element classes nested more than " + std::to_string(kMaxNesting) + " deep");
          cursor_ = limit_;
          return P::make_END(range_from(limit_));
        }
        return P::make_LBRACE(range_from(tok));
      }
      "}"  { --depth_; return P::make_RBRACE(range_from(tok)); }
      ","  { return P::make_COMMA(range_from(tok)); }
      ";"  { return P::make_SEMI(range_from(tok)); }
      "|"  { return P::make_BAR(range_from(tok)); }
      "="  { return P::make_EQUALS(range_from(tok)); }

      "$" ident { return P::make_VARIABLE(std::string(tok + 1, cursor_), range_from(tok)); }
      "\"" { return lex_string(tok); }

      (ipv4 | ipv6) ("/" digit{1,3})? / after_addr {
        return P::make_ADDRESS(std::string(tok, cursor_), range_from(tok));
      }
      (ipv4 | "[" ipv6 "]" | hostname) ":" port / after_addr {
        return P::make_HOSTPORT(std::string(tok, cursor_), range_from(tok));
      }
      digit+ "/" digit+ { return P::make_FRACTION(std::string(tok, cursor_), range_from(tok)); }
      number { return P::make_NUMBER(std::string(tok, cursor_), range_from(tok)); }
      ident  { return P::make_IDENT(std::string(tok, cursor_), range_from(tok)); }

      * {
        unsigned char c = static_cast<unsigned char>(*tok);
        std::string shown = c >= 0x20 && c < 0x7f ? std::string("'") + static_cast<char>(c) + "'"
                                                  : "byte 0x" + std::string(1, "0123456789abcdef"[c >> 4]) +
                                                        std::string(1, "0123456789abcdef"[c & 15]);
        diags_.error(range_from(tok), "unexpected character " + shown);
        continue;
      }
    */
  }
}

// Strings: escapes \" \\ \n \t are decoded here; `\$` stays escaped so that
// $var interpolation (done at expansion) can tell it from a variable.
PipeParser::symbol_type Lexer::lex_string(const char *begin) {
  std::string value;
  for (;;) {
    char c = *cursor_;
    if ((c == '\0' && cursor_ >= limit_) || c == '\n') {
      diags_.error(range_from(begin), "unterminated string", "close the string with '\"' on the same line");
      return P::make_STRING(value, range_from(begin));
    }
    ++cursor_;
    if (c == '"') return P::make_STRING(value, range_from(begin));
    if (c != '\\') { value += c; continue; }
    char e = *cursor_;
    if (e == '\0' && cursor_ >= limit_) continue;
    ++cursor_;
    switch (e) {
      case 'n': value += '\n'; break;
      case 't': value += '\t'; break;
      case '"': value += '"'; break;
      case '\\': value += '\\'; break;
      case '$': value += "\\$"; break;
      default: {
        SourceRange r{{file_, static_cast<uint32_t>(cursor_ - 2 - base_)}, {file_, static_cast<uint32_t>(cursor_ - base_)}};
        diags_.error(r, std::string("unknown escape '\\") + e + "' in string", "known escapes: \\\" \\\\ \\n \\t \\$");
        value += e;
      }
    }
  }
}

void Lexer::block_comment(const char *begin) {
  while (cursor_ < limit_) {
    if (cursor_[0] == '*' && cursor_[1] == '/') { cursor_ += 2; return; }
    ++cursor_;
  }
  const char *end = cursor_;
  cursor_ = begin + 2;
  diags_.error(range_from(begin), "unterminated /* comment");
  cursor_ = end;
}

}  // namespace sluice
