#include "dsl/literals.hh"

#include <arpa/inet.h>

#include <charconv>
#include <cmath>
#include <cstring>

#include "engine/base/diagnostics.hh"
#include "dsl/lexer.hh"

namespace sluice {

namespace {

struct Unit {
  const char *suffix;
  double scale;
};

// Binary multipliers for counts and sizes (a 64K ring holds 65536 packets).
constexpr Unit kCountUnits[] = {{"", 1}, {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}};
constexpr Unit kByteUnits[] = {{"", 1},           {"B", 1},           {"KB", 1024.0},
                               {"MB", 1048576.0}, {"GB", 1073741824.0}, {"TB", 1099511627776.0},
                               {"KiB", 1024.0},   {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
constexpr Unit kDurationUnits[] = {{"ns", 1},       {"us", 1e3},      {"ms", 1e6},
                                   {"s", 1e9},      {"min", 60e9},    {"h", 3600e9}, {"d", 86400e9}};
// Network rates are decimal (10Gbps = 1e10 bit/s).
constexpr Unit kBitRateUnits[] = {{"bps", 1}, {"Kbps", 1e3}, {"Mbps", 1e6}, {"Gbps", 1e9}, {"Tbps", 1e12}};
constexpr Unit kPacketRateUnits[] = {{"pps", 1}, {"Kpps", 1e3}, {"Mpps", 1e6}, {"Gpps", 1e9}};

template <size_t N>
const Unit *find_unit(const Unit (&units)[N], const std::string &suffix) {
  for (const Unit &u : units)
    if (suffix == u.suffix) return &u;
  return nullptr;
}

template <size_t N>
std::string unit_list(const Unit (&units)[N]) {
  std::string s;
  for (const Unit &u : units) {
    if (!*u.suffix) continue;
    if (!s.empty()) s += ", ";
    s += u.suffix;
  }
  return s;
}

// Splits "14.88Mpps" into 14.88 and "Mpps". False if the digits are malformed.
bool split_number(const std::string &text, double &number, std::string &suffix, bool &integral) {
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    // hexadecimal: every character after 0x a hex digit, the whole fitting 64 bits
    uint64_t hex = 0;
    const char *end = text.data() + text.size();
    auto [stop, ec] = std::from_chars(text.data() + 2, end, hex, 16);
    if (ec != std::errc() || stop != end) return false;
    number = static_cast<double>(hex);
    suffix.clear();
    integral = true;
    return true;
  }
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string digits = text.substr(0, i);
  if (digits.empty() || digits.size() > 30) return false;
  suffix = text.substr(i);
  integral = digits.find('.') == std::string::npos;
  number = std::strtod(digits.c_str(), nullptr);
  return true;
}

// A literal quoted in a message: a long one is cut (the caret shows it whole).
std::string shown(const std::string &text) { return text.size() > 40 ? text.substr(0, 40) + "..." : text; }

const char *kind_name(ast::LiteralKind k) {
  switch (k) {
    case ast::LiteralKind::Number: return "a number";
    case ast::LiteralKind::String: return "a string";
    case ast::LiteralKind::Word: return "a word";
    case ast::LiteralKind::Variable: return "a variable";
    case ast::LiteralKind::Address: return "an address";
    case ast::LiteralKind::HostPort: return "a host:port";
    case ast::LiteralKind::Fraction: return "a fraction";
    case ast::LiteralKind::List: return "a list";
  }
  return "a value";
}

bool parse_ip(const std::string &text, IpAddress &out) {
  if (text.find(':') != std::string::npos) {
    out.v6 = true;
    return inet_pton(AF_INET6, text.c_str(), out.bytes.data()) == 1;
  }
  out.v6 = false;
  out.bytes.fill(0);
  return inet_pton(AF_INET, text.c_str(), out.bytes.data()) == 1;
}

class Converter {
public:
  Converter(const ArgSpec &spec, LiteralProblem &problem) : spec_(spec), problem_(problem) {}

  bool convert(const ast::Literal &lit, Value &out, bool allow_list) {
    out = Value{};
    out.type = spec_.type;
    if (lit.kind == ast::LiteralKind::List) {
      if (!allow_list || !spec_.list)
        return fail("'" + spec_.name + "' takes a single " + spec_.type_text() + ", not a list");
      out.is_list = true;
      for (const auto &item : lit.items) {
        Value v;
        if (!convert(item, v, false)) return false;
        out.items.push_back(std::move(v));
      }
      return true;
    }
    if (lit.kind == ast::LiteralKind::Variable)
      return fail("'$" + shown(lit.text) + "' has no value here");
    // a word among the extra words an argument allows (`sizes imix`)
    if (spec_.type != ArgType::Symbol && !spec_.choices.empty() &&
        (lit.kind == ast::LiteralKind::Word || lit.kind == ast::LiteralKind::String)) {
      for (const auto &c : spec_.choices)
        if (c == lit.text) {
          out.is_symbol = true;
          out.text = lit.text;
          return true;
        }
    }
    if (lit.kind == ast::LiteralKind::String && spec_.type != ArgType::String) return convert_string(lit, out);
    if (!convert_scalar(lit, out)) return false;
    return check_range(out);
  }

private:
  bool fail(std::string msg, std::string hint = {}) {
    problem_.message = std::move(msg);
    problem_.hint = std::move(hint);
    return false;
  }

  bool expected(const ast::Literal &lit) {
    std::string msg = "'" + spec_.name + "' expects " + spec_.type_text() + ", not " + kind_name(lit.kind) +
                      (lit.text.empty() ? "" : " '" + shown(lit.text) + "'");
    std::string hint;
    if (spec_.type == ArgType::Symbol && lit.kind == ast::LiteralKind::Word) {
      std::string m = closest_match(lit.text, spec_.choices);
      if (!m.empty()) hint = "did you mean '" + m + "'?";
    }
    return fail(std::move(msg), std::move(hint));
  }

  // A string given for a typed argument: its contents are read as a literal.
  bool convert_string(const ast::Literal &lit, Value &out) {
    ast::Literal inner;
    if (lit.text.empty() || !lex_single_literal(lit.text, inner) || inner.kind == ast::LiteralKind::String ||
        inner.kind == ast::LiteralKind::Variable)
      return fail("'" + spec_.name + "' expects " + spec_.type_text() + ", and \"" + shown(lit.text) + "\" is not one");
    inner.range = lit.range;
    return convert(inner, out, true);
  }

  bool number_with_units(const ast::Literal &lit, double &value, const Unit *units, size_t n_units,
                         const char *what, bool unit_required, std::string units_text) {
    double number;
    std::string suffix;
    bool integral;
    if (!split_number(lit.text, number, suffix, integral)) return fail("malformed number '" + shown(lit.text) + "'");
    if (suffix.empty() && unit_required) {
      if (number == 0) return value = 0, true;  // zero is zero in any unit
      return fail(std::string(what) + " '" + shown(lit.text) + "' needs a unit",
                  "write it with one of " + units_text + ", e.g. " + shown(lit.text) + units[n_units > 3 ? 3 : 1].suffix);
    }
    for (size_t i = 0; i < n_units; ++i)
      if (suffix == units[i].suffix) {
        value = number * units[i].scale;
        return true;
      }
    return fail("wrong unit '" + suffix + "' for " + what + " '" + spec_.name + "'",
                std::string(what) + " units: " + units_text);
  }

  bool convert_scalar(const ast::Literal &lit, Value &out) {
    using K = ast::LiteralKind;
    switch (spec_.type) {
      case ArgType::Count:
      case ArgType::Bytes:
      case ArgType::Duration: {
        if (lit.kind != K::Number) return expected(lit);
        double v = 0;
        bool ok = spec_.type == ArgType::Count
                      ? number_with_units(lit, v, kCountUnits, std::size(kCountUnits), "count", false, unit_list(kCountUnits))
                  : spec_.type == ArgType::Bytes
                      ? number_with_units(lit, v, kByteUnits, std::size(kByteUnits), "size", false, unit_list(kByteUnits))
                      : number_with_units(lit, v, kDurationUnits, std::size(kDurationUnits), "duration", true, unit_list(kDurationUnits));
        if (!ok) return false;
        if (v > 9.2e18) return fail("'" + shown(lit.text) + "' is too large");
        if (v != std::floor(v))
          return fail("'" + shown(lit.text) + "' is not a whole number of " +
                      (spec_.type == ArgType::Duration ? "nanoseconds" : spec_.type == ArgType::Bytes ? "bytes" : "items"));
        out.integer = static_cast<int64_t>(v);
        return true;
      }
      case ArgType::Rate: {
        if (lit.kind != K::Number) return expected(lit);
        double number;
        std::string suffix;
        bool integral;
        if (!split_number(lit.text, number, suffix, integral)) return fail("malformed number '" + shown(lit.text) + "'");
        const Unit *bits = find_unit(kBitRateUnits, suffix);
        const Unit *pkts = find_unit(kPacketRateUnits, suffix);
        bool want_bits = spec_.any_rate_unit || spec_.rate_unit == RateUnit::Bits;
        bool want_pkts = spec_.any_rate_unit || spec_.rate_unit == RateUnit::Packets;
        std::string units = want_bits && want_pkts ? unit_list(kBitRateUnits) + ", " + unit_list(kPacketRateUnits)
                            : want_bits ? unit_list(kBitRateUnits) : unit_list(kPacketRateUnits);
        if (bits && want_bits) { out.real = number * bits->scale; out.rate_unit = RateUnit::Bits; return true; }
        if (pkts && want_pkts) { out.real = number * pkts->scale; out.rate_unit = RateUnit::Packets; return true; }
        if (suffix.empty()) return fail("rate '" + shown(lit.text) + "' needs a unit", "rate units: " + units);
        return fail("wrong unit '" + suffix + "' for rate '" + spec_.name + "'", "rate units: " + units);
      }
      case ArgType::Bool: {
        static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
        if (lit.kind == K::Word || lit.kind == K::Number) {
          for (const char *w : yes) if (lit.text == w) { out.integer = 1; return true; }
          for (const char *w : no) if (lit.text == w) { out.integer = 0; return true; }
        }
        return fail("'" + spec_.name + "' expects true or false, not '" + shown(lit.text) + "'");
      }
      case ArgType::String: {
        if (lit.kind == K::List) return expected(lit);
        // "\$" stays escaped through interpolation; here it becomes a plain '$'
        std::string s;
        for (size_t i = 0; i < lit.text.size(); ++i) {
          if (lit.text[i] == '\\' && i + 1 < lit.text.size() && lit.text[i + 1] == '$') { s += '$'; ++i; continue; }
          s += lit.text[i];
        }
        out.text = std::move(s);
        return true;
      }
      case ArgType::Symbol: {
        if (lit.kind != K::Word) return expected(lit);
        for (const auto &c : spec_.choices)
          if (c == lit.text) { out.text = lit.text; out.is_symbol = true; return true; }
        std::string list;
        for (const auto &c : spec_.choices) list += (list.empty() ? "" : ", ") + c;
        std::string m = closest_match(lit.text, spec_.choices);
        return fail("'" + shown(lit.text) + "' is not a valid " + spec_.name + " (one of: " + list + ")",
                    m.empty() ? std::string() : "did you mean '" + m + "'?");
      }
      case ArgType::Address:
      case ArgType::Prefix: {
        if (lit.kind != K::Address) return expected(lit);
        std::string addr = lit.text;
        size_t slash = addr.find('/');
        int len = -1;
        if (slash != std::string::npos) {
          len = std::atoi(addr.c_str() + slash + 1);
          addr.resize(slash);
        }
        if (!parse_ip(addr, out.address)) return fail("malformed address '" + shown(lit.text) + "'");
        int max_len = out.address.v6 ? 128 : 32;
        if (spec_.type == ArgType::Address) {
          if (len >= 0) return fail("'" + spec_.name + "' expects an address, not the prefix '" + shown(lit.text) + "'");
          return true;
        }
        if (len > max_len) return fail("prefix length /" + std::to_string(len) + " is longer than " + std::to_string(max_len));
        out.integer = len < 0 ? max_len : len;
        return true;
      }
      case ArgType::HostPort: {
        if (lit.kind != K::HostPort) return expected(lit);
        size_t colon = lit.text.rfind(':');
        std::string host = lit.text.substr(0, colon);
        long port = std::strtol(lit.text.c_str() + colon + 1, nullptr, 10);
        if (port < 1 || port > 65535) return fail("port " + lit.text.substr(colon + 1) + " is out of range 1..65535");
        if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
        out.text = host;
        out.integer = port;
        parse_ip(host, out.address);  // a hostname keeps only its text
        return true;
      }
      case ArgType::Element:
        if (lit.kind != K::Word) return expected(lit);
        out.text = lit.text;
        return true;
      case ArgType::Fraction: {
        if (lit.kind == K::Fraction) {
          size_t slash = lit.text.find('/');
          double num = std::strtod(lit.text.substr(0, slash).c_str(), nullptr);
          double den = std::strtod(lit.text.substr(slash + 1).c_str(), nullptr);
          if (den == 0) return fail("fraction '" + shown(lit.text) + "' divides by zero");
          if (num > den) return fail("fraction '" + shown(lit.text) + "' is larger than 1");
          out.real = num / den;
          // digits past a double's range (1e400/1e400) give no number
          if (!std::isfinite(out.real)) return fail("fraction '" + shown(lit.text) + "' has numbers too large");
          return true;
        }
        if (lit.kind == K::Number) {
          double number;
          std::string suffix;
          bool integral;
          if (!split_number(lit.text, number, suffix, integral) || !suffix.empty())
            return fail("'" + spec_.name + "' expects a fraction such as 1/100 or 0.01, not '" + shown(lit.text) + "'");
          out.real = number;
          if (number > 1) return fail("fraction '" + shown(lit.text) + "' is larger than 1");
          return true;
        }
        return expected(lit);
      }
    }
    return expected(lit);
  }

  bool check_range(const Value &v) {
    double x;
    switch (spec_.type) {
      case ArgType::Count: case ArgType::Bytes: case ArgType::Duration: x = static_cast<double>(v.integer); break;
      case ArgType::Rate: case ArgType::Fraction: x = v.real; break;
      default: return true;
    }
    if ((spec_.has_min && x < spec_.min) || (spec_.has_max && x > spec_.max))
      return fail("value " + v.to_string() + " is out of range for '" + spec_.name + "'",
                  "allowed: " + spec_.range_text());
    return true;
  }

  const ArgSpec &spec_;
  LiteralProblem &problem_;
};

}  // namespace

bool convert_literal(const ast::Literal &lit, const ArgSpec &spec, Value &out, LiteralProblem &problem) {
  Converter c(spec, problem);
  if (!c.convert(lit, out, true)) return false;
  if (spec.validate) {
    if (auto p = spec.validate(out)) {
      problem.message = p->message;
      problem.hint.clear();
      problem.offset = p->offset;
      problem.length = p->length;
      return false;
    }
  }
  return true;
}

// Reuses the real grammar: the text is parsed as the value of a define.
bool lex_single_literal(const std::string &text, ast::Literal &out) {
  SourceManager sm;
  int f = sm.add("<value>", "define $v " + text + ";");
  Diagnostics diags(sm);
  Lexer lexer(sm, f, diags);
  ast::File file;
  PipeParser parser(lexer, diags, file);
  if (parser.parse() != 0 || diags.has_errors() || file.statements.size() != 1 ||
      file.statements[0].kind != ast::Statement::Kind::Define)
    return false;
  out = file.statements[0].define.value;
  return true;
}

std::optional<Value> parse_value_text(const std::string &text, const ArgSpec &spec, std::string *error) {
  ast::Literal lit;
  if (!lex_single_literal(text, lit)) {
    if (error) *error = "'" + text + "' is not a single value";
    return std::nullopt;
  }
  Value v;
  LiteralProblem p;
  if (!convert_literal(lit, spec, v, p)) {
    if (error) *error = p.message;
    return std::nullopt;
  }
  return v;
}

}  // namespace sluice
