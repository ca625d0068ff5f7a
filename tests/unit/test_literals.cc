// Literals and units: what each argument type accepts, what it refuses and why.
#include <catch2/catch.hpp>

#include "dsl/literals.hh"

using namespace sluice;

static Value ok(const std::string &text, const ArgSpec &spec) {
  std::string err;
  auto v = parse_value_text(text, spec, &err);
  INFO(text << ": " << err);
  REQUIRE(v.has_value());
  return *v;
}

static std::string bad(const std::string &text, const ArgSpec &spec) {
  std::string err;
  auto v = parse_value_text(text, spec, &err);
  INFO(text);
  REQUIRE_FALSE(v.has_value());
  return err;
}

TEST_CASE("counts take binary K M G suffixes", "[literals]") {
  auto c = ArgSpec::count("n");
  CHECK(ok("64K", c).integer == 65536);
  CHECK(ok("1M", c).integer == 1048576);
  CHECK(ok("2G", c).integer == 2147483648LL);
  CHECK(ok("17", c).integer == 17);
  CHECK(ok("0x400", c).integer == 1024);
  CHECK(ok("1.5K", c).integer == 1536);
  CHECK(ok("\"64K\"", c).integer == 65536);  // strings are read as literals
  CHECK(bad("15s", c).find("wrong unit 's'") != std::string::npos);
  CHECK(bad("64KB", c).find("wrong unit 'KB'") != std::string::npos);
  CHECK(bad("1.5", c).find("not a whole number") != std::string::npos);
  CHECK(bad("lots", c).find("expects count") != std::string::npos);
}

TEST_CASE("byte sizes", "[literals]") {
  auto b = ArgSpec::bytes("size");
  CHECK(ok("64KB", b).integer == 65536);
  CHECK(ok("1GB", b).integer == 1073741824LL);
  CHECK(ok("1500", b).integer == 1500);
  CHECK(ok("1500B", b).integer == 1500);
  CHECK(bad("1Gbps", b).find("wrong unit") != std::string::npos);
}

TEST_CASE("durations need a unit and are stored in nanoseconds", "[literals]") {
  auto d = ArgSpec::duration("t");
  CHECK(ok("500ns", d).integer == 500);
  CHECK(ok("10us", d).integer == 10000);
  CHECK(ok("5ms", d).integer == 5000000);
  CHECK(ok("15s", d).integer == 15000000000LL);
  CHECK(ok("30min", d).integer == 1800000000000LL);
  CHECK(ok("1h", d).integer == 3600000000000LL);
  CHECK(ok("1.5s", d).integer == 1500000000LL);
  CHECK(ok("0", d).integer == 0);
  CHECK(bad("15", d).find("needs a unit") != std::string::npos);
  CHECK(bad("15m", d).find("wrong unit 'm'") != std::string::npos);
  CHECK(bad("0.5ns", d).find("whole number") != std::string::npos);
}

TEST_CASE("rates: bits or packets per second, decimal", "[literals]") {
  auto bits = ArgSpec::rate("r", RateUnit::Bits);
  auto pkts = ArgSpec::rate("r", RateUnit::Packets);
  auto any = ArgSpec::any_rate("r");
  CHECK(ok("10Gbps", bits).real == Approx(1e10));
  CHECK(ok("14.88Mpps", pkts).real == Approx(14.88e6));
  CHECK(ok("100Kbps", any).rate_unit == RateUnit::Bits);
  CHECK(ok("1Mpps", any).rate_unit == RateUnit::Packets);
  CHECK(bad("1Mpps", bits).find("wrong unit 'Mpps'") != std::string::npos);
  CHECK(bad("10G", any).find("wrong unit 'G'") != std::string::npos);
  CHECK(bad("100", any).find("needs a unit") != std::string::npos);
}

TEST_CASE("addresses, prefixes and host:port", "[literals]") {
  auto a = ArgSpec::address("a");
  auto p = ArgSpec::prefix("p");
  auto hp = ArgSpec::host_port("c");
  CHECK(ok("10.1.2.3", a).address.to_string() == "10.1.2.3");
  CHECK(ok("fe80::1", a).address.v6);
  CHECK(ok("::1", a).address.to_string() == "::1");
  CHECK(ok("10.0.0.0/8", p).integer == 8);
  CHECK(ok("2001:db8::/32", p).integer == 32);
  CHECK(ok("192.168.1.1", p).integer == 32);
  CHECK(bad("10.0.0.0/40", p).find("longer than 32") != std::string::npos);
  CHECK(bad("10.0.0.0/8", a).find("not the prefix") != std::string::npos);
  Value v = ok("127.0.0.1:4739", hp);
  CHECK(v.text == "127.0.0.1");
  CHECK(v.integer == 4739);
  v = ok("[::1]:4739", hp);
  CHECK(v.text == "::1");
  CHECK(v.address.v6);
  CHECK(ok("collector.example.net:2055", hp).text == "collector.example.net");
  CHECK(ok("\"127.0.0.1:4739\"", hp).integer == 4739);
  CHECK(bad("127.0.0.1:70000", hp).find("out of range") != std::string::npos);
  CHECK(bad("127.0.0.1", hp).find("expects host:port") != std::string::npos);
}

TEST_CASE("symbols, booleans, fractions, lists", "[literals]") {
  auto s = ArgSpec::symbol("direction", {"uni", "bi"});
  CHECK(ok("bi", s).text == "bi");
  std::string err;
  LiteralProblem prob;
  ast::Literal lit;
  REQUIRE(lex_single_literal("bii", lit));
  Value out;
  CHECK_FALSE(convert_literal(lit, s, out, prob));
  CHECK(prob.hint == "did you mean 'bi'?");

  auto b = ArgSpec::boolean("x");
  CHECK(ok("true", b).integer == 1);
  CHECK(ok("off", b).integer == 0);
  CHECK(bad("maybe", b).find("true or false") != std::string::npos);

  auto f = ArgSpec::fraction("rate");
  CHECK(ok("1/100", f).real == Approx(0.01));
  CHECK(ok("0.25", f).real == Approx(0.25));
  CHECK(bad("3/2", f).find("larger than 1") != std::string::npos);
  CHECK(bad("1/0", f).find("divides by zero") != std::string::npos);

  auto sizes = ArgSpec::bytes("sizes").lists().or_words({"imix"});
  CHECK(ok("imix", sizes).is_symbol);
  Value l = ok("[64B, 576, 1500B]", sizes);
  REQUIRE(l.is_list);
  REQUIRE(l.items.size() == 3);
  CHECK(l.items[1].integer == 576);
  CHECK(bad("[64B, 1s]", sizes).find("wrong unit 's'") != std::string::npos);
  CHECK(bad("[1, 2]", ArgSpec::count("n")).find("not a list") != std::string::npos);
}

TEST_CASE("ranges are checked in base units", "[literals]") {
  auto c = ArgSpec::count("capacity").range(1024, 1073741824.0);
  CHECK(ok("1K", c).integer == 1024);
  CHECK(bad("2G", c).find("out of range") != std::string::npos);
  auto d = ArgSpec::duration("idle").at_least(1e6);
  CHECK(bad("10us", d).find("out of range") != std::string::npos);
}

TEST_CASE("the lexer keeps addresses apart from declarations", "[literals]") {
  ast::Literal lit;
  REQUIRE(lex_single_literal("fe80::1", lit));
  CHECK(lit.kind == ast::LiteralKind::Address);
  REQUIRE(lex_single_literal("1.2.3.4", lit));
  CHECK(lit.kind == ast::LiteralKind::Address);
  REQUIRE(lex_single_literal("1.5", lit));
  CHECK(lit.kind == ast::LiteralKind::Number);
  REQUIRE(lex_single_literal("1/8", lit));
  CHECK(lit.kind == ast::LiteralKind::Fraction);
  REQUIRE(lex_single_literal("localhost:80", lit));
  CHECK(lit.kind == ast::LiteralKind::HostPort);
  CHECK_FALSE(lex_single_literal("1 2", lit));
}

// Issue 13, finding 3: `capacity 0xg` threw std::invalid_argument out of
// std::stoull, which aborted `sluice check` and a probe on SIGHUP.
TEST_CASE("malformed numbers are errors, never exceptions", "[literals]") {
  auto c = ArgSpec::count("capacity");
  CHECK(bad("0xg", c) == "malformed number '0xg'");
  CHECK(bad("0xfg", c) == "malformed number '0xfg'");
  CHECK(bad("0xG", c) == "malformed number '0xG'");
  CHECK(bad("0x10000000000000000", c) == "malformed number '0x10000000000000000'");  // past 64 bits
  CHECK(ok("0xFFFF", c).integer == 65535);
  CHECK(bad("0xffffffffffffffff", c).find("is too large") != std::string::npos);
  for (auto spec : {ArgSpec::bytes("b"), ArgSpec::duration("d"), ArgSpec::any_rate("r"), ArgSpec::fraction("f")})
    CHECK_FALSE(bad("0xg", spec).empty());
  // fractions whose digits are past a double's range give no number
  std::string huge(400, '9');
  CHECK(bad(huge + "/" + huge, ArgSpec::fraction("f")).find("has numbers too large") != std::string::npos);
  // a long literal is cut in the message
  std::string long_word(5000, 'x');
  std::string err = bad(long_word, ArgSpec::boolean("on"));
  CHECK(err.size() < 200);
  CHECK(err.find(std::string(40, 'x') + "...") != std::string::npos);
}
