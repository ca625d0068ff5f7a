// Filter expressions: PcapFilter must accept exactly the packets libpcap's own
// compiler and filter accept (hand-made packets of every kind, and a real
// trace when present), and check_filter_expression must place each error on
// the token it is about.
#include <pcap/pcap.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "bytes_fixture.hh"
#include "engine/packet/bpf_jit.hh"
#include "engine/packet/pcap_filter.hh"

using namespace sluice;

namespace {

using namespace sluice::test::bytes;

// ---- headers ----
Bytes eth(uint16_t ethertype, Bytes dst = {0x02, 0, 0, 0, 0, 2}) {
  return cat({dst, {0x02, 0, 0, 0, 0, 1}, be16(ethertype)});
}
Bytes vlan_tag(uint16_t id, uint16_t inner_type) { return cat({be16(id & 0x0fff), be16(inner_type)}); }
Bytes mpls_label(uint32_t label, bool bottom) {
  uint32_t v = label << 12 | (bottom ? 1u << 8 : 0) | 64;
  return {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
}
Bytes ipv4(std::array<uint8_t, 4> src, std::array<uint8_t, 4> dst, uint8_t proto, const Bytes &payload) {
  uint16_t total = uint16_t(20 + payload.size());
  Bytes h = cat({{0x45, 0}, be16(total), {0, 1, 0x40, 0, 64, proto, 0, 0}});
  h.insert(h.end(), src.begin(), src.end());
  h.insert(h.end(), dst.begin(), dst.end());
  return cat({h, payload});
}
Bytes v6addr(uint16_t first, uint16_t second, uint16_t last) {
  Bytes a(16, 0);
  a[0] = uint8_t(first >> 8), a[1] = uint8_t(first), a[2] = uint8_t(second >> 8), a[3] = uint8_t(second);
  a[14] = uint8_t(last >> 8), a[15] = uint8_t(last);
  return a;
}
Bytes ipv6(const Bytes &src, const Bytes &dst, uint8_t next, const Bytes &payload) {
  return cat({{0x60, 0, 0, 0}, be16(uint16_t(payload.size())), {next, 64}, src, dst, payload});
}
Bytes tcp(uint16_t sport, uint16_t dport, uint8_t flags, size_t payload = 0) {
  return cat({be16(sport), be16(dport), Bytes(8, 0), {0x50, flags}, Bytes(6, 0), Bytes(payload, 0xab)});
}
Bytes udp(uint16_t sport, uint16_t dport, size_t payload = 0) {
  return cat({be16(sport), be16(dport), be16(uint16_t(8 + payload)), {0, 0}, Bytes(payload, 0xcd)});
}
Bytes icmp_echo(uint8_t type) { return {type, 0, 0, 0, 0, 1, 0, 1}; }

constexpr uint8_t kSyn = 0x02, kAck = 0x10;

struct Packet {
  const char *name;
  Bytes data;
  uint32_t wirelen = 0;  // 0: data.size(); larger: captured truncated
};

std::vector<Packet> handmade_packets() {
  Bytes bcast = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  Bytes mdns6 = {0x33, 0x33, 0, 0, 0, 0xfb};
  std::vector<Packet> p = {
      /* 0 */ {"ipv4 tcp 10.0.0.1:1234 > 192.168.1.1:443 syn",
               cat({eth(0x0800), ipv4({10, 0, 0, 1}, {192, 168, 1, 1}, 6, tcp(1234, 443, kSyn))})},
      /* 1 */ {"ipv4 udp 10.1.2.3:5353 > 8.8.8.8:53",
               cat({eth(0x0800), ipv4({10, 1, 2, 3}, {8, 8, 8, 8}, 17, udp(5353, 53, 20))})},
      /* 2 */ {"ipv4 icmp echo 172.16.0.1 > 10.0.0.2",
               cat({eth(0x0800), ipv4({172, 16, 0, 1}, {10, 0, 0, 2}, 1, icmp_echo(8))})},
      /* 3 */ {"ipv6 tcp 2001:db8::1 > 2001:db8::2:80 ack",
               cat({eth(0x86dd), ipv6(v6addr(0x2001, 0xdb8, 1), v6addr(0x2001, 0xdb8, 2), 6, tcp(40000, 80, kAck, 100))})},
      /* 4 */ {"ipv6 udp 2001:db8::3 > ff02::fb mdns",
               cat({eth(0x86dd, mdns6), ipv6(v6addr(0x2001, 0xdb8, 3), v6addr(0xff02, 0, 0xfb), 17, udp(5353, 5353, 30))})},
      /* 5 */ {"ipv6 icmp6 echo fe80::1 > fe80::2",
               cat({eth(0x86dd), ipv6(v6addr(0xfe80, 0, 1), v6addr(0xfe80, 0, 2), 58, icmp_echo(128))})},
      /* 6 */ {"vlan 100 ipv4 tcp 192.168.1.10:80 > 10.0.0.1 syn-ack",
               cat({eth(0x8100), vlan_tag(100, 0x0800), ipv4({192, 168, 1, 10}, {10, 0, 0, 1}, 6, tcp(80, 50000, kSyn | kAck))})},
      /* 7 */ {"vlan 200 ipv6 udp :53",
               cat({eth(0x8100), vlan_tag(200, 0x86dd), ipv6(v6addr(0x2001, 0xdb8, 7), v6addr(0x2001, 0xdb8, 8), 17, udp(53, 40001, 12))})},
      /* 8 */ {"mpls 1000 ipv4 udp 10.2.0.1:1000 > 10.3.0.1:2000",
               cat({eth(0x8847), mpls_label(1000, true), ipv4({10, 2, 0, 1}, {10, 3, 0, 1}, 17, udp(1000, 2000))})},
      /* 9 */ {"arp request, broadcast",
               cat({eth(0x0806, bcast), {0, 1, 8, 0, 6, 4, 0, 1}, Bytes(6, 2), {10, 0, 0, 1}, Bytes(6, 0), {10, 0, 0, 9}})},
      /* 10 */ {"ipv4 tcp 10.0.0.5:22 > 1.1.1.1, 1254 bytes captured as 100",
                cat({eth(0x0800), ipv4({10, 0, 0, 5}, {1, 1, 1, 1}, 6, tcp(22, 50022, kAck, 1200))})},
  };
  p[10].wirelen = uint32_t(p[10].data.size());
  p[10].data.resize(100);
  for (auto &pk : p)
    if (!pk.wirelen) pk.wirelen = uint32_t(pk.data.size());
  return p;
}

// Every keyword the issue names, alone and combined.
const std::vector<std::string> kExpressions = {
    "tcp", "udp", "icmp", "icmp6", "ip", "ip6", "arp", "sctp", "vlan", "vlan 100", "vlan 200", "mpls",
    "mpls 1000", "not tcp", "not (tcp or udp)", "tcp and port 443", "tcp or udp", "tcp && !port 80 || icmp",
    "port 53", "src port 53", "dst port 80", "udp port 53 or udp port 5353", "portrange 1-1024",
    "tcp portrange 40000-50000", "host 10.0.0.1", "src host 192.168.1.1", "dst host 8.8.8.8",
    "net 10.0.0.0/8", "src net 192.168.0.0/16", "dst net 172.16.0.0/12", "net 10.0.0.0 mask 255.0.0.0",
    "ip6 and net 2001:db8::/32", "host 2001:db8::1", "src or dst host fe80::2", "proto 17", "ip proto 6",
    "ip6 proto 58", "ip proto \\icmp", "len > 100", "len <= 64", "greater 1000", "less 60", "ip[2:2] > 576",
    "ip[8] = 64", "tcp[tcpflags] & tcp-syn != 0", "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
    "icmp[icmptype] = icmp-echo", "icmp6 and ip6[40] == 128", "vlan and ip", "vlan 100 and tcp port 80",
    "vlan and ip6 and udp port 53", "mpls and udp", "mpls 1000 and dst host 10.3.0.1",
    "(tcp and dst port 443) or (udp and port 53)", "ether broadcast", "ether multicast", "ip multicast",
    "pppoes", "pppoes and ip", "not ip and not ip6", "udp and not port 53 and not port 5353",
    "ether proto 0x88cc", "ip and ip[0] & 0xf != 5", "port http or port domain",
};

pcap_t *ethernet_dead() { return pcap_open_dead(DLT_EN10MB, 65535); }

// libpcap's own answer, compiled independently of PcapFilter.
std::vector<bool> reference(pcap_t *handle, const std::string &expr, const std::vector<Packet> &packets) {
  struct bpf_program prog;
  REQUIRE(pcap_compile(handle, &prog, expr.c_str(), 1, PCAP_NETMASK_UNKNOWN) == 0);
  std::vector<bool> out;
  for (const Packet &p : packets) {
    struct pcap_pkthdr h {};
    h.caplen = uint32_t(p.data.size());
    h.len = p.wirelen;
    out.push_back(pcap_offline_filter(&prog, &h, p.data.data()) != 0);
  }
  pcap_freecode(&prog);
  return out;
}

std::vector<bool> ours(const PcapFilter &f, const std::vector<Packet> &packets) {
  std::vector<bool> out;
  for (const Packet &p : packets) out.push_back(f.matches(p.data.data(), uint32_t(p.data.size()), p.wirelen));
  return out;
}

std::set<int> matching(const std::string &expr, const std::vector<Packet> &packets) {
  std::string err;
  auto f = PcapFilter::compile(expr, LinkType::Ethernet, &err);
  INFO(expr << ": " << err);
  REQUIRE(f);
  std::set<int> out;
  for (size_t i = 0; i < packets.size(); ++i)
    if (f->matches(packets[i].data.data(), uint32_t(packets[i].data.size()), packets[i].wirelen)) out.insert(int(i));
  return out;
}

}  // namespace

TEST_CASE("PcapFilter matches what libpcap matches on hand-made packets", "[filter]") {
  auto packets = handmade_packets();
  pcap_t *handle = ethernet_dead();
  REQUIRE(handle);
  for (const std::string &expr : kExpressions) {
    INFO("expression: " << expr);
    std::string err;
    auto f = PcapFilter::compile(expr, LinkType::Ethernet, &err);
    INFO("error: " << err);
    REQUIRE(f);
    CHECK(f->insn_count() > 0);
    CHECK(f->insns() != nullptr);
    CHECK(f->expression() == expr);
    CHECK(ours(*f, packets) == reference(handle, expr, packets));
  }
  pcap_close(handle);
}

TEST_CASE("PcapFilter gives the expected answers on hand-made packets", "[filter]") {
  auto packets = handmade_packets();
  using S = std::set<int>;
  CHECK(matching("vlan 100", packets) == S{6});
  CHECK(matching("vlan", packets) == S{6, 7});
  CHECK(matching("vlan 100 and tcp port 80", packets) == S{6});
  CHECK(matching("vlan and udp port 53", packets) == S{7});
  CHECK(matching("mpls", packets) == S{8});
  CHECK(matching("mpls 1000 and udp", packets) == S{8});
  CHECK(matching("mpls 999", packets).empty());
  CHECK(matching("ip6", packets) == S{3, 4, 5});  // the tagged one only after `vlan`
  CHECK(matching("icmp6", packets) == S{5});
  CHECK(matching("icmp", packets) == S{2});
  CHECK(matching("tcp and port 443", packets) == S{0});
  CHECK(matching("udp port 53", packets) == S{1});
  CHECK(matching("net 10.0.0.0/8", packets) == S{0, 1, 2, 9, 10});  // `net` also reads ARP addresses
  CHECK(matching("ip net 10.0.0.0/8", packets) == S{0, 1, 2, 10});
  CHECK(matching("src host 192.168.1.10", packets).empty());  // behind the VLAN tag
  CHECK(matching("ip6 and net 2001:db8::/32", packets) == S{3, 4});
  CHECK(matching("arp", packets) == S{9});
  CHECK(matching("ether broadcast", packets) == S{9});
  CHECK(matching("ether multicast", packets) == S{4, 9});
  CHECK(matching("tcp[tcpflags] & tcp-syn != 0", packets) == S{0});
  CHECK(matching("not ip and not ip6", packets) == S{6, 7, 8, 9});
  CHECK(matching("portrange 1-1024", packets) == S{0, 1, 3, 10});
  // `len` is the length on the wire, not what was captured
  CHECK(matching("len > 1000", packets) == S{10});
  CHECK(matching("greater 1000", packets) == S{10});
  CHECK(matching("", packets).size() == packets.size());
}

TEST_CASE("PcapFilter matches what libpcap matches on a real trace", "[filter]") {
  namespace fs = std::filesystem;
  fs::path trace = fs::path(SLUICE_SOURCE_DIR) / ".." / "shared" / "traces" / "ndpi_merged.pcap";
  if (!fs::exists(trace)) {
    WARN("trace " << trace.string() << " is absent: skipping the comparison on real packets");
    return;
  }
  char errbuf[PCAP_ERRBUF_SIZE];
  pcap_t *handle = pcap_open_offline(trace.c_str(), errbuf);
  INFO(errbuf);
  REQUIRE(handle);
  REQUIRE(pcap_datalink(handle) == DLT_EN10MB);
  std::vector<Packet> packets;
  struct pcap_pkthdr *h;
  const u_char *data;
  while (pcap_next_ex(handle, &h, &data) == 1) packets.push_back({"", Bytes(data, data + h->caplen), h->len});
  REQUIRE(packets.size() > 1000);
  size_t truncated = 0;
  for (const Packet &p : packets) truncated += p.data.size() < p.wirelen;
  INFO(packets.size() << " packets, " << truncated << " captured shorter than on the wire");
  for (const std::string &expr : kExpressions) {
    INFO("expression: " << expr);
    auto f = PcapFilter::compile(expr, LinkType::Ethernet);
    REQUIRE(f);
    std::vector<bool> got = ours(*f, packets), want = reference(handle, expr, packets);
    size_t differ = 0, matched = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i], matched += got[i];
    INFO(matched << " of " << packets.size() << " match");
    CHECK(differ == 0);
    if (expr == "tcp" || expr == "udp" || expr == "ip6" || expr == "vlan" || expr == "icmp6")
      CHECK(matched > 0);  // the trace does exercise it
  }
  pcap_close(handle);
}

// The program translated to LLVM IR (engine/packet/bpf_jit.cc, what a fused
// loop inlines) and compiled to native code answers as libpcap's
// interpreter does: on every packet truncated at every length (the bounds
// checks), and on the real trace when it is there.
TEST_CASE("PcapFilter compiled to native code matches libpcap's interpreter", "[filter][jit]") {
  std::vector<Packet> packets;
  for (const Packet &p : handmade_packets())
    for (size_t cap = 0; cap <= p.data.size(); ++cap)
      packets.push_back({p.name, Bytes(p.data.begin(), p.data.begin() + long(cap)), uint32_t(p.data.size())});
  namespace fs = std::filesystem;
  fs::path trace = fs::path(SLUICE_SOURCE_DIR) / ".." / "shared" / "traces" / "ndpi_merged.pcap";
  if (fs::exists(trace)) {
    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t *t = pcap_open_offline(trace.c_str(), errbuf);
    REQUIRE(t);
    struct pcap_pkthdr *h;
    const u_char *data;
    while (pcap_next_ex(t, &h, &data) == 1) packets.push_back({"", Bytes(data, data + h->caplen), h->len});
    pcap_close(t);
  } else {
    WARN("trace " << trace.string() << " is absent: native filters compared on hand-made packets only");
  }
  for (const std::string &expr : kExpressions) {
    INFO("expression: " << expr);
    auto interpreted = PcapFilter::compile(expr, LinkType::Ethernet);
    REQUIRE(interpreted);
    std::string err;
    std::unique_ptr<BpfJit> native = BpfJit::compile(interpreted->insns(), interpreted->insn_count(), &err);
    INFO(err);
    REQUIRE(native);
    CHECK(native->ir().find("define") != std::string::npos);
    std::vector<bool> got, want = ours(*interpreted, packets);
    for (const Packet &p : packets) got.push_back(native->run(p.data.data(), p.wirelen, uint32_t(p.data.size())) != 0);
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    CHECK(differ == 0);
  }
  // A port number in the expression is an immediate of the native code,
  // compared with the packet's bytes as they are (the byte swap folded in).
  auto port = PcapFilter::compile("tcp port 8443", LinkType::Ethernet);
  REQUIRE(port);
  std::unique_ptr<BpfJit> port_native = BpfJit::compile(port->insns(), port->insn_count(), nullptr);
  REQUIRE(port_native);
  int16_t network_order = int16_t(uint16_t((8443 >> 8) | ((8443 & 0xff) << 8)));
  INFO(port_native->ir());
  CHECK(port_native->ir().find("icmp eq i16 %" ) != std::string::npos);
  CHECK(port_native->ir().find(", " + std::to_string(network_order) + "\n") != std::string::npos);
}

TEST_CASE("PcapFilter compiles for other link types", "[filter]") {
  Bytes raw = ipv4({10, 0, 0, 1}, {10, 0, 0, 2}, 6, tcp(1234, 80, kSyn));
  for (LinkType lt : {LinkType::Raw, LinkType::RawDlt12}) {
    auto f = PcapFilter::compile("tcp and dst port 80 and src host 10.0.0.1", lt);
    REQUIRE(f);
    CHECK(f->link_type() == lt);
    CHECK(f->matches(raw.data(), uint32_t(raw.size())));
    auto g = PcapFilter::compile("udp or ip6", lt);
    REQUIRE(g);
    CHECK_FALSE(g->matches(raw.data(), uint32_t(raw.size())));
  }
  // the same answers as libpcap opened for DLT_RAW
  pcap_t *handle = pcap_open_dead(DLT_RAW, 65535);
  std::vector<Packet> packets = {{"raw ipv4 tcp", raw, uint32_t(raw.size())}};
  for (const char *expr : {"tcp", "udp", "ip6", "port 80", "net 10.0.0.0/24", "ip[9] = 6", "len > 40"}) {
    INFO(expr);
    auto f = PcapFilter::compile(expr, LinkType::Raw);
    REQUIRE(f);
    CHECK(ours(*f, packets) == reference(handle, expr, packets));
  }
  pcap_close(handle);
  // LINKTYPE_RAW is not a DLT pcap_open_dead() knows: it must have been mapped
  CHECK(pcap_dlt_for(LinkType::Raw) == DLT_RAW);
  std::string err;
  CHECK_FALSE(PcapFilter::compile("vlan 100", LinkType::Raw, &err));
  CHECK_THAT(err, Catch::Contains("VLAN"));
  CHECK(PcapFilter::compile("ip6 and udp", LinkType::LinuxSll2));
}

TEST_CASE("PcapFilter owns its program and moves it", "[filter]") {
  std::string err;
  auto f = PcapFilter::compile("tcp and port 443", LinkType::Ethernet, &err);
  REQUIRE(f);
  const struct bpf_insn *insns = f->insns();
  size_t n = f->insn_count();
  PcapFilter g = std::move(*f);
  CHECK(g.insns() == insns);
  CHECK(g.insn_count() == n);
  CHECK(g.expression() == "tcp and port 443");
  CHECK(f->insns() == nullptr);
  auto h = PcapFilter::compile("udp", LinkType::Ethernet);
  REQUIRE(h);
  g = std::move(*h);
  CHECK(g.expression() == "udp");
  CHECK_FALSE(PcapFilter::compile("tcp and", LinkType::Ethernet, &err));
  CHECK(err == "syntax error");  // cleaned: no "can't parse filter expression: "
}

TEST_CASE("check_filter_expression accepts what libpcap compiles", "[filter]") {
  for (const std::string &expr : kExpressions) {
    INFO(expr);
    CHECK_FALSE(check_filter_expression(expr));
  }
  CHECK_FALSE(check_filter_expression(""));
  CHECK_FALSE(check_filter_expression("port (80 or 443)"));
  CHECK_FALSE(check_filter_expression("host 1.2.3.4 or 5.6.7.8"));
}

TEST_CASE("check_filter_expression places each error on its token", "[filter]") {
  struct Case {
    const char *expr;
    int offset;
    int length;
    const char *message;  // a substring of the message
  };
  const Case cases[] = {
      {"tcp and", 7, 0, "expected a primitive after 'and'"},
      {"port 99999", 5, 5, "99999 > 65535"},
      {"tcp an port 80", 4, 2, "unknown keyword 'an'; did you mean 'and'?"},
      {"tcp and prot 80", 8, 4, "unknown keyword 'prot'; did you mean 'proto'?"},
      {"net 10.0.0.0/33", 4, 11, "mask length must be <= 32"},
      {"net 10.0.0.1/8", 4, 10, "non-network bits set in '10.0.0.1/8'"},
      {"(tcp or udp", 0, 1, "unbalanced '('"},
      {"tcp or udp)", 10, 1, "unbalanced ')'"},
      {"port foo", 5, 3, "unknown port 'foo'"},
      {"vlan 1 and vlan 5000", 16, 4, "5000 greater than maximum 4095"},
      {"ip[2:3] > 5", 5, 1, "data size must be 1, 2, or 4"},
      {"len >", 5, 0, "expected a value after '>'"},
      {"tcp and not", 11, 0, "expected a primitive after 'not'"},
      {"src and dst port", 16, 0, "expected a port number or name after 'port'"},
      {"ether proto ip", 12, 2, "'\\ip'"},
      {"tcp and (udp or port 99999)", 21, 5, "illegal port number"},
      {"portrange 1-99999", 12, 5, "illegal port number 99999"},
      {"tcp 80", 4, 2, "did you mean 'tcp port 80'?"},
      {"1.2.3.4", 0, 7, "'host 1.2.3.4'"},
      {"tcp and @", 8, 1, "unexpected character '@'"},
      {"port 80 80", 8, 2, "expected 'and' or 'or' before '80'"},
      {"tpc", 0, 3, "did you mean 'tcp'?"},
      {"tcp or upd", 7, 3, "unknown keyword 'upd'; did you mean 'udp'?"},  // parsed as `tcp host upd`
      {"dst net 10/8", 10, 1, "'10.0.0.0/8'"},
      {"ether host 00:11:22:33:44", 11, 12, "bogus ethernet address"},
      // libpcap's message where nothing in the expression is wrong by itself
      {"tcp and udp", 0, 11, "expression rejects all packets"},
  };
  for (const Case &c : cases) {
    INFO(c.expr);
    auto e = check_filter_expression(c.expr);
    REQUIRE(e);
    INFO(e->message);
    CHECK(e->offset == c.offset);
    CHECK(e->length == c.length);
    CHECK_THAT(e->message, Catch::Contains(c.message));
    // lower case, no trailing period
    CHECK_FALSE(e->message.empty());
    CHECK(e->message.back() != '.');
  }
}

TEST_CASE("check_filter_expression survives deep nesting", "[filter]") {
  std::string deep(100000, '(');
  auto e = check_filter_expression(deep + "tcp");
  REQUIRE(e);
  CHECK(e->offset >= 0);
  CHECK(e->offset + e->length <= int(deep.size() + 3));
}
