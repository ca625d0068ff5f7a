// Server and query names in packet payloads: the TLS ClientHello's server
// name (SNI, RFC 6066) over TCP, the same in a QUIC client Initial (RFC 9000,
// 9001, 9369), and a DNS query's name. Pure functions over one packet's
// payload, for the ServerNames element (server_names.cc) and its tests: no
// DPDK, no allocation, no exceptions, no state but what the caller passes
// (QuicInitialDecryptor: the OpenSSL contexts, reused).
//
// Every function reads only [p, p + n), whatever the bytes say, and bounds
// its work by n. Each writes a found name into out[0, min(length, cap)) and
// returns its whole length (0: no name), so that a caller can tell a name
// longer than its buffer. They try the cheap tests first: a payload that is
// not a ClientHello, a QUIC Initial or a DNS query costs a few compares.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/packet/packet_meta.hh"

// OpenSSL's types, without its headers in the element's translation unit.
typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;
typedef struct evp_kdf_ctx_st EVP_KDF_CTX;

namespace sluice::server_names {

// A buffer for any name a flow field keeps (at most 254 octets) and for any
// valid DNS name (253 characters of text); a longer name is counted whole
// and copied in part.
inline constexpr size_t kMaxName = 256;

// The server_name (host_name type) of a TLS handshake message that starts at
// p: a ClientHello (type 1) and its 3-octet length, as in a TLS record or a
// QUIC CRYPTO stream. A message cut short at p + n still yields the name when
// the server_name extension is whole before the cut.
size_t client_hello_server_name(const uint8_t *p, size_t n, char *out, size_t cap);

// The server name of a TLS ClientHello at the start of a TCP payload: a
// handshake record (type 22, version 3.x) whose first message is the
// ClientHello, after a PROXY protocol header (v1 or v2) and a
// ChangeCipherSpec record (a second ClientHello, after a HelloRetryRequest)
// if there are. Only this payload is read (no TCP reassembly): the name is
// found when its extension is in this segment.
size_t tls_server_name(const uint8_t *p, size_t n, char *out, size_t cap);

// The name of the first question of a DNS query (QR = 0) as dotted text
// without the final dot: the message at p (UDP), or after its 2-octet length
// (tcp = true). Compression pointers are followed backwards only, and at most
// kMaxDnsLabels labels are read: no loop, no read outside [p, p + n). The
// root name has no text: 0.
inline constexpr int kMaxDnsLabels = 128;
size_t dns_query_name(const uint8_t *p, size_t n, bool tcp, char *out, size_t cap);

// Whether a DNS port (53; 5353 mDNS; 5355 LLMNR, RFC 4795, which has the
// DNS message format) is at either end.
inline bool is_dns_port(uint16_t src, uint16_t dst) {
  return src == 53 || dst == 53 || src == 5353 || dst == 5353 || src == 5355 || dst == 5355;
}

// QUIC versions whose client Initial this decrypts: the initial salt and the
// labels of its packet protection keys, and the Initial packet type bits.
struct QuicVersionParams {
  const uint8_t *salt;      // 20 octets
  const char *key_label;    // "quic key", "quicv2 key"
  const char *iv_label;
  const char *hp_label;
  uint8_t initial_type;     // long header type bits (0x30 of the first octet) of an Initial
  uint8_t crypto_frame;     // frame type of CRYPTO frames (0x06; Google's T05x: 0x08)
};
// The parameters of `version`, or nullptr for a version not supported:
// v1 (0x00000001), v2 (0x6b3343cf, RFC 9369), IETF drafts 23-34
// (0xff000017-0xff000022), Facebook mvfst 0xfaceb001 (the draft-22 salt),
// 0xfaceb002 and 0xfaceb00e (draft 27: the draft-23 salt), Google T050 and
// T051 (gQUIC with TLS and IETF headers, their own salts and CRYPTO frame
// type), and versions of the 0x?a?a?a?a pattern reserved to force version
// negotiation, which take the draft-29 salt as Wireshark and nDPI do.
const QuicVersionParams *quic_version_params(uint32_t version);

// What became of a UDP payload offered to QuicInitialDecryptor.
enum class QuicOutcome : uint8_t {
  NotInitial,     // not a long-header Initial of a supported version in a >= 1200-octet datagram
  Truncated,      // an Initial whose packet extends past the payload, or too large for the buffers
  NotDecrypted,   // the client keys of its DCID do not open it (a server's Initial, a later client
                  // Initial sent to the server's connection ID, or not QUIC at all)
  NoName,         // opened, but the CRYPTO data from offset 0 holds no server name
  Name,
};

// Opens client Initial packets and finds the ClientHello's server name.
// It holds the OpenSSL contexts it reuses from packet to packet (an HKDF,
// AES-128-ECB for header protection, AES-128-GCM), the keys of the last
// DCID, and buffers for the plaintext and the CRYPTO data: one per element
// instance, used by one thread. Nothing is allocated per packet by this code
// (OpenSSL's HKDF allocates inside; it runs only for a DCID not seen last).
class QuicInitialDecryptor {
 public:
  // The largest QUIC packet opened: a client Initial fills a datagram of at
  // least 1200 octets, and of at most the path MTU.
  static constexpr size_t kMaxPacket = 4096;
  // CRYPTO frames of one packet put together: up to this many, in any order.
  static constexpr int kMaxCryptoFrames = 64;

  QuicInitialDecryptor();
  ~QuicInitialDecryptor();
  QuicInitialDecryptor(const QuicInitialDecryptor &) = delete;
  QuicInitialDecryptor &operator=(const QuicInitialDecryptor &) = delete;
  // False when OpenSSL could not give the contexts: server_name then finds nothing.
  bool ok() const { return kdf_ && hp_ && aead_; }

  // The server name of the client Initial at the start of the UDP payload
  // [p, p + n): decrypts it with the client keys its Destination Connection
  // ID derives (RFC 9001 section 5), puts its CRYPTO frames together by
  // offset and reads the ClientHello in the data contiguous from offset 0.
  size_t server_name(const uint8_t *p, size_t n, char *out, size_t cap, QuicOutcome &outcome);

  // The client Initial keys of a DCID (for the tests: RFC 9001 A.1); false
  // for a version not supported or an OpenSSL failure.
  struct Keys {
    uint8_t key[16], iv[12], hp[16];
  };
  bool client_keys(uint32_t version, const uint8_t *dcid, size_t dcid_len, Keys &out);

 private:
  bool hkdf_extract(const uint8_t *salt, const uint8_t *ikm, size_t ikm_len, uint8_t prk[32]);
  bool hkdf_expand_label(const uint8_t *secret, const char *label, uint8_t *out, size_t len);

  EVP_KDF_CTX *kdf_ = nullptr;
  EVP_CIPHER_CTX *hp_ = nullptr;    // AES-128-ECB, header protection
  EVP_CIPHER_CTX *aead_ = nullptr;  // AES-128-GCM, packet protection
  // The keys of the last DCID: a ClientHello over two Initials, and
  // retransmissions, derive them once.
  uint32_t cached_version_ = 0;
  uint8_t cached_dcid_len_ = 0xff;  // none
  uint8_t cached_dcid_[20];
  Keys keys_;
  uint8_t plain_[kMaxPacket];
  uint8_t crypto_[kMaxPacket];
};

// What find_names found in one packet.
struct FoundNames {
  enum Server : uint8_t { None, Tls, Quic };
  Server server = None;
  size_t server_len = 0;  // the whole name; min(server_len, cap) octets are in `server`
  size_t dns_len = 0;     // the same for `dns`
  QuicOutcome quic = QuicOutcome::NotInitial;  // of a UDP payload
};

// The names in the payload of a packet parsed into `meta` (data[0, len),
// as parse_packet saw it): the TLS server name of a TCP payload, the QUIC
// one of a UDP payload, the DNS query name of either on a DNS port. The
// payload ends where the IP length (and for UDP, the UDP length) says, if
// before len. Nothing for a packet whose headers were not all parsed
// (status other than Ok) or without a transport header.
void find_names(const PacketMeta &meta, const uint8_t *data, size_t len, QuicInitialDecryptor &quic, char *server,
                char *dns, size_t cap, FoundNames &found);

}  // namespace sluice::server_names
