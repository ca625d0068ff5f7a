// Where a Filter expression libpcap refused is wrong: a tokenizer following
// libpcap's scanner (scanner.l) and a backtracking recognizer of its grammar
// (grammar.y). libpcap says "syntax error" and no more; this is only
// consulted after it refused an expression, to say where. Acceptance is
// libpcap's (pcap_filter.cc).
#include "engine/packet/filter_diagnosis.hh"

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/base/diagnostics.hh"
#include "engine/packet/pcap_filter.hh"

namespace sluice {

constexpr int kMaxFilterTerms = 256;

namespace {

enum class Tk { End, Num, Hid, Hid6, Eid, Aid, Id, Kw, Op, Bad };

enum class Kw {
  None, Pname, Src, Dst, AddrN, Host, Net, Port, Portrange, Proto, Protochain, Gateway, Mask,
  Less, Greater, Byte, Broadcast, Multicast, And, Or, Not, Len, Inbound, Outbound, Ifindex,
  Vlan, Mpls, Pppoed, Pppoes, Geneve, Llc, AtmType, AtmField, Mtp2, Mtp3,
  PfName, PfNum, PfReason, PfAction, Type, Subtype, Dir,
};

struct Tok {
  Tk t = Tk::End;
  Kw k = Kw::None;
  std::string text;  // an escaped name (`\tcp`) without its backslash; operators as written
  int off = 0, len = 0;
  int end() const { return off + len; }
};

// The keywords of libpcap 1.10's scanner.
const std::unordered_map<std::string, Kw> &keywords() {
  static const std::unordered_map<std::string, Kw> m = [] {
    std::unordered_map<std::string, Kw> k;
    for (const char *w : {"link", "ether", "ppp", "slip", "fddi", "tr", "wlan", "arp", "rarp", "ip", "sctp",
                          "tcp", "udp", "icmp", "igmp", "igrp", "pim", "vrrp", "carp", "radio", "ip6", "icmp6",
                          "ah", "esp", "atalk", "aarp", "decnet", "lat", "sca", "moprc", "mopdl", "iso", "esis",
                          "es-is", "isis", "is-is", "l1", "l2", "iih", "lsp", "snp", "csnp", "psnp", "clnp", "stp",
                          "ipx", "netbeui"})
      k[w] = Kw::Pname;
    k["src"] = Kw::Src;
    k["dst"] = Kw::Dst;
    for (const char *w : {"address1", "addr1", "address2", "addr2", "address3", "addr3", "address4", "addr4",
                          "ra", "ta"})
      k[w] = Kw::AddrN;
    k["host"] = Kw::Host;
    k["net"] = Kw::Net;
    k["port"] = Kw::Port;
    k["portrange"] = Kw::Portrange;
    k["proto"] = Kw::Proto;
    k["protochain"] = Kw::Protochain;
    k["gateway"] = Kw::Gateway;
    k["mask"] = Kw::Mask;
    k["less"] = Kw::Less;
    k["greater"] = Kw::Greater;
    k["byte"] = Kw::Byte;
    k["broadcast"] = Kw::Broadcast;
    k["multicast"] = Kw::Multicast;
    k["and"] = Kw::And;
    k["or"] = Kw::Or;
    k["not"] = Kw::Not;
    k["len"] = k["length"] = Kw::Len;
    k["inbound"] = Kw::Inbound;
    k["outbound"] = Kw::Outbound;
    k["ifindex"] = Kw::Ifindex;
    k["vlan"] = Kw::Vlan;
    k["mpls"] = Kw::Mpls;
    k["pppoed"] = Kw::Pppoed;
    k["pppoes"] = Kw::Pppoes;
    k["geneve"] = Kw::Geneve;
    k["llc"] = Kw::Llc;
    for (const char *w : {"lane", "metac", "bcc", "oamf4ec", "oamf4sc", "sc", "ilmic", "oam", "oamf4", "connectmsg",
                          "metaconnect"})
      k[w] = Kw::AtmType;
    k["vpi"] = k["vci"] = Kw::AtmField;
    for (const char *w : {"fisu", "lssu", "lsu", "msu", "hfisu", "hlssu", "hmsu"}) k[w] = Kw::Mtp2;
    for (const char *w : {"sio", "opc", "dpc", "sls", "hsio", "hopc", "hdpc", "hsls"}) k[w] = Kw::Mtp3;
    for (const char *w : {"on", "ifname", "rset", "ruleset"}) k[w] = Kw::PfName;
    for (const char *w : {"rnr", "rulenum", "srnr", "subrulenum"}) k[w] = Kw::PfNum;
    k["reason"] = Kw::PfReason;
    k["action"] = Kw::PfAction;
    k["type"] = Kw::Type;
    k["subtype"] = Kw::Subtype;
    k["direction"] = k["dir"] = Kw::Dir;
    return k;
  }();
  return m;
}

// Names the scanner turns into numbers.
const std::unordered_set<std::string> &named_numbers() {
  static const std::unordered_set<std::string> s = {
      "icmptype", "icmpcode", "icmp-echoreply", "icmp-unreach", "icmp-sourcequench", "icmp-redirect", "icmp-echo",
      "icmp-routeradvert", "icmp-routersolicit", "icmp-timxceed", "icmp-paramprob", "icmp-tstamp",
      "icmp-tstampreply", "icmp-ireq", "icmp-ireqreply", "icmp-maskreq", "icmp-maskreply", "icmp6type",
      "icmp6code", "icmp6-destinationunreach", "icmp6-packettoobig", "icmp6-timeexceeded",
      "icmp6-parameterproblem", "icmp6-echo", "icmp6-echoreply", "icmp6-multicastlistenerquery",
      "icmp6-multicastlistenerreportv1", "icmp6-multicastlistenerdone", "icmp6-routersolicit",
      "icmp6-routeradvert", "icmp6-neighborsolicit", "icmp6-neighboradvert", "icmp6-redirect",
      "icmp6-routerrenum", "icmp6-nodeinformationquery", "icmp6-nodeinformationresponse",
      "icmp6-ineighbordiscoverysolicit", "icmp6-ineighbordiscoveryadvert", "icmp6-multicastlistenerreportv2",
      "icmp6-homeagentdiscoveryrequest", "icmp6-homeagentdiscoveryreply", "icmp6-mobileprefixsolicit",
      "icmp6-mobileprefixadvert", "icmp6-certpathsolicit", "icmp6-certpathadvert",
      "icmp6-multicastrouteradvert", "icmp6-multicastroutersolicit", "icmp6-multicastrouterterm", "tcpflags",
      "tcp-fin", "tcp-syn", "tcp-rst", "tcp-push", "tcp-ack", "tcp-urg", "tcp-ece", "tcp-cwr"};
  return s;
}

// Candidates for "did you mean": the common words first (closest_match keeps
// the first of equally close ones).
const std::vector<std::string> &suggestions() {
  static const std::vector<std::string> v = {
      "and", "or", "not", "host", "net", "port", "portrange", "proto", "src", "dst", "tcp", "udp", "icmp",
      "icmp6", "ip", "ip6", "arp", "rarp", "sctp", "vlan", "mpls", "len", "less", "greater", "ether",
      "broadcast", "multicast", "gateway", "mask", "pppoes", "pppoed", "protochain", "igmp", "esp", "ah",
      "inbound", "outbound", "ifindex", "geneve", "llc", "link", "length"};
  return v;
}

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// N: decimal digits or 0x hex digits; length of the match at i, 0 if none.
size_t match_n(std::string_view s, size_t i) {
  if (i + 2 < s.size() && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X') && is_hex(s[i + 2])) {
    size_t j = i + 2;
    while (j < s.size() && is_hex(s[j])) ++j;
    return j - i;
  }
  size_t j = i;
  while (j < s.size() && is_digit(s[j])) ++j;
  return j - i;
}

// N.N, N.N.N or N.N.N.N (an IPv4 host or network, possibly abbreviated).
size_t match_hid(std::string_view s, size_t i) {
  size_t j = i, best = 0;
  for (int parts = 1; parts <= 4; ++parts) {
    size_t n = match_n(s, j);
    if (!n) break;
    j += n;
    if (parts >= 2) best = j - i;
    if (j >= s.size() || s[j] != '.') break;
    ++j;
  }
  return best;
}

// Six groups of 1-2 hex digits joined by ':', '-' or '.', or xxxx.xxxx.xxxx.
size_t match_mac(std::string_view s, size_t i) {
  auto groups = [&](char sep, size_t min_digits, size_t max_digits, int count) -> size_t {
    size_t j = i;
    for (int g = 0; g < count; ++g) {
      size_t d = 0;
      while (j + d < s.size() && d < max_digits && is_hex(s[j + d])) ++d;
      if (d < min_digits) return 0;
      j += d;
      if (g + 1 < count) {
        if (j >= s.size() || s[j] != sep) return 0;
        ++j;
      }
    }
    return j - i;
  };
  size_t best = 0;
  for (char sep : {':', '-', '.'}) best = std::max(best, groups(sep, 1, 2, 6));
  best = std::max(best, groups('.', 4, 4, 3));
  return best;
}

// The longest prefix of the [0-9a-fA-F:.] run at i that is an IPv6 address.
size_t match_v6(std::string_view s, size_t i) {
  size_t j = i;
  bool colon = false;
  while (j < s.size() && (is_hex(s[j]) || s[j] == ':' || s[j] == '.')) colon |= s[j++] == ':';
  if (!colon) return 0;
  for (size_t n = std::min<size_t>(j - i, 45); n >= 2; --n) {  // 45: the longest IPv6 text
    std::string cand(s.substr(i, n));
    unsigned char buf[16];
    if (cand.find(':') != std::string::npos && inet_pton(AF_INET6, cand.c_str(), buf) == 1) return n;
  }
  return 0;
}

// The ID pattern [A-Za-z0-9]([-_.A-Za-z0-9]*[.A-Za-z0-9])?
size_t match_id(std::string_view s, size_t i) {
  if (i >= s.size() || !is_alnum(s[i])) return 0;
  size_t j = i + 1;
  while (j < s.size() && (is_alnum(s[j]) || s[j] == '-' || s[j] == '_' || s[j] == '.')) ++j;
  while (j > i + 1 && (s[j - 1] == '-' || s[j - 1] == '_')) --j;
  return j - i;
}

std::vector<Tok> tokenize(std::string_view s) {
  std::vector<Tok> out;
  size_t i = 0;
  auto push = [&](Tk t, size_t len, Kw k = Kw::None, std::string text = {}) {
    Tok tok;
    tok.t = t;
    tok.k = k;
    tok.off = static_cast<int>(i);
    tok.len = static_cast<int>(len);
    tok.text = text.empty() ? std::string(s.substr(i, len)) : std::move(text);
    out.push_back(std::move(tok));
    i += len;
  };
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') { ++i; continue; }
    if (c == '\\') {
      size_t j = i + 1;
      while (j < s.size() && !std::strchr(" !()\n\t", s[j])) ++j;
      if (j == i + 1) { push(Tk::Bad, 1); continue; }
      push(Tk::Id, j - i, Kw::None, std::string(s.substr(i + 1, j - i - 1)));
      continue;
    }
    std::string_view two = s.substr(i, 2);
    if (two == "&&") { push(Tk::Kw, 2, Kw::And); continue; }
    if (two == "||") { push(Tk::Kw, 2, Kw::Or); continue; }
    if (two == ">=" || two == "<=" || two == "!=" || two == "==" || two == "<<" || two == ">>") {
      push(Tk::Op, 2);
      continue;
    }
    if (c == '!') { push(Tk::Kw, 1, Kw::Not); continue; }
    if (std::strchr("+-*/%:[]<>()&|^=", c)) { push(Tk::Op, 1); continue; }
    if (c == '$' && i + 1 < s.size() && is_hex(s[i + 1])) {
      push(Tk::Aid, i + 2 < s.size() && is_hex(s[i + 2]) ? 3 : 2);
      continue;
    }
    if (!is_alnum(c)) { push(Tk::Bad, 1); continue; }
    // longest match; on ties the scanner's rule order: keyword, MAC, N, HID, V6, named number, ID
    size_t id = match_id(s, i), mac = match_mac(s, i), n = match_n(s, i), hid = match_hid(s, i), v6 = match_v6(s, i);
    size_t best = std::max({id, mac, n, hid, v6});
    std::string word(s.substr(i, id));
    auto kw = keywords().find(word);
    if (id == best && kw != keywords().end()) push(Tk::Kw, id, kw->second);
    else if (mac == best) push(Tk::Eid, mac);
    else if (n == best) push(Tk::Num, n);
    else if (hid == best) push(Tk::Hid, hid);
    else if (v6 == best) push(Tk::Hid6, v6);
    else if (named_numbers().count(word)) push(Tk::Num, id);
    else push(Tk::Id, id);
  }
  Tok end;
  end.t = Tk::End;
  end.off = static_cast<int>(s.size());
  out.push_back(end);
  return out;
}

}  // namespace

std::optional<FilterError> too_many_terms(std::string_view expr) {
  int terms = 1;
  for (const Tok &t : tokenize(expr)) {
    if (t.t != Tk::Kw || (t.k != Kw::And && t.k != Kw::Or) || ++terms <= kMaxFilterTerms) continue;
    return FilterError{"the expression has more than " + std::to_string(kMaxFilterTerms) +
                           " terms joined by and/or, the most libpcap compiles in reasonable time and memory "
                           "(its optimizer's cost grows with the cube of the expression); split it over several "
                           "Filter elements, or write a range as one term (`net 10.0.0.0/16`, "
                           "`portrange 1000-2000`)",
                       t.off, static_cast<int>(expr.size()) - t.off};
  }
  return std::nullopt;
}

namespace {

// A problem libpcap finds after parsing (a prefix too long, a bad load size),
// located by the recognizer; used when libpcap's message contains `key`.
struct Located {
  std::string key;
  FilterError where;
};

class Recognizer {
public:
  Recognizer(std::string_view expr, std::vector<Tok> toks) : s_(expr), t_(std::move(toks)) {}

  // The syntax error, if the recognizer finds one.
  std::optional<FilterError> run() {
    if (tok().t == Tk::End) return std::nullopt;
    if (expr()) {
      if (tok().t == Tk::End) return std::nullopt;
      if (!failure_ || failure_->pos <= pos_) return trailing(pos_, false);
    }
    if (failure_) return failure_->err;
    return std::nullopt;
  }

  const std::vector<Located> &located() const { return located_; }

  // After a parse without error that libpcap still called a syntax error (its
  // qualifiers did not fit a value): the first bare name continuing an
  // `and`/`or`, which takes the qualifiers before it, is the likely culprit.
  std::optional<FilterError> suspicious_bare_name() const {
    if (bare_ids_.empty()) return std::nullopt;
    size_t i = *std::min_element(bare_ids_.begin(), bare_ids_.end());
    FilterError e = unknown_keyword(i);
    if (suggestion(i).empty())
      e.message += " (after '" + src(i - 1) + "' a name alone is a value for the qualifiers before it)";
    return e;
  }

private:
  struct Failure {
    size_t pos;
    int prio;
    FilterError err;
  };

  // Nesting is bounded (libpcap's own parser stack is too): a config file
  // must not overflow ours.
  static constexpr int kMaxDepth = 200;
  struct Nest {
    Recognizer &r;
    explicit Nest(Recognizer &rec) : r(rec) { ++r.depth_; }
    ~Nest() { --r.depth_; }
    bool too_deep() {
      if (r.depth_ <= kMaxDepth) return false;
      r.fail(r.pos_, "expression nested too deeply", 4);
      return true;
    }
  };

  struct Qual {
    std::string what;  // "a host name or address"
    size_t last = 0;   // the qualifier token the value must follow
  };

  const Tok &tok() const { return t_[pos_]; }
  const Tok &at(size_t i) const { return t_[std::min(i, t_.size() - 1)]; }
  bool is(Kw k) const { return tok().t == Tk::Kw && tok().k == k; }
  bool is_kw(size_t i, Kw k) const { return at(i).t == Tk::Kw && at(i).k == k; }
  bool is_op(const char *op) const { return tok().t == Tk::Op && tok().text == op; }
  bool is_op_at(size_t i, const char *op) const { return at(i).t == Tk::Op && at(i).text == op; }
  bool is_relop() const {
    if (tok().t != Tk::Op) return false;
    for (const char *op : {">", ">=", "=", "==", "<=", "<", "!="})
      if (tok().text == op) return true;
    return false;
  }
  bool is_binop() const {
    if (tok().t != Tk::Op) return false;
    for (const char *op : {"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"})
      if (tok().text == op) return true;
    return false;
  }

  // The token as written (with the backslash of an escaped name), shortened.
  std::string src(size_t i) const {
    const Tok &t = at(i);
    std::string text(s_.substr(t.off, t.len));
    return text.size() > 32 ? text.substr(0, 32) + "..." : text;
  }
  std::string src_span(size_t a, size_t b) const {  // tokens a..b-1
    std::string text(s_.substr(at(a).off, at(b - 1).end() - at(a).off));
    return text.size() > 32 ? text.substr(0, 32) + "..." : text;
  }
  // ", not 'x'" for the token found instead, nothing at the end
  std::string found(size_t i) const {
    const Tok &t = at(i);
    if (t.t == Tk::End) return "";
    if (t.t == Tk::Kw && (t.k == Kw::And || t.k == Kw::Or || t.k == Kw::Not))
      return ", not '" + src(i) + "'";
    if (t.t == Tk::Kw) return ", not the keyword '" + src(i) + "'";
    return ", not '" + src(i) + "'";
  }
  std::string after(const std::string &what, size_t after_tok) const {
    return "expected " + what + " after '" + src(after_tok) + "'" + found(after_tok + 1);
  }
  FilterError at_tok(size_t i, std::string msg) const { return {std::move(msg), at(i).off, at(i).len}; }

  // Furthest failure wins; at the same token the higher priority, then the
  // later (outer, with more context) one.
  void fail(size_t pos, FilterError err, int prio = 1) {
    if (!failure_ || pos > failure_->pos || (pos == failure_->pos && prio >= failure_->prio))
      failure_ = Failure{pos, prio, std::move(err)};
  }
  void fail(size_t pos, std::string msg, int prio = 1) { fail(pos, at_tok(pos, std::move(msg)), prio); }

  std::string suggestion(size_t i) const {
    if (at(i).t != Tk::Id) return "";
    const std::string &w = at(i).text;
    std::string m = closest_match(w, suggestions());
    if (!m.empty()) return m;
    for (const std::string &k : suggestions())  // two letters swapped: "tpc"
      if (k.size() == w.size() && w.size() >= 3)
        for (size_t j = 0; j + 1 < w.size(); ++j) {
          std::string swapped = w;
          std::swap(swapped[j], swapped[j + 1]);
          if (swapped == k) return k;
        }
    return "";
  }
  FilterError unknown_keyword(size_t i) const {
    std::string m = suggestion(i);
    return at_tok(i, "unknown keyword '" + src(i) + "'" + (m.empty() ? "" : "; did you mean '" + m + "'?"));
  }

  // Something other than 'and', 'or' (or ')') after a complete expression.
  FilterError trailing(size_t p, bool in_paren) const {
    if (is_op_at(p, ")") && !in_paren) return at_tok(p, "unbalanced ')': there is no '(' to close");
    if (p > 0 && bare_ids_.count(p - 1) && !suggestion(p - 1).empty()) return unknown_keyword(p - 1);
    if (!suggestion(p).empty()) return unknown_keyword(p);
    if (p > 0 && at(p - 1).t == Tk::Kw && at(p - 1).k == Kw::Pname &&
        (at(p).t == Tk::Num || at(p).t == Tk::Hid || at(p).t == Tk::Hid6)) {
      bool num = at(p).t == Tk::Num;
      return at_tok(p, "'" + src(p) + "' needs a qualifier; did you mean '" + src(p - 1) + (num ? " port " : " host ") +
                           src(p) + "'?");
    }
    if (at(p).t == Tk::Bad) return at_tok(p, "unexpected character '" + src(p) + "'");
    if (is_op_at(p, "/") && p > 0 && at(p - 1).t == Tk::Num)
      return at_tok(p, "a network with a prefix length is written with a dotted address, e.g. '10.0.0.0/8'");
    return at_tok(p, std::string(in_paren ? "expected 'and', 'or' or ')'" : "expected 'and' or 'or'") + " before '" +
                         src(p) + "'");
  }

  // What stands where a primitive should.
  FilterError not_a_primitive(size_t i, int &prio) const {
    const Tok &t = at(i);
    prio = 1;
    switch (t.t) {
      case Tk::End: return at_tok(i, "expected a primitive such as 'tcp' or 'host 10.0.0.1'");
      case Tk::Bad: prio = 3; return at_tok(i, "unexpected character '" + src(i) + "'");
      case Tk::Id:
        if (!suggestion(i).empty()) prio = 2;
        if (suggestion(i).empty() && t.text.find_first_of(".0123456789") != std::string::npos) {
          prio = 2;
          return at_tok(i, "'" + src(i) + "' needs a qualifier, e.g. 'host " + src(i) + "'");
        }
        return unknown_keyword(i);
      case Tk::Num: prio = 2; return at_tok(i, "'" + src(i) + "' needs a qualifier, e.g. 'port " + src(i) + "'");
      case Tk::Hid:
      case Tk::Hid6:
        prio = 2;
        if (is_op_at(i + 1, "/")) return at_tok(i, "'" + src(i) + "' needs a qualifier, e.g. 'net " + src_span(i, i + 3) + "'");
        return at_tok(i, "'" + src(i) + "' needs a qualifier, e.g. 'host " + src(i) + "'");
      case Tk::Eid: prio = 2; return at_tok(i, "'" + src(i) + "' needs a qualifier, e.g. 'ether host " + src(i) + "'");
      default: return at_tok(i, "expected a primitive such as 'tcp' or 'host 10.0.0.1'" + found(i));
    }
  }

  // expr := term { (and | or) (term | id) }
  bool expr() {
    if (!term()) return false;
    while (is(Kw::And) || is(Kw::Or)) {
      size_t op = pos_++;
      size_t start = pos_;
      if (term()) continue;
      pos_ = start;
      if (id()) {  // `host a or b`, `port 80 or 443`: the qualifiers carry over
        if (pos_ == start + 1 && at(start).t == Tk::Id) bare_ids_.insert(start);
        continue;
      }
      pos_ = start;
      fail(start, after("a primitive", op));
      return false;
    }
    return true;
  }

  // term := not term | rterm
  bool term() {
    Nest nest(*this);
    if (nest.too_deep()) return false;
    if (is(Kw::Not)) {
      size_t op = pos_++;
      size_t start = pos_;
      if (term()) return true;
      fail(start, after("a primitive", op));
      return false;
    }
    return rterm();
  }

  bool starts_arith() const {
    return tok().t == Tk::Num || is(Kw::Len) || is_op("-") || is_op("(") || (is(Kw::Pname) && is_op_at(pos_ + 1, "["));
  }

  bool rterm() {
    Nest nest(*this);
    if (nest.too_deep()) return false;
    size_t start = pos_;
    if (starts_arith()) {
      if (relation()) return true;
      pos_ = start;
    }
    if (is_op("(")) {
      ++pos_;
      size_t inner = pos_;
      if (!expr()) {
        fail(inner, after("a primitive", start));
        return false;
      }
      if (is_op(")")) {
        ++pos_;
        return true;
      }
      if (tok().t == Tk::End) fail(pos_, at_tok(start, "unbalanced '(': it is never closed with ')'"), 3);
      else fail(pos_, trailing(pos_, true), 2);
      return false;
    }
    Qual q;
    if (head(q)) {
      size_t value = pos_;
      if (id()) return true;
      pos_ = value;
      std::string msg = after(q.what, q.last);
      if (tok().t == Tk::Kw && (q.what.find("protocol") != std::string::npos))
        msg += " (a protocol named like a keyword is written with a backslash: '\\" + tok().text + "')";
      fail(value, msg);
      return false;
    }
    pos_ = start;
    switch (other()) {
      case Result::Ok: return true;
      case Result::Error: return false;
      case Result::No: break;
    }
    pos_ = start;
    if (is(Kw::Pname)) {
      ++pos_;
      return true;
    }
    int prio;
    FilterError e = not_a_primitive(pos_, prio);
    fail(pos_, std::move(e), prio);
    return false;
  }

  // head := [pname] (proto | protochain | gateway | dqual [aqual] | aqual)
  bool head(Qual &q) {
    size_t start = pos_;
    if (is(Kw::Pname)) ++pos_;
    if (is(Kw::Proto) || is(Kw::Protochain)) {
      q = {"a protocol number or name", pos_++};
      aqual_ = Kw::Proto;
      return true;
    }
    if (is(Kw::Gateway)) {
      q = {"a host name", pos_++};
      aqual_ = Kw::Gateway;
      return true;
    }
    bool dir = false;
    if (is(Kw::Src) || is(Kw::Dst)) {
      dir = true;
      q.last = pos_++;
      if ((is(Kw::And) || is(Kw::Or)) && at(pos_ + 1).t == Tk::Kw &&
          (at(pos_ + 1).k == Kw::Src || at(pos_ + 1).k == Kw::Dst) && at(pos_ + 1).k != at(q.last).k) {
        pos_ += 2;
        q.last = pos_ - 1;
      }
    } else if (is(Kw::AddrN)) {
      dir = true;
      q.last = pos_++;
    }
    if (dir) q.what = "'host', 'net', 'port', 'portrange' or an address";
    if (is(Kw::Host) || is(Kw::Net) || is(Kw::Port) || is(Kw::Portrange)) {
      aqual_ = tok().k;
      q.last = pos_;
      q.what = is(Kw::Host)  ? "a host name or address"
               : is(Kw::Net) ? "a network such as 10.0.0.0/8"
               : is(Kw::Port) ? "a port number or name"
                              : "a port range such as 1-1024";
      ++pos_;
      return true;
    }
    if (dir) {
      aqual_ = Kw::Host;
      return true;
    }
    pos_ = start;
    return false;
  }

  // id := nid | pnum | '(' (nid | pnum) { (and | or) id } ')'
  bool id() {
    Nest nest(*this);
    if (nest.too_deep()) return false;
    if (nid()) return true;
    if (tok().t == Tk::Num) {
      ++pos_;
      return true;
    }
    if (!is_op("(")) return false;
    size_t open = pos_++;
    size_t start = pos_;
    if (!id()) {
      fail(start, after("a value", open));
      return false;
    }
    while (is(Kw::And) || is(Kw::Or)) {
      size_t op = pos_++;
      size_t value = pos_;
      if (!id()) {
        fail(value, after("a value", op));
        return false;
      }
    }
    if (is_op(")")) {
      ++pos_;
      return true;
    }
    if (tok().t == Tk::End) fail(pos_, at_tok(open, "unbalanced '(': it is never closed with ')'"), 3);
    else fail(pos_, "expected 'and', 'or' or ')' before '" + src(pos_) + "'");
    return false;
  }

  bool nid() {
    if (tok().t == Tk::Id || tok().t == Tk::Eid || tok().t == Tk::Aid) {
      ++pos_;
      return true;
    }
    if (tok().t == Tk::Hid || tok().t == Tk::Hid6) {
      size_t addr = pos_++;
      bool v6 = at(addr).t == Tk::Hid6;
      if (aqual_ == Kw::Port || aqual_ == Kw::Portrange || aqual_ == Kw::Proto)
        located_.push_back({"modifier applied to", at_tok(addr, "")});
      if (is_op("/")) {
        size_t slash = pos_++;
        if (tok().t != Tk::Num) {
          fail(pos_, after("a prefix length", slash));
          return false;
        }
        unsigned long len = std::strtoul(tok().text.c_str(), nullptr, 0);
        FilterError whole{"", at(addr).off, tok().end() - at(addr).off};
        if (len > (v6 ? 128u : 32u)) located_.push_back({"mask length", whole});
        located_.push_back({"non-network bits", whole});
        ++pos_;
        return true;
      }
      if (!v6 && is(Kw::Mask)) {
        size_t mask = pos_++;
        if (tok().t != Tk::Hid) {
          fail(pos_, after("a netmask such as 255.0.0.0", mask));
          return false;
        }
        located_.push_back({"non-network bits", {"", at(addr).off, tok().end() - at(addr).off}});
        ++pos_;
        return true;
      }
      return true;
    }
    if (is(Kw::Not)) {
      size_t save = pos_++;
      if (id()) return true;
      pos_ = save;
    }
    return false;
  }

  // relation := arith relop arith
  bool relation() {
    size_t start = pos_;
    bool simple;
    if (!arith(simple)) return false;
    if (!is_relop()) {
      if (!simple)
        fail(pos_, "expected a comparison such as '> 0' after '" + src_span(start, pos_) + "'" + found(pos_));
      return false;
    }
    size_t op = pos_++;
    size_t value = pos_;
    bool s2;
    if (!arith(s2)) {
      fail(value, after("a value", op));
      return false;
    }
    return true;
  }

  // arith := unary { binop unary }; simple when it is just a number
  bool arith(bool &simple) {
    if (!unary(simple)) return false;
    while (is_binop()) {
      size_t op = pos_++;
      simple = false;
      size_t value = pos_;
      bool s;
      if (!unary(s)) {
        fail(value, after("a value", op));
        return false;
      }
    }
    return true;
  }

  bool unary(bool &simple) {
    simple = true;
    Nest nest(*this);
    if (nest.too_deep()) return false;
    if (is_op("-")) {
      size_t op = pos_++;
      simple = false;
      bool s;
      if (unary(s)) return true;
      fail(pos_, after("a value", op));
      return false;
    }
    if (tok().t == Tk::Num) {
      ++pos_;
      return true;
    }
    if (is(Kw::Len)) {
      ++pos_;
      simple = false;
      return true;
    }
    if (is(Kw::Pname) && is_op_at(pos_ + 1, "[")) {
      simple = false;
      size_t open = pos_ + 1;
      pos_ += 2;
      size_t offset = pos_;
      bool s;
      if (!arith(s)) {
        fail(offset, after("an offset", open));
        return false;
      }
      if (is_op(":")) {
        size_t colon = pos_++;
        if (tok().t != Tk::Num) {
          fail(pos_, after("a size (1, 2 or 4)", colon));
          return false;
        }
        if (tok().text != "1" && tok().text != "2" && tok().text != "4") located_.push_back({"data size", at_tok(pos_, "")});
        ++pos_;
      }
      if (!is_op("]")) {
        fail(pos_, "expected ']' to close '" + src_span(open - 1, open + 1) + "'" + found(pos_));
        return false;
      }
      ++pos_;
      return true;
    }
    if (is_op("(")) {  // may as well be a parenthesized expression: no failure recorded
      ++pos_;
      bool s;
      if (!arith(s) || !is_op(")")) return false;
      ++pos_;
      simple = s;
      return true;
    }
    return false;
  }

  enum class Result { No, Ok, Error };

  Result need(Tk t, size_t kw, const std::string &what) {
    if (tok().t == t) {
      ++pos_;
      return Result::Ok;
    }
    fail(pos_, after(what, kw));
    return Result::Error;
  }
  Result need_num_or_name(size_t kw, const std::string &what) {
    if (tok().t == Tk::Num || tok().t == Tk::Id) {
      ++pos_;
      return Result::Ok;
    }
    fail(pos_, after(what, kw));
    return Result::Error;
  }
  // optional pnum after vlan, mpls, pppoes, geneve
  void optional_pnum() {
    size_t save = pos_;
    size_t depth = 0;
    while (is_op("(")) ++pos_, ++depth;
    if (tok().t != Tk::Num) {
      pos_ = save;
      return;
    }
    ++pos_;
    for (; depth > 0; --depth) {
      if (!is_op(")")) {
        pos_ = save;
        return;
      }
      ++pos_;
    }
  }
  // the value of vpi/vci and of the MTP3 fields: NUM | relop NUM | '(' NUM { or NUM } ')'
  Result field_value(size_t kw) {
    if (tok().t == Tk::Num) return ++pos_, Result::Ok;
    if (is_relop()) {
      size_t op = pos_++;
      return need(Tk::Num, op, "a number");
    }
    if (is_op("(")) {
      size_t open = pos_++;
      if (need(Tk::Num, open, "a number") != Result::Ok) return Result::Error;
      while (is(Kw::Or)) {
        size_t op = pos_++;
        if (need(Tk::Num, op, "a number") != Result::Ok) return Result::Error;
      }
      if (is_op(")")) return ++pos_, Result::Ok;
      fail(pos_, "expected 'or' or ')' before '" + src(pos_) + "'");
      return Result::Error;
    }
    fail(pos_, after("a number or a comparison", kw));
    return Result::Error;
  }

  Result other() {
    bool pq = is(Kw::Pname);
    if (pq) ++pos_;
    if (is(Kw::Broadcast) || is(Kw::Multicast)) return ++pos_, Result::Ok;
    if (is(Kw::Type)) {
      size_t kw = pos_++;
      if (need_num_or_name(kw, "an 802.11 type") != Result::Ok) return Result::Error;
      if (is(Kw::Subtype)) {
        size_t sub = pos_++;
        return need_num_or_name(sub, "an 802.11 subtype");
      }
      return Result::Ok;
    }
    if (is(Kw::Subtype)) {
      size_t kw = pos_++;
      return need(Tk::Id, kw, "an 802.11 subtype name");
    }
    if (is(Kw::Dir)) {
      size_t kw = pos_++;
      return need_num_or_name(kw, "an 802.11 direction");
    }
    if (pq || tok().t != Tk::Kw) return Result::No;
    size_t kw = pos_;
    switch (tok().k) {
      case Kw::Less:
      case Kw::Greater:
        ++pos_;
        return need(Tk::Num, kw, "a length in bytes");
      case Kw::Byte: {
        ++pos_;
        if (need(Tk::Num, kw, "a byte offset") != Result::Ok) return Result::Error;
        size_t op = pos_;
        if (!(is_op("&") || is_op("|") || is_op("<") || is_op(">") || is_op("="))) {
          fail(pos_, after("one of '&', '|', '<', '>', '='", op - 1));
          return Result::Error;
        }
        ++pos_;
        return need(Tk::Num, op, "a number");
      }
      case Kw::Ifindex:
        ++pos_;
        return need(Tk::Num, kw, "an interface index");
      case Kw::Inbound:
      case Kw::Outbound:
      case Kw::Pppoed:
      case Kw::AtmType:
      case Kw::Mtp2:
        ++pos_;
        return Result::Ok;
      case Kw::Vlan:
      case Kw::Mpls:
      case Kw::Pppoes:
      case Kw::Geneve:
        ++pos_;
        optional_pnum();
        return Result::Ok;
      case Kw::Llc:
        ++pos_;
        if (tok().t == Tk::Id || is(Kw::PfNum)) ++pos_;
        return Result::Ok;
      case Kw::PfName:
        ++pos_;
        return need(Tk::Id, kw, "a name");
      case Kw::PfNum:
        ++pos_;
        return need(Tk::Num, kw, "a rule number");
      case Kw::PfReason:
        ++pos_;
        return need_num_or_name(kw, "a reason");
      case Kw::PfAction:
        ++pos_;
        return need(Tk::Id, kw, "an action");
      case Kw::AtmField:
      case Kw::Mtp3:
        ++pos_;
        return field_value(kw);
      default:
        return Result::No;
    }
  }

  std::string_view s_;
  std::vector<Tok> t_;
  size_t pos_ = 0;
  std::optional<Failure> failure_;
  std::unordered_set<size_t> bare_ids_;  // names taken as `or b` continuations
  std::vector<Located> located_;
  Kw aqual_ = Kw::None;  // the last address qualifier seen
  int depth_ = 0;
};

// `needle` in `hay` not glued to more of a word on either side; a word is made
// of letters, digits and `word_chars`.
size_t find_word(std::string_view hay, std::string_view needle, const char *word_chars) {
  auto in_word = [&](char c) { return is_alnum(c) || (c && std::strchr(word_chars, c)); };
  if (needle.empty()) return std::string_view::npos;
  for (size_t p = hay.find(needle); p != std::string_view::npos; p = hay.find(needle, p + 1)) {
    size_t e = p + needle.size();
    if ((p == 0 || !in_word(hay[p - 1])) && (e >= hay.size() || !in_word(hay[e]))) return p;
  }
  return std::string_view::npos;
}

// Where libpcap's message points: a name it quotes, a token it mentions, a number it names.
std::optional<FilterError> locate_message(const std::string &msg, std::string_view expr, const std::vector<Tok> &toks) {
  // 1. quoted: unknown port 'foo', non-network bits set in '10.0.0.1/8'
  for (size_t q = msg.find('\''); q != std::string::npos;) {
    size_t e = msg.find('\'', q + 1);
    if (e == std::string::npos) break;
    std::string quoted = msg.substr(q + 1, e - q - 1);
    size_t p = find_word(expr, quoted, "._:-/");
    if (p != std::string_view::npos) return FilterError{msg, int(p), int(quoted.size())};
    q = msg.find('\'', e + 1);
  }
  // 2. text it echoes: "bogus ethernet address 00:11:22:33:"
  for (size_t b = 0; b < msg.size();) {
    size_t e = msg.find(' ', b);
    if (e == std::string::npos) e = msg.size();
    std::string word = msg.substr(b, e - b);
    b = e + 1;
    if (word.size() < 3 || word.find_first_of(":./") == std::string::npos) continue;
    size_t p = expr.find(word);
    if (p != std::string_view::npos) return FilterError{msg, int(p), int(word.size())};
  }
  // 3. a value token it names: "VLAN tag 5000 greater than maximum 4095"
  for (const Tok &t : toks) {
    if (t.t == Tk::End || t.t == Tk::Kw || t.t == Tk::Op || t.t == Tk::Bad) continue;
    if (find_word(msg, expr.substr(t.off, t.len), ".") != std::string::npos) return FilterError{msg, t.off, t.len};
  }
  // 4. a number inside a token: "illegal port number 99999 > 65535" for portrange 1-99999
  for (size_t i = 0; i < msg.size();) {
    if (!is_digit(msg[i])) { ++i; continue; }
    size_t j = i;
    while (j < msg.size() && is_digit(msg[j])) ++j;
    std::string number = msg.substr(i, j - i);
    size_t p = find_word(expr, number, "._:");
    if (p != std::string_view::npos) return FilterError{msg, int(p), int(number.size())};
    i = j;
  }
  return std::nullopt;
}

}  // namespace

namespace {
std::atomic<bool> g_check_with_libpcap{true};
}

void set_filter_checks_use_libpcap(bool on) { g_check_with_libpcap = on; }

std::optional<FilterError> check_filter_expression(std::string_view expr) {
  if (auto big = too_many_terms(expr)) return big;
  if (!g_check_with_libpcap) {  // the recognizer alone (the fuzzer: no name lookups)
    std::vector<Tok> toks = tokenize(expr);
    return Recognizer(expr, toks).run();
  }
  std::string pcap_error;
  if (PcapFilter::compile(expr, LinkType::Ethernet, &pcap_error)) return std::nullopt;
  std::vector<Tok> toks = tokenize(expr);
  Recognizer r(expr, toks);
  std::optional<FilterError> syntax = r.run();
  FilterError whole{pcap_error, 0, static_cast<int>(expr.size())};
  if (pcap_error == "syntax error") {
    if (syntax) return syntax;
    if (auto bare = r.suspicious_bare_name()) return bare;
    return whole;
  }
  // libpcap parsed it and refused a value: locate what its message is about
  for (const Located &l : r.located())
    if (pcap_error.find(l.key) != std::string::npos) return FilterError{pcap_error, l.where.offset, l.where.length};
  if (auto where = locate_message(pcap_error, expr, toks)) return where;
  return whole;
}

}  // namespace sluice
