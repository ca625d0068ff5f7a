// The server and query name parsers of the ServerNames element
// (elements/plugins/server_name_parse.hh): hand-built ClientHellos, DNS
// queries and QUIC Initials, every truncation, bogus input, the RFC 9001 and
// RFC 9369 client Initials; then every packet of a real trace compared with
// what tshark finds in it. Needs libcrypto (the Initials are encrypted with
// OpenSSL here too) and libpcap; standalone:
//   clang++-19 -std=c++20 -I. tests/unit/test_server_names.cc elements/plugins/server_name_parse.cc
//     engine/packet/parse.cc CATCH_MAIN.cc -lpcap -lcrypto
#include <openssl/evp.h>
#include <pcap/pcap.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bytes_fixture.hh"
#include "elements/plugins/server_name_parse.hh"
#include "engine/packet/parse.hh"

#ifndef SLUICE_SOURCE_DIR
#define SLUICE_SOURCE_DIR "."
#endif

using namespace sluice;
using namespace sluice::server_names;

namespace {

using namespace sluice::test::bytes;

Bytes text(const std::string &s) { return Bytes(s.begin(), s.end()); }
Bytes hex(const std::string &h) {
  Bytes out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(uint8_t(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

// The functions on exactly n octets of heap, so that ASan sees any read past them.
struct Exact {
  std::unique_ptr<uint8_t[]> p;
  size_t n;
  Exact(const Bytes &b, size_t len) : p(new uint8_t[len ? len : 1]), n(len) {
    if (len) std::memcpy(p.get(), b.data(), len);
  }
};

std::string tls_name(const Bytes &b, size_t n) {
  Exact e(b, n);
  char out[kMaxName];
  size_t len = tls_server_name(e.p.get(), e.n, out, sizeof out);
  return std::string(out, std::min(len, sizeof out));
}
std::string dns_name(const Bytes &b, size_t n, bool tcp = false) {
  Exact e(b, n);
  char out[kMaxName];
  size_t len = dns_query_name(e.p.get(), e.n, tcp, out, sizeof out);
  return std::string(out, std::min(len, sizeof out));
}
std::string quic_name(QuicInitialDecryptor &d, const Bytes &b, QuicOutcome &outcome) {
  Exact e(b, b.size());
  char out[kMaxName];
  size_t len = d.server_name(e.p.get(), e.n, out, sizeof out, outcome);
  return std::string(out, std::min(len, sizeof out));
}

// ---- TLS ----
Bytes extension(uint16_t type, const Bytes &data) { return cat({be16(type), be16(data.size()), data}); }
Bytes sni_extension(const std::string &name, uint8_t name_type = 0) {
  Bytes entry = cat({{name_type}, be16(name.size()), text(name)});
  return extension(0, cat({be16(entry.size()), entry}));
}
Bytes client_hello(const std::vector<Bytes> &exts) {
  Bytes all;
  for (const Bytes &e : exts) all.insert(all.end(), e.begin(), e.end());
  Bytes body = cat({{3, 3}, Bytes(32, 0xab), {32}, Bytes(32, 0xcd), be16(4), {0x13, 0x01, 0x13, 0x02}, {1, 0},
                    be16(all.size()), all});
  return cat({{1}, be24(body.size()), body});
}
Bytes tls_record(const Bytes &msg) { return cat({{22, 3, 1}, be16(msg.size()), msg}); }
const Bytes kAlpn = extension(16, hex("000c02683208687474702f312e31"));
const Bytes kVersions = extension(43, hex("0403040303"));

// ---- DNS ----
Bytes dns_message(const Bytes &name, bool response = false, size_t questions = 1) {
  return cat({{0x12, 0x34}, response ? Bytes{0x81, 0x80} : Bytes{0x01, 0x00}, be16(questions), be16(0), be16(0),
              be16(0), name, {0, 1, 0, 1}});
}
Bytes dns_labels(const std::vector<std::string> &labels) {
  Bytes out;
  for (const std::string &l : labels) out = cat({out, {uint8_t(l.size())}, text(l)});
  out.push_back(0);
  return out;
}

// ---- QUIC ----
// RFC 9001 appendix A.2 and RFC 9369 appendix A.2: a client Initial of DCID
// 8394c8f03e515708, packet number 2, whose CRYPTO frame holds a ClientHello
// for example.com.
const char *kRfc9001ClientInitial =
    "c000000001088394c8f03e5157080000449e7b9aec34d1b1c98dd7689fb8ec11d242b123dc9bd8bab936b47d92ec356c0bab7df5976d27cd"
    "449f63300099f3991c260ec4c60d17b31f8429157bb35a1282a643a8d2262cad67500cadb8e7378c8eb7539ec4d4905fed1bee1fc8aafba1"
    "7c750e2c7ace01e6005f80fcb7df621230c83711b39343fa028cea7f7fb5ff89eac2308249a02252155e2347b63d58c5457afd84d05dfffd"
    "b20392844ae812154682e9cf012f9021a6f0be17ddd0c2084dce25ff9b06cde535d0f920a2db1bf362c23e596d11a4f5a6cf3948838a3aec"
    "4e15daf8500a6ef69ec4e3feb6b1d98e610ac8b7ec3faf6ad760b7bad1db4ba3485e8a94dc250ae3fdb41ed15fb6a8e5eba0fc3dd60bc8e3"
    "0c5c4287e53805db059ae0648db2f64264ed5e39be2e20d82df566da8dd5998ccabdae053060ae6c7b4378e846d29f37ed7b4ea9ec5d82e7"
    "961b7f25a9323851f681d582363aa5f89937f5a67258bf63ad6f1a0b1d96dbd4faddfcefc5266ba6611722395c906556be52afe3f565636a"
    "d1b17d508b73d8743eeb524be22b3dcbc2c7468d54119c7468449a13d8e3b95811a198f3491de3e7fe942b330407abf82a4ed7c1b311663a"
    "c69890f4157015853d91e923037c227a33cdd5ec281ca3f79c44546b9d90ca00f064c99e3dd97911d39fe9c5d0b23a229a234cb36186c481"
    "9e8b9c5927726632291d6a418211cc2962e20fe47feb3edf330f2c603a9d48c0fcb5699dbfe5896425c5bac4aee82e57a85aaf4e2513e4f0"
    "5796b07ba2ee47d80506f8d2c25e50fd14de71e6c418559302f939b0e1abd576f279c4b2e0feb85c1f28ff18f58891ffef132eef2fa09346"
    "aee33c28eb130ff28f5b766953334113211996d20011a198e3fc433f9f2541010ae17c1bf202580f6047472fb36857fe843b19f5984009dd"
    "c324044e847a4f4a0ab34f719595de37252d6235365e9b84392b061085349d73203a4a13e96f5432ec0fd4a1ee65accdd5e3904df54c1da5"
    "10b0ff20dcc0c77fcb2c0e0eb605cb0504db87632cf3d8b4dae6e705769d1de354270123cb11450efc60ac47683d7b8d0f811365565fd98c"
    "4c8eb936bcab8d069fc33bd801b03adea2e1fbc5aa463d08ca19896d2bf59a071b851e6c239052172f296bfb5e72404790a2181014f3b94a"
    "4e97d117b438130368cc39dbb2d198065ae3986547926cd2162f40a29f0c3c8745c0f50fba3852e566d44575c29d39a03f0cda721984b6f4"
    "40591f355e12d439ff150aab7613499dbd49adabc8676eef023b15b65bfc5ca06948109f23f350db82123535eb8a7433bdabcb909271a6ec"
    "bcb58b936a88cd4e8f2e6ff5800175f113253d8fa9ca8885c2f552e657dc603f252e1a8e308f76f0be79e2fb8f5d5fbbe2e30ecadd220723"
    "c8c0aea8078cdfcb3868263ff8f0940054da48781893a7e49ad5aff4af300cd804a6b6279ab3ff3afb64491c85194aab760d58a606654f9f"
    "4400e8b38591356fbf6425aca26dc85244259ff2b19c41b9f96f3ca9ec1dde434da7d2d392b905ddf3d1f9af93d1af5950bd493f5aa731b4"
    "056df31bd267b6b90a079831aaf579be0a39013137aac6d404f518cfd46840647e78bfe706ca4cf5e9c5453e9f7cfd2b8b4c8d169a44e55c"
    "88d4a9a7f9474241e221af44860018ab0856972e194cd934";
const char *kRfc9369ClientInitial =
    "d76b3343cf088394c8f03e5157080000449ea0c95e82ffe67b6abcdb4298b485dd04de806071bf03dceebfa162e75d6c96058bdbfb127cdf"
    "cbf903388e99ad049f9a3dd4425ae4d0992cfff18ecf0fdb5a842d09747052f17ac2053d21f57c5d250f2c4f0e0202b70785b7946e992e58"
    "a59ac52dea6774d4f03b55545243cf1a12834e3f249a78d395e0d18f4d766004f1a2674802a747eaa901c3f10cda5500cb9122faa9f1df66"
    "c392079a1b40f0de1c6054196a11cbea40afb6ef5253cd6818f6625efce3b6def6ba7e4b37a40f7732e093daa7d52190935b8da58976ff33"
    "12ae50b187c1433c0f028edcc4c2838b6a9bfc226ca4b4530e7a4ccee1bfa2a3d396ae5a3fb512384b2fdd851f784a65e03f2c4fbe11a53c"
    "7777c023462239dd6f7521a3f6c7d5dd3ec9b3f233773d4b46d23cc375eb198c63301c21801f6520bcfb7966fc49b393f0061d974a2706df"
    "8c4a9449f11d7f3d2dcbb90c6b877045636e7c0c0fe4eb0f697545460c806910d2c355f1d253bc9d2452aaa549e27a1fac7cf4ed77f322e8"
    "fa894b6a83810a34b361901751a6f5eb65a0326e07de7c1216ccce2d0193f958bb3850a833f7ae432b65bc5a53975c155aa4bcb4f7b2c4e5"
    "4df16efaf6ddea94e2c50b4cd1dfe06017e0e9d02900cffe1935e0491d77ffb4fdf85290fdd893d577b1131a610ef6a5c32b2ee0293617a3"
    "7cbb08b847741c3b8017c25ca9052ca1079d8b78aebd47876d330a30f6a8c6d61dd1ab5589329de714d19d61370f8149748c72f132f0fc99"
    "f34d766c6938597040d8f9e2bb522ff99c63a344d6a2ae8aa8e51b7b90a4a806105fcbca31506c446151adfeceb51b91abfe43960977c874"
    "71cf9ad4074d30e10d6a7f03c63bd5d4317f68ff325ba3bd80bf4dc8b52a0ba031758022eb025cdd770b44d6d6cf0670f4e990b22347a7db"
    "848265e3e5eb72dfe8299ad7481a408322cac55786e52f633b2fb6b614eaed18d703dd84045a274ae8bfa73379661388d6991fe39b0d93de"
    "bb41700b41f90a15c4d526250235ddcd6776fc77bc97e7a417ebcb31600d01e57f32162a8560cacc7e27a096d37a1a86952ec71bd89a3e9a"
    "30a2a26162984d7740f81193e8238e61f6b5b984d4d3dfa033c1bb7e4f0037febf406d91c0dccf32acf423cfa1e7071010d3f270121b493c"
    "e85054ef58bada42310138fe081adb04e2bd901f2f13458b3d6758158197107c14ebb193230cd1157380aa79cae1374a7c1e5bbcb80ee23e"
    "06ebfde206bfb0fcbc0edc4ebec309661bdd908d532eb0c6adc38b7ca7331dce8dfce39ab71e7c32d318d136b6100671a1ae6a6600e3899f"
    "31f0eed19e3417d134b90c9058f8632c798d4490da4987307cba922d61c39805d072b589bd52fdf1e86215c2d54e6670e07383a27bbffb5a"
    "ddf47d66aa85a0c6f9f32e59d85a44dd5d3b22dc2be80919b490437ae4f36a0ae55edf1d0b5cb4e9a3ecabee93dfc6e38d209d0fa6536d27"
    "a5d6fbb17641cde27525d61093f1b28072d111b2b4ae5f89d5974ee12e5cf7d5da4d6a31123041f33e61407e76cffcdcfd7e19ba58cf4b53"
    "6f4c4938ae79324dc402894b44faf8afbab35282ab659d13c93f70412e85cb199a37ddec600545473cfb5a05e08d0b209973b2172b4d21fb"
    "69745a262ccde96ba18b2faa745b6fe189cf772a9f84cbfc";

// A client Initial as a client makes it (RFC 9001 section 5): `frames` padded
// to a 1200-octet datagram, encrypted with the keys of `dcid`, its header
// protected. The keys come from the decryptor (checked against RFC 9001 A.1).
Bytes quic_initial(uint32_t version, const Bytes &dcid, Bytes frames, uint32_t pn = 0) {
  QuicInitialDecryptor d;
  QuicInitialDecryptor::Keys k;
  REQUIRE(d.client_keys(version, dcid.data(), dcid.size(), k));
  const QuicVersionParams *v = quic_version_params(version);
  size_t pn_len = 2;
  size_t header_len = 1 + 4 + 1 + dcid.size() + 1 + 1 + 2 + pn_len;
  if (header_len + frames.size() + 16 < 1200) frames.resize(1200 - header_len - 16, 0);  // PADDING
  size_t length = pn_len + frames.size() + 16;
  Bytes header = cat({{uint8_t(0xc0 | v->initial_type | (pn_len - 1))},
                      {uint8_t(version >> 24), uint8_t(version >> 16), uint8_t(version >> 8), uint8_t(version)},
                      {uint8_t(dcid.size())}, dcid, {0}, {0}, be16(0x4000 | length), be16(pn)});
  uint8_t nonce[12];
  std::memcpy(nonce, k.iv, 12);
  for (int i = 0; i < 8; ++i) nonce[11 - i] ^= uint8_t(uint64_t(pn) >> (8 * i));
  Bytes sealed(frames.size() + 16);
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  int outl = 0, fin = 0;
  REQUIRE(EVP_EncryptInit_ex(c, EVP_aes_128_gcm(), nullptr, k.key, nonce) == 1);
  REQUIRE(EVP_EncryptUpdate(c, nullptr, &outl, header.data(), int(header.size())) == 1);
  REQUIRE(EVP_EncryptUpdate(c, sealed.data(), &outl, frames.data(), int(frames.size())) == 1);
  REQUIRE(EVP_EncryptFinal_ex(c, sealed.data() + outl, &fin) == 1);
  REQUIRE(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, 16, sealed.data() + frames.size()) == 1);
  EVP_CIPHER_CTX_free(c);
  Bytes packet = cat({header, sealed});
  size_t pn_offset = header.size() - pn_len;
  uint8_t mask[16];
  c = EVP_CIPHER_CTX_new();
  REQUIRE(EVP_EncryptInit_ex(c, EVP_aes_128_ecb(), nullptr, k.hp, nullptr) == 1);
  EVP_CIPHER_CTX_set_padding(c, 0);
  REQUIRE(EVP_EncryptUpdate(c, mask, &outl, packet.data() + pn_offset + 4, 16) == 1);
  EVP_CIPHER_CTX_free(c);
  packet[0] ^= mask[0] & 0x0f;
  for (size_t i = 0; i < pn_len; ++i) packet[pn_offset + i] ^= mask[1 + i];
  return packet;
}
Bytes varint2(size_t v) { return be16(0x4000 | v); }
Bytes crypto_frame(size_t offset, const Bytes &data) {
  return cat({{0x06}, varint2(offset), varint2(data.size()), data});
}
Bytes slice(const Bytes &b, size_t from, size_t to) { return Bytes(b.begin() + from, b.begin() + to); }

}  // namespace

TEST_CASE("server names: a TLS ClientHello's server name", "[server_names]") {
  Bytes with = tls_record(client_hello({kAlpn, sni_extension("www.example.org"), kVersions}));
  CHECK(tls_name(with, with.size()) == "www.example.org");
  Bytes first = tls_record(client_hello({sni_extension("a.b"), kAlpn}));
  CHECK(tls_name(first, first.size()) == "a.b");

  Bytes without = tls_record(client_hello({kAlpn, kVersions}));
  CHECK(tls_name(without, without.size()).empty());
  Bytes no_extensions = tls_record(client_hello({}));
  no_extensions.resize(no_extensions.size() - 2);  // and no extensions block at all
  no_extensions[4] -= 2, no_extensions[8] -= 2;
  CHECK(tls_name(no_extensions, no_extensions.size()).empty());
  // a name of another type first, then the host name
  Bytes two = cat({{1}, be16(3), text("xyz"), {0}, be16(5), text("h.org")});
  Bytes other_type = tls_record(client_hello({extension(0, cat({be16(two.size()), two}))}));
  CHECK(tls_name(other_type, other_type.size()) == "h.org");
  Bytes empty_name = tls_record(client_hello({sni_extension("")}));
  CHECK(tls_name(empty_name, empty_name.size()).empty());

  // not a ClientHello: a ServerHello, application data, another record version
  Bytes server_hello = with;
  server_hello[5] = 2;
  CHECK(tls_name(server_hello, server_hello.size()).empty());
  Bytes app_data = with;
  app_data[0] = 23;
  CHECK(tls_name(app_data, app_data.size()).empty());
  Bytes dtls = with;
  dtls[1] = 0xfe;
  CHECK(tls_name(dtls, dtls.size()).empty());

  // after a ChangeCipherSpec record (a ClientHello after a HelloRetryRequest)
  Bytes ccs = cat({{20, 3, 3, 0, 1, 1}, with});
  CHECK(tls_name(ccs, ccs.size()) == "www.example.org");
  // after a PROXY protocol header, v1 and v2; a v1 line without its end
  Bytes v1 = cat({text("PROXY TCP4 192.0.2.1 198.51.100.2 52176 443\r\n"), with});
  CHECK(tls_name(v1, v1.size()) == "www.example.org");
  Bytes v2 = cat({hex("0d0a0d0a000d0a515549540a"), {0x21, 0x11}, be16(12), Bytes(12, 1), with});
  CHECK(tls_name(v2, v2.size()) == "www.example.org");
  Bytes endless = cat({text("PROXY "), Bytes(200, 'x'), with});
  CHECK(tls_name(endless, endless.size()).empty());
}

TEST_CASE("server names: a ClientHello cut at every length gives the name exactly when its extension is whole",
          "[server_names]") {
  Bytes rec = tls_record(client_hello({kAlpn, sni_extension("cut.example.net"), kVersions}));
  Bytes sni = sni_extension("cut.example.net");
  size_t sni_end = size_t(std::search(rec.begin(), rec.end(), sni.begin(), sni.end()) - rec.begin()) + sni.size();
  for (size_t k = 0; k <= rec.size(); ++k) {
    INFO("cut at " << k << " of " << rec.size());
    CHECK(tls_name(rec, k) == (k >= sni_end ? "cut.example.net" : ""));
  }
  // the record and message lengths saying more than there is, or less
  Bytes longer = rec;
  longer[3] = 0x3f;
  CHECK(tls_name(longer, longer.size()) == "cut.example.net");
  Bytes shorter = rec;
  shorter[4] = uint8_t(shorter[4] - 10);
  CHECK(tls_name(shorter, shorter.size()).empty());
}

TEST_CASE("server names: a name longer than the buffer is counted whole and copied in part", "[server_names]") {
  std::string big(300, 'x');
  Bytes rec = tls_record(client_hello({sni_extension(big)}));
  char out[80];
  CHECK(tls_server_name(rec.data(), rec.size(), out, sizeof out) == 300);
  CHECK(std::string(out, sizeof out) == std::string(80, 'x'));
  std::vector<std::string> labels(4, std::string(63, 'd'));
  Bytes q = dns_message(dns_labels(labels));
  CHECK(dns_query_name(q.data(), q.size(), false, out, sizeof out) == 4 * 63 + 3);
  CHECK(std::string(out, sizeof out) == std::string(63, 'd') + "." + std::string(16, 'd'));
}

TEST_CASE("server names: bogus bytes never read outside the payload", "[server_names]") {
  std::mt19937 rng(7);
  QuicInitialDecryptor d;
  QuicOutcome outcome;
  Bytes hello = tls_record(client_hello({kAlpn, sni_extension("fuzz.example"), kVersions}));
  Bytes query = dns_message(dns_labels({"www", "example", "com"}));
  Bytes initial = hex(kRfc9001ClientInitial);
  for (int round = 0; round < 20000; ++round) {
    // random octets, and the real messages with a few octets changed
    Bytes b(rng() % 1400);
    for (auto &x : b) x = uint8_t(rng());
    int kind = round % 4;
    if (kind == 1) b = hello;
    if (kind == 2) b = query;
    if (kind == 3) b = initial;
    for (int k = 0; k < 3 && !b.empty(); ++k)  // the Initial's header only: else the AEAD just says no
      b[rng() % std::min<size_t>(b.size(), kind == 3 ? 30 : b.size())] = uint8_t(rng());
    if (kind == 0 && b.size() > 6) b[0] = 22, b[1] = 3, b[5] = 1;
    size_t n = b.empty() ? 0 : (kind == 3 ? b.size() : rng() % (b.size() + 1));
    tls_name(b, n);
    dns_name(b, n, false);
    dns_name(b, n, true);
    Exact e(b, n);
    char out[kMaxName];
    client_hello_server_name(e.p.get(), e.n, out, sizeof out);
    if (n >= 1200) {
      if (kind == 0) e.p[0] = 0xc0, e.p[1] = 0, e.p[2] = 0, e.p[3] = 0, e.p[4] = 1;
      d.server_name(e.p.get(), e.n, out, sizeof out, outcome);
    }
  }
  SUCCEED("no crash, no read out of bounds (run under ASan)");
}

TEST_CASE("server names: a DNS query's name", "[server_names]") {
  Bytes q = dns_message(dns_labels({"www", "example", "com"}));
  CHECK(dns_name(q, q.size()) == "www.example.com");
  Bytes tcp = cat({be16(q.size()), q});
  CHECK(dns_name(tcp, tcp.size(), true) == "www.example.com");
  CHECK(dns_name(q, q.size(), true).empty());  // taken as TCP: 0x1234 octets it has not
  Bytes response = dns_message(dns_labels({"www", "example", "com"}), true);
  CHECK(dns_name(response, response.size()).empty());
  Bytes no_question = dns_message(dns_labels({"www", "example", "com"}), false, 0);
  CHECK(dns_name(no_question, no_question.size()).empty());
  Bytes root = dns_message({0});
  CHECK(dns_name(root, root.size()).empty());
  for (size_t k = 0; k <= q.size(); ++k) {
    INFO("cut at " << k);
    // the name ends with its root label, 4 octets before the question's type and class
    CHECK(dns_name(q, k) == (k >= q.size() - 4 ? "www.example.com" : ""));
    CHECK(dns_name(tcp, k + 2, true) == (k >= q.size() - 4 ? "www.example.com" : ""));
  }
  // a pointer backwards (only the header is before the first question: its
  // octet 4, qdcount's high octet, reads as the root label)
  Bytes back = dns_message(cat({{3}, text("www"), {0xc0, 0x04}}));
  CHECK(dns_name(back, back.size()) == "www");
  // pointers to themselves, forwards, in a cycle: no name, bounded
  Bytes self = dns_message({0xc0, 0x0c});
  CHECK(dns_name(self, self.size()).empty());
  Bytes forward = dns_message({3, 'w', 'w', 'w', 0xc0, 0x20});
  CHECK(dns_name(forward, forward.size()).empty());
  Bytes cycle = dns_message({1, 'a', 0xc0, 0x0c});
  CHECK(dns_name(cycle, cycle.size()).empty());
  // too many labels, a label past the end, extended label types
  Bytes many = dns_message(dns_labels(std::vector<std::string>(200, "a")));
  CHECK(dns_name(many, many.size()).empty());
  Bytes past = dns_message({3, 'w', 'w'});
  CHECK(dns_name(past, past.size() - 4).empty());
  Bytes extended = dns_message({0x41, 0, 0});
  CHECK(dns_name(extended, extended.size()).empty());
  CHECK(is_dns_port(53, 40000));
  CHECK(is_dns_port(5353, 5353));
  CHECK(is_dns_port(40000, 5355));  // LLMNR
  CHECK(!is_dns_port(5354, 40000));
}

TEST_CASE("server names: QUIC versions and their Initial keys (RFC 9001 A.1, RFC 9369 A.1)", "[server_names]") {
  QuicInitialDecryptor d;
  REQUIRE(d.ok());
  Bytes dcid = hex("8394c8f03e515708");
  QuicInitialDecryptor::Keys k;
  REQUIRE(d.client_keys(1, dcid.data(), dcid.size(), k));
  CHECK(Bytes(k.key, k.key + 16) == hex("1f369613dd76d5467730efcbe3b1a22d"));
  CHECK(Bytes(k.iv, k.iv + 12) == hex("fa044b2f42a3fd3b46fb255c"));
  CHECK(Bytes(k.hp, k.hp + 16) == hex("9f50449e04a0e810283a1e9933adedd2"));
  REQUIRE(d.client_keys(0x6b3343cf, dcid.data(), dcid.size(), k));
  CHECK(Bytes(k.key, k.key + 16) == hex("8b1a0bc121284290a29e0971b5cd045d"));
  CHECK(Bytes(k.iv, k.iv + 12) == hex("91f73e2351d8fa91660e909f"));
  CHECK(Bytes(k.hp, k.hp + 16) == hex("45b95e15235d6f45a6b19cbcb0294ba9"));

  for (uint32_t v = 0xff000017; v <= 0xff000022; ++v) CHECK(quic_version_params(v));
  for (uint32_t v : {0x00000001u, 0x6b3343cfu, 0xfaceb001u, 0xfaceb002u, 0xfaceb00eu, 0x1a2a3a4au})
    CHECK(quic_version_params(v));
  for (uint32_t v : {0u, 0xff000016u, 0xff000023u, 0x51303530u, 0x51303433u, 0xfaceb003u})
    CHECK_FALSE(quic_version_params(v));
  CHECK(quic_version_params(0xff000021)->salt == quic_version_params(1)->salt);  // draft 33: the final salt
  CHECK(quic_version_params(0xff00001c)->salt != quic_version_params(0xff00001d)->salt);
  CHECK(quic_version_params(0xfaceb002)->salt == quic_version_params(0xff000017)->salt);
}

TEST_CASE("server names: the client Initials of RFC 9001 and RFC 9369 appendix A.2 open to example.com",
          "[server_names]") {
  QuicInitialDecryptor d;
  QuicOutcome outcome;
  Bytes v1 = hex(kRfc9001ClientInitial), v2 = hex(kRfc9369ClientInitial);
  REQUIRE(v1.size() == 1200);
  REQUIRE(v2.size() == 1200);
  for (int twice = 0; twice < 2; ++twice) {  // the second time with the keys kept from the first
    CHECK(quic_name(d, v1, outcome) == "example.com");
    CHECK(outcome == QuicOutcome::Name);
    CHECK(quic_name(d, v2, outcome) == "example.com");
    CHECK(outcome == QuicOutcome::Name);
  }
  // a changed octet of the ciphertext, of the protected header, a v1 packet
  // with v2's version: the AEAD says no
  Bytes bad = v1;
  bad[600] ^= 1;
  CHECK(quic_name(d, bad, outcome).empty());
  CHECK(outcome == QuicOutcome::NotDecrypted);
  bad = v1;
  bad[10] ^= 1;  // in the DCID: other keys
  CHECK(quic_name(d, bad, outcome).empty());
  CHECK(outcome == QuicOutcome::NotDecrypted);
  bad = v1;
  bad[0] = 0xd0 | (v1[0] & 0x0f), bad[1] = 0x6b, bad[2] = 0x33, bad[3] = 0x43, bad[4] = 0xcf;
  CHECK(quic_name(d, bad, outcome).empty());
  CHECK(outcome == QuicOutcome::NotDecrypted);
  // not Initials: a Handshake packet's type bits, a short header, an unknown
  // version, a datagram under 1200 octets; one whose Length goes past the end
  bad = v1;
  bad[0] ^= 0x20;
  CHECK(quic_name(d, bad, outcome).empty());
  CHECK(outcome == QuicOutcome::NotInitial);
  bad = v1;
  bad[0] &= 0x7f;
  CHECK(quic_name(d, bad, outcome).empty());
  CHECK(outcome == QuicOutcome::NotInitial);
  bad = v1;
  bad[4] = 2;
  CHECK(quic_name(d, bad, outcome).empty());
  CHECK(outcome == QuicOutcome::NotInitial);
  bad = Bytes(v1.begin(), v1.end() - 1);
  CHECK(quic_name(d, bad, outcome).empty());
  CHECK(outcome == QuicOutcome::NotInitial);
  bad = cat({v1, Bytes(20, 0)});
  bad[16] = 0x44, bad[17] = 0xb2;  // Length (octets 16-17) 0x4b2: 20 octets more than the packet's 0x49e
  CHECK(quic_name(d, bad, outcome).empty());
  CHECK(outcome == QuicOutcome::NotDecrypted);
  bad[17] = 0xb3;  // one more than the datagram holds
  CHECK(quic_name(d, bad, outcome).empty());
  CHECK(outcome == QuicOutcome::Truncated);
  // the packet and other packets after it in the datagram (coalesced)
  Bytes coalesced = cat({v1, Bytes(300, 0x55)});
  CHECK(quic_name(d, coalesced, outcome) == "example.com");
}

TEST_CASE("server names: a QUIC ClientHello in CRYPTO frames out of order, among other frames", "[server_names]") {
  QuicInitialDecryptor d;
  QuicOutcome outcome;
  Bytes dcid = hex("0011223344556677");
  Bytes ch = client_hello({kAlpn, kVersions, sni_extension("pieces.example.com"), extension(0xfe0d, Bytes(200, 7))});
  Bytes sni = sni_extension("pieces.example.com");
  size_t at = size_t(std::search(ch.begin(), ch.end(), sni.begin(), sni.end()) - ch.begin());
  Bytes ack = hex("02" "05" "00" "01" "00" "01" "00");       // largest 5, delay 0, 1 range: first 0, gap 1, length 0
  Bytes ack_ecn = hex("03" "05" "00" "00" "00" "01" "02" "03");  // no ranges, ECN counts
  SECTION("the server name in a later frame than offset 0, given first") {
    Bytes frames = cat({{0x01}, crypto_frame(at, slice(ch, at, ch.size())), {0, 0, 0}, ack,
                        crypto_frame(0, slice(ch, 0, at)), ack_ecn});
    CHECK(quic_name(d, quic_initial(1, dcid, frames), outcome) == "pieces.example.com");
    CHECK(outcome == QuicOutcome::Name);
  }
  SECTION("many small frames, backwards, overlapping") {
    Bytes frames;
    for (size_t off = 0; off < ch.size(); off += 20)
      frames = cat({crypto_frame(off, slice(ch, off, std::min(ch.size(), off + 30))), {0x01}, frames});
    CHECK(quic_name(d, quic_initial(0xff00001d, dcid, frames), outcome) == "pieces.example.com");
  }
  SECTION("a gap before the server name: the ClientHello from offset 0 ends before it") {
    Bytes frames = cat({crypto_frame(0, slice(ch, 0, at - 1)), crypto_frame(at, slice(ch, at, ch.size()))});
    CHECK(quic_name(d, quic_initial(0x6b3343cf, dcid, frames), outcome).empty());
    CHECK(outcome == QuicOutcome::NoName);
  }
  SECTION("the second packet of a ClientHello over two: no offset 0") {
    Bytes frames = crypto_frame(at, slice(ch, at, ch.size()));
    CHECK(quic_name(d, quic_initial(1, dcid, frames, 1), outcome).empty());
    CHECK(outcome == QuicOutcome::NoName);
  }
  SECTION("an unknown frame ends the walk") {
    Bytes frames = cat({{0x1e}, crypto_frame(0, ch)});  // HANDSHAKE_DONE: not in an Initial
    CHECK(quic_name(d, quic_initial(1, dcid, frames), outcome).empty());
    CHECK(outcome == QuicOutcome::NoName);
  }
  SECTION("every QUIC version supported") {
    for (uint32_t v : {0x00000001u, 0x6b3343cfu, 0xff000017u, 0xff00001cu, 0xff000020u, 0xff000022u, 0xfaceb001u,
                       0xfaceb002u, 0xfaceb00eu, 0x0a0a0a0au}) {
      INFO("version " << std::hex << v);
      CHECK(quic_name(d, quic_initial(v, dcid, crypto_frame(0, ch)), outcome) == "pieces.example.com");
    }
  }
}

namespace {

// An Ethernet frame of IPv4 and UDP or TCP around `payload`, and `trailer`
// after the IP datagram (Ethernet padding).
Bytes frame_of(uint8_t proto, uint16_t sport, uint16_t dport, const Bytes &payload, const Bytes &trailer = {},
               int udp_length_delta = 0) {
  Bytes l4 = proto == 17 ? cat({be16(sport), be16(dport), be16(size_t(int(8 + payload.size()) + udp_length_delta)),
                                be16(0), payload})
                         : cat({be16(sport), be16(dport), Bytes(8, 0), {0x50, 0x18}, Bytes(6, 0), payload});
  Bytes ip = cat({{0x45, 0}, be16(20 + l4.size()), Bytes(4, 0), {64, proto}, be16(0), {192, 0, 2, 1},
                  {198, 51, 100, 2}});
  return cat({Bytes(12, 0x02), {0x08, 0x00}, ip, l4, trailer});
}
struct Names {
  std::string server, dns;
  FoundNames found;
};
Names names_of(const Bytes &frame, QuicInitialDecryptor &quic) {
  PacketMeta meta;
  parse_packet(frame.data(), uint32_t(frame.size()), LinkType::Ethernet, meta);
  Exact e(frame, frame.size());
  char server[kMaxName], dns[kMaxName];
  Names n;
  find_names(meta, e.p.get(), e.n, quic, server, dns, kMaxName, n.found);
  n.server = std::string(server, std::min(n.found.server_len, kMaxName));
  n.dns = std::string(dns, std::min(n.found.dns_len, kMaxName));
  return n;
}

}  // namespace

TEST_CASE("server names: the payload of a parsed packet, where its IP and UDP lengths end it", "[server_names]") {
  QuicInitialDecryptor quic;
  Bytes query = dns_message(dns_labels({"www", "example", "com"}));
  Bytes hello = tls_record(client_hello({sni_extension("tls.example")}));
  Names n = names_of(frame_of(17, 40000, 53, query), quic);
  CHECK(n.dns == "www.example.com");
  CHECK(n.found.server == FoundNames::None);
  CHECK(n.found.quic == QuicOutcome::NotInitial);
  CHECK(names_of(frame_of(17, 5353, 5353, query), quic).dns == "www.example.com");
  CHECK(names_of(frame_of(17, 40000, 5355, query), quic).dns == "www.example.com");  // LLMNR
  CHECK(names_of(frame_of(6, 40000, 53, cat({be16(query.size()), query})), quic).dns == "www.example.com");
  // a UDP length that ends the datagram inside the name; trailing octets
  // that would have completed it
  Bytes cut_name = dns_message(dns_labels({"www", "example"}));
  Bytes longer = cut_name;
  longer.insert(longer.end() - 4 - 1, {3, 'c', 'o', 'm'});
  Bytes tail(longer.end() - 9, longer.end());  // "\3com", the root label, type and class
  CHECK(names_of(frame_of(17, 40000, 53, Bytes(longer.begin(), longer.end() - 9), tail), quic).dns.empty());
  CHECK(names_of(frame_of(17, 40000, 53, longer, {}, -9), quic).dns.empty());
  CHECK(names_of(frame_of(17, 40000, 53, longer, Bytes(20, 0x33)), quic).dns == "www.example.com");

  n = names_of(frame_of(6, 51000, 8443, hello), quic);
  CHECK(n.server == "tls.example");
  CHECK(n.found.server == FoundNames::Tls);
  CHECK(n.dns.empty());
  n = names_of(frame_of(17, 51000, 443, hex(kRfc9001ClientInitial)), quic);
  CHECK(n.server == "example.com");
  CHECK(n.found.server == FoundNames::Quic);
  CHECK(n.found.quic == QuicOutcome::Name);
  // headers cut short: nothing is looked at
  Bytes cut_frame = frame_of(6, 51000, 443, hello);
  cut_frame.resize(14 + 20 + 10);
  CHECK(names_of(cut_frame, quic).found.server == FoundNames::None);
}

// ---- the real trace against tshark ----

namespace {

std::vector<std::string> split(const std::string &line, char sep) {
  std::vector<std::string> out;
  std::string f;
  for (char c : line) {
    if (c == sep) out.push_back(f), f.clear();
    else f += c;
  }
  out.push_back(f);
  return out;
}
std::string first_value(const std::string &s) { return s.substr(0, s.find(',')); }

// A name as tshark prints it: printable ASCII and valid UTF-8 as they are,
// control characters as C escapes (\r, \022), any other octet as U+FFFD.
std::string as_tshark(const std::string &raw) {
  std::string out;
  for (size_t i = 0; i < raw.size();) {
    unsigned char c = raw[i];
    if (c < 0x80) {
      static const char *names = "abtnvfr";
      if (c >= 0x20 && c < 0x7f) out += char(c);
      else if (c >= 7 && c <= 13) out += std::string("\\") + names[c - 7];
      else {
        char esc[8];
        std::snprintf(esc, sizeof esc, "\\%03o", c);
        out += esc;
      }
      ++i;
      continue;
    }
    // a lead octet (by the old UTF-8 rules, up to 6 octets) and the
    // continuations that follow, at most as many as it announces: one
    // U+FFFD unless they are a whole, valid character (as Wireshark does)
    size_t len = c >= 0xfc ? 6 : c >= 0xf8 ? 5 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (c >= 0xfe) len = 1;
    size_t k = 1;
    uint32_t cp = c & (0x7f >> len);
    for (; k < len && i + k < raw.size() && (uint8_t(raw[i + k]) & 0xc0) == 0x80; ++k)
      cp = cp << 6 | (raw[i + k] & 0x3f);
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    bool valid = len > 1 && len <= 4 && k == len && cp >= least[len] && cp <= 0x10ffff &&
                 !(cp >= 0xd800 && cp < 0xe000);
    if (valid) out += raw.substr(i, len);
    else out += "\xef\xbf\xbd";
    i += k;
  }
  return out;
}

struct Frame {
  std::string flow;  // as we parsed it: protocol, addresses, ports (one direction)
  std::string server, dns;
  FoundNames::Server server_kind = FoundNames::None;
  QuicOutcome quic = QuicOutcome::NotInitial;
};
struct Tshark {
  std::string sni, dns, quic_version;
};

// One kind of name, compared frame by frame.
struct Kind {
  explicit Kind(const char *n) : name(n) {}
  const char *name;
  uint64_t tshark = 0, same = 0, earlier = 0, repeats = 0;
  std::map<uint64_t, std::string> missing, differ, extra;
  // by flow: the names we gave so far, and those either gave
  std::map<std::string, std::set<std::string>> ours_before, any_before;

  void compare(uint64_t frame, const std::string &flow, const std::string &want, const std::string &got) {
    std::set<std::string> &ours = ours_before[flow], &any = any_before[flow];
    if (!want.empty()) {
      ++tshark;
      if (got == want) ++same;
      else if (got.empty() && ours.count(want)) ++earlier;  // tshark shows it where the ClientHello ends
      else if (got.empty()) missing[frame] = want;
      else differ[frame] = "tshark " + want + ", ours " + got;
    } else if (!got.empty()) {
      if (any.count(got)) ++repeats;  // a retransmission: tshark dissects it once
      else extra[frame] = got;
    }
    if (!want.empty()) any.insert(want);
    if (!got.empty()) any.insert(got), ours.insert(got);
  }
  // The counts, and each difference with its reason if it is a known one.
  std::string report(const std::map<uint64_t, std::string> &why_missing,
                     const std::map<uint64_t, std::string> &why_alone) const {
    std::ostringstream o;
    o << name << ": tshark " << tshark << ", ours the same " << same << ", in an earlier packet of the flow "
      << earlier << ", missing " << missing.size() << ", different " << differ.size() << "; ours alone: "
      << repeats << " repeated in the flow, " << extra.size() << " others\n";
    auto list = [&o](const char *what, const std::map<uint64_t, std::string> &found,
                     const std::map<uint64_t, std::string> &why) {
      std::map<std::string, std::string> by_reason;  // reason: frames
      for (auto &[f, name] : found) {
        auto it = why.find(f);
        std::string &frames = by_reason[it == why.end() ? "UNEXPECTED (" + name + ")" : it->second];
        frames += (frames.empty() ? "" : " ") + std::to_string(f);
      }
      for (auto &[reason, frames] : by_reason) o << "  " << what << " " << frames << ": " << reason << "\n";
    };
    list("missing", missing, why_missing);
    list("different", differ, {});
    list("ours alone", extra, why_alone);
    return o.str();
  }
};

}  // namespace

TEST_CASE("server names: every ClientHello and DNS query of the nDPI trace, as tshark sees them", "[server_names]") {
  namespace fs = std::filesystem;
  fs::path trace = fs::path(SLUICE_SOURCE_DIR) / "../shared/traces/ndpi_merged.pcap";
  if (!fs::exists(trace)) {
    WARN("skipped: " << trace << " is absent");
    return;
  }
  if (std::system("tshark --version > /dev/null 2>&1") != 0) {
    WARN("skipped: tshark is not installed (apt-get install tshark)");
    return;
  }

  // ours: every packet through find_names, as the element does it
  std::map<uint64_t, Frame> ours;
  char err[PCAP_ERRBUF_SIZE];
  pcap_t *pc = pcap_open_offline(trace.c_str(), err);
  REQUIRE(pc);
  QuicInitialDecryptor quic;
  std::map<QuicOutcome, uint64_t> outcomes;
  pcap_pkthdr *h;
  const u_char *data;
  for (uint64_t frame = 1; pcap_next_ex(pc, &h, &data) == 1; ++frame) {
    PacketMeta meta;
    parse_packet(data, h->caplen, LinkType::Ethernet, meta, h->len);
    char server[kMaxName], dns[kMaxName];
    FoundNames found;
    find_names(meta, data, h->caplen, quic, server, dns, sizeof server, found);
    if (meta.status == ParseStatus::Ok && meta.ip_proto == 17) ++outcomes[found.quic];
    Frame &f = ours[frame];
    f.flow = std::to_string(meta.ip_proto) + " " + std::string((const char *)meta.src_addr, 32) + " " +
             std::to_string(meta.src_port) + " " + std::to_string(meta.dst_port);
    f.server = as_tshark(std::string(server, std::min(found.server_len, sizeof server)));
    f.dns = as_tshark(std::string(dns, std::min(found.dns_len, sizeof dns)));
    f.server_kind = found.server;
    f.quic = found.quic;
  }
  pcap_close(pc);

  // tshark's
  std::map<uint64_t, Tshark> theirs;
  std::string cmd = "tshark -r '" + trace.string() +
                    "' -Y 'tls.handshake.type == 1 || (dns.flags.response == 0)' -T fields -e frame.number"
                    " -e tls.handshake.extensions_server_name -e dns.qry.name -e quic.version 2>/dev/null";
  FILE *f = popen(cmd.c_str(), "r");
  REQUIRE(f);
  std::string out;
  char buf[65536];
  for (size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, got);
  REQUIRE(pclose(f) == 0);
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> col = split(line, '\t');
    REQUIRE(col.size() == 4);
    theirs[std::stoull(col[0])] = {first_value(col[1]), first_value(col[2]), first_value(col[3])};
  }
  REQUIRE(theirs.size() > 1000);

  Kind tls{"TLS over TCP"}, quic_kind{"QUIC"}, dns{"DNS"};
  std::map<std::string, std::pair<int, int>> quic_versions;  // tshark's names, ours the same (or earlier)
  for (auto &[frame, o] : ours) {
    Tshark t = theirs.count(frame) ? theirs[frame] : Tshark{};
    bool is_quic = !t.quic_version.empty() || o.server_kind == FoundNames::Quic;
    tls.compare(frame, o.flow, is_quic ? "" : t.sni, o.server_kind == FoundNames::Tls ? o.server : "");
    uint64_t agreed = quic_kind.same + quic_kind.earlier;
    quic_kind.compare(frame, o.flow, is_quic ? t.sni : "", o.server_kind == FoundNames::Quic ? o.server : "");
    if (is_quic && !t.sni.empty()) {
      auto &[names, same] = quic_versions[t.quic_version];
      ++names;
      same += int(quic_kind.same + quic_kind.earlier - agreed);
    }
    dns.compare(frame, o.flow, t.dns, o.dns);
  }

  // What one finds and the other does not, frame by frame, and why.
  // (TunnelDecap -> ServerNames, run on this trace, gives the names of the
  // VXLAN and GTP-U ones: 3 TLS, 4 DNS)
  const std::string decap = "in a VXLAN or GTP-U tunnel: ServerNames after TunnelDecap reads the inner packet";
  const std::string ip_in_ip = "IP in IP (4in6, 6in4): no element opens it, the packet is metered as the outer one";
  const std::string capwap = "802.11 in CAPWAP: no element opens it";
  const std::string port = "neither port 53, 5353 nor 5355 (a fuzzed port: tshark follows the DNS conversation)";
  const std::string no_text = "a root or extended label (\"<Root>\", \"<Unknown extended label>\"): no text";
  std::map<uint64_t, std::string> tls_missing = {{937, ip_in_ip}, {963, ip_in_ip},  {1032, ip_in_ip}, {10609, capwap},
                                                  {33884, decap},  {69372, decap},   {69395, decap}};
  std::map<uint64_t, std::string> tls_alone = {
      {61116, "a ClientHello over two segments, the second not captured: tshark never puts it together"}};
  std::map<uint64_t, std::string> quic_alone = {
      {45836, "the first of two Initials of a ClientHello: tshark shows it on the second (45838)"}};
  std::map<uint64_t, std::string> dns_missing = {
      {956, ip_in_ip},    {957, ip_in_ip},    {69365, decap},     {69366, decap},     {69388, decap},
      {69389, decap},     {22888, port},      {22989, port},
      {23232, port},      {23451, port},      {22890, no_text},   {22905, no_text},
      {22991, no_text},   {23262, no_text},   {23264, no_text},   {23271, no_text},   {23330, no_text},
      {23397, no_text},   {23459, no_text},   {23485, no_text}};
  std::map<uint64_t, std::string> dns_alone = {
      {23480, "the name is whole, the message after it is not: tshark calls it malformed"},
      {23522, "the first fragment of a datagram: tshark dissects it reassembled (never, here)"}};

  std::ostringstream report;
  report << tls.report(tls_missing, tls_alone) << quic_kind.report({}, quic_alone) << "  by version (ours/tshark's):";
  for (auto &[v, c] : quic_versions) report << " " << v << " " << c.second << "/" << c.first;
  report << "\n" << dns.report(dns_missing, dns_alone) << "UDP payloads, QUIC outcome:";
  const char *outcome_names[] = {"not an Initial", "truncated", "not decrypted", "no name", "name"};
  for (auto &[o, c] : outcomes) report << " " << outcome_names[int(o)] << " " << c << ";";
  WARN(report.str());

  auto frames = [](const std::map<uint64_t, std::string> &m) {
    std::set<uint64_t> out;
    for (auto &[f, s] : m) out.insert(f);
    return out;
  };
  CHECK(frames(tls.missing) == frames(tls_missing));
  CHECK(frames(tls.extra) == frames(tls_alone));
  CHECK(tls.differ.empty());
  CHECK(tls.same + tls_missing.size() == tls.tshark);
  CHECK(quic_kind.missing.empty());
  CHECK(frames(quic_kind.extra) == frames(quic_alone));
  CHECK(quic_kind.differ.empty());
  CHECK(quic_kind.same + quic_kind.earlier == quic_kind.tshark);
  for (auto &[v, c] : quic_versions) {
    INFO("QUIC version " << v);
    CHECK(c.second == c.first);
  }
  CHECK(frames(dns.missing) == frames(dns_missing));
  CHECK(frames(dns.extra) == frames(dns_alone));
  CHECK(dns.differ.empty());
  CHECK(dns.same + dns_missing.size() == dns.tshark);
}
