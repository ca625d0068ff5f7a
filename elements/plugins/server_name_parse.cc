// Server and query names in payloads: see server_name_parse.hh.
#include "server_name_parse.hh"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <cstring>

namespace sluice::server_names {

namespace {

inline size_t be16(const uint8_t *p) { return size_t(p[0]) << 8 | p[1]; }
inline size_t be24(const uint8_t *p) { return size_t(p[0]) << 16 | size_t(p[1]) << 8 | p[2]; }
inline uint32_t be32(const uint8_t *p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
inline size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

// Copies what fits of a name and returns its whole length.
inline size_t give(const uint8_t *name, size_t len, char *out, size_t cap) {
  std::memcpy(out, name, min_size(len, cap));
  return len;
}

// A QUIC variable-length integer (RFC 9000 section 16) at p[i]; false when
// it runs past n.
inline bool varint(const uint8_t *p, size_t n, size_t &i, uint64_t &v) {
  if (i >= n) return false;
  size_t len = size_t(1) << (p[i] >> 6);
  if (len > n - i) return false;
  v = p[i] & 0x3f;
  for (size_t k = 1; k < len; ++k) v = v << 8 | p[i + k];
  i += len;
  return true;
}

// Initial salts (RFC 9001 section 5.2, RFC 9369 section 3.3.1, and the
// drafts that introduced each; Google's T05x as nDPI and Wireshark have them).
constexpr uint8_t kSaltDraft22[20] = {0x7f, 0xbc, 0xdb, 0x0e, 0x7c, 0x66, 0xbb, 0xe9, 0x19, 0x3a,
                                      0x96, 0xcd, 0x21, 0x51, 0x9e, 0xbd, 0x7a, 0x02, 0x64, 0x4a};
constexpr uint8_t kSaltDraft23[20] = {0xc3, 0xee, 0xf7, 0x12, 0xc7, 0x2e, 0xbb, 0x5a, 0x11, 0xa7,
                                      0xd2, 0x43, 0x2b, 0xb4, 0x63, 0x65, 0xbe, 0xf9, 0xf5, 0x02};
constexpr uint8_t kSaltDraft29[20] = {0xaf, 0xbf, 0xec, 0x28, 0x99, 0x93, 0xd2, 0x4c, 0x9e, 0x97,
                                      0x86, 0xf1, 0x9c, 0x61, 0x11, 0xe0, 0x43, 0x90, 0xa8, 0x99};
constexpr uint8_t kSaltV1[20] = {0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17,
                                 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f, 0x0a};
constexpr uint8_t kSaltV2[20] = {0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93,
                                 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e, 0xd9};
constexpr uint8_t kSaltT050[20] = {0x7f, 0xf5, 0x79, 0xe5, 0xac, 0xd0, 0x72, 0x91, 0x55, 0x80,
                                   0x30, 0x4c, 0x43, 0xa2, 0x36, 0x7c, 0x60, 0x48, 0x83, 0x10};
constexpr uint8_t kSaltT051[20] = {0x7a, 0x4e, 0xde, 0xf4, 0xe7, 0xcc, 0xee, 0x5f, 0xa4, 0x50,
                                   0x6c, 0x19, 0x12, 0x4f, 0xc8, 0xcc, 0xda, 0x6e, 0x03, 0x3d};

constexpr QuicVersionParams kDraft22{kSaltDraft22, "quic key", "quic iv", "quic hp", 0x00, 0x06};
constexpr QuicVersionParams kDraft23{kSaltDraft23, "quic key", "quic iv", "quic hp", 0x00, 0x06};
constexpr QuicVersionParams kDraft29{kSaltDraft29, "quic key", "quic iv", "quic hp", 0x00, 0x06};
constexpr QuicVersionParams kV1{kSaltV1, "quic key", "quic iv", "quic hp", 0x00, 0x06};
constexpr QuicVersionParams kV2{kSaltV2, "quicv2 key", "quicv2 iv", "quicv2 hp", 0x10, 0x06};
constexpr QuicVersionParams kT050{kSaltT050, "quic key", "quic iv", "quic hp", 0x00, 0x08};
constexpr QuicVersionParams kT051{kSaltT051, "quic key", "quic iv", "quic hp", 0x00, 0x08};

// A CRYPTO frame's data in a decrypted packet.
struct CryptoPiece {
  uint64_t offset;
  size_t len;
  const uint8_t *data;
};

constexpr uint8_t kProxyV2Signature[12] = {'\r', '\n', '\r', '\n', 0, '\r', '\n', 'Q', 'U', 'I', 'T', '\n'};

// The length of a PROXY protocol header (haproxy's proxy-protocol.txt) at
// p, 0 when there is none: v1 is a text line of at most 107 octets, v2 a
// 12-octet signature, version and command, family, and a 2-octet length.
size_t proxy_header_length(const uint8_t *p, size_t n) {
  if (n >= 16 && std::memcmp(p, kProxyV2Signature, 12) == 0) return min_size(n, 16 + be16(p + 14));
  if (n < 8 || std::memcmp(p, "PROXY ", 6) != 0) return 0;
  for (size_t i = 6; i + 1 < min_size(n, 107); ++i)
    if (p[i] == '\r' && p[i + 1] == '\n') return i + 2;
  return 0;
}

}  // namespace

size_t client_hello_server_name(const uint8_t *p, size_t n, char *out, size_t cap) {
  if (n < 4 || p[0] != 1) return 0;
  size_t end = min_size(n, 4 + be24(p + 1));
  size_t i = 4 + 2 + 32;  // legacy_version, random
  if (i + 1 > end) return 0;
  i += 1 + p[i];  // legacy_session_id
  if (i + 2 > end) return 0;
  i += 2 + be16(p + i);  // cipher_suites
  if (i + 1 > end) return 0;
  i += 1 + p[i];  // legacy_compression_methods
  if (i + 2 > end) return 0;
  size_t ext_end = min_size(end, i + 2 + be16(p + i));
  i += 2;
  while (i + 4 <= ext_end) {
    size_t type = be16(p + i), len = be16(p + i + 2);
    i += 4;
    if (type != 0) {  // not server_name
      i += len;
      continue;
    }
    if (len > ext_end - i || len < 2) return 0;  // cut before its end: the name may be cut too
    size_t list_end = min_size(i + len, i + 2 + be16(p + i));
    for (size_t j = i + 2; j + 3 <= list_end;) {
      size_t name_type = p[j], name_len = be16(p + j + 1);
      j += 3;
      if (name_len > list_end - j) return 0;
      if (name_type == 0 && name_len > 0) return give(p + j, name_len, out, cap);  // host_name
      j += name_len;
    }
    return 0;
  }
  return 0;
}

size_t tls_server_name(const uint8_t *p, size_t n, char *out, size_t cap) {
  if (n >= 8 && (p[0] == 'P' || p[0] == '\r')) {
    size_t skip = proxy_header_length(p, n);
    p += skip, n -= skip;
  }
  if (n >= 6 + 6 && p[0] == 20 && p[1] == 3 && p[3] == 0 && p[4] == 1) p += 6, n -= 6;  // ChangeCipherSpec
  // record: type 22 (handshake), version 3.x, length; then the message type
  if (n < 6 || p[0] != 22 || p[1] != 3 || p[5] != 1) return 0;
  size_t end = min_size(n, 5 + be16(p + 3));
  return client_hello_server_name(p + 5, end - 5, out, cap);
}

size_t dns_query_name(const uint8_t *p, size_t n, bool tcp, char *out, size_t cap) {
  if (tcp) {
    if (n < 2) return 0;
    n = min_size(n - 2, be16(p));
    p += 2;
  }
  // header: id, flags (QR is the top bit), qdcount; then the first question
  if (n < 12 + 1 || (p[2] & 0x80) || be16(p + 4) == 0) return 0;
  size_t i = 12, len = 0;
  size_t first = i;  // where the labels being read began: a pointer must lead before it
  for (int labels = 0;; ++labels) {
    if (labels == kMaxDnsLabels || i >= n) return 0;
    size_t b = p[i];
    if (b == 0) break;
    if ((b & 0xc0) == 0xc0) {
      if (i + 1 >= n) return 0;
      size_t target = (b & 0x3f) << 8 | p[i + 1];
      if (target >= first) return 0;  // forward or to itself: could loop
      i = first = target;
      continue;
    }
    if (b & 0xc0) return 0;  // extended label types (0x40, 0x80): none in use (RFC 6891)
    if (b > n - i - 1) return 0;
    if (len != 0) {
      if (len < cap) out[len] = '.';
      ++len;
    }
    if (len < cap) std::memcpy(out + len, p + i + 1, min_size(b, cap - len));
    len += b;
    i += 1 + b;
  }
  return len;
}

const QuicVersionParams *quic_version_params(uint32_t version) {
  switch (version) {
    case 0x00000001: return &kV1;
    case 0x6b3343cf: return &kV2;
    case 0xfaceb001: return &kDraft22;
    case 0xfaceb002:
    case 0xfaceb00e: return &kDraft23;
    case 0x54303530: return &kT050;
    case 0x54303531: return &kT051;
  }
  if (version >= 0xff000017 && version <= 0xff000022) {
    uint32_t draft = version & 0xff;
    return draft <= 28 ? &kDraft23 : draft <= 32 ? &kDraft29 : &kV1;
  }
  if ((version & 0x0f0f0f0f) == 0x0a0a0a0a) return &kDraft29;
  return nullptr;
}

QuicInitialDecryptor::QuicInitialDecryptor() {
  if (EVP_KDF *kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr)) {
    kdf_ = EVP_KDF_CTX_new(kdf);
    EVP_KDF_free(kdf);
  }
  if (kdf_) {
    char digest[] = "SHA256";
    OSSL_PARAM ps[] = {OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0), OSSL_PARAM_construct_end()};
    if (EVP_KDF_CTX_set_params(kdf_, ps) != 1) {
      EVP_KDF_CTX_free(kdf_);
      kdf_ = nullptr;
    }
  }
  hp_ = EVP_CIPHER_CTX_new();
  if (hp_ && (EVP_EncryptInit_ex(hp_, EVP_aes_128_ecb(), nullptr, nullptr, nullptr) != 1 ||
              EVP_CIPHER_CTX_set_padding(hp_, 0) != 1)) {
    EVP_CIPHER_CTX_free(hp_);
    hp_ = nullptr;
  }
  aead_ = EVP_CIPHER_CTX_new();  // GCM's default nonce length is QUIC's 12 octets
  if (aead_ && EVP_DecryptInit_ex(aead_, EVP_aes_128_gcm(), nullptr, nullptr, nullptr) != 1) {
    EVP_CIPHER_CTX_free(aead_);
    aead_ = nullptr;
  }
  ERR_clear_error();
}

QuicInitialDecryptor::~QuicInitialDecryptor() {
  EVP_KDF_CTX_free(kdf_);
  EVP_CIPHER_CTX_free(hp_);
  EVP_CIPHER_CTX_free(aead_);
}

bool QuicInitialDecryptor::hkdf_extract(const uint8_t *salt, const uint8_t *ikm, size_t ikm_len, uint8_t prk[32]) {
  int mode = EVP_KDF_HKDF_MODE_EXTRACT_ONLY;
  OSSL_PARAM ps[] = {OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
                     OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t *>(ikm), ikm_len),
                     OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<uint8_t *>(salt), 20),
                     OSSL_PARAM_construct_end()};
  return EVP_KDF_derive(kdf_, prk, 32, ps) == 1;
}

// HKDF-Expand-Label (RFC 8446 section 7.1) with an empty context.
bool QuicInitialDecryptor::hkdf_expand_label(const uint8_t *secret, const char *label, uint8_t *out, size_t len) {
  uint8_t info[2 + 1 + 6 + 32 + 1];
  size_t label_len = std::strlen(label);
  if (label_len > 32) return false;
  info[0] = uint8_t(len >> 8), info[1] = uint8_t(len);
  info[2] = uint8_t(6 + label_len);
  std::memcpy(info + 3, "tls13 ", 6);
  std::memcpy(info + 9, label, label_len);
  info[9 + label_len] = 0;
  int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
  OSSL_PARAM ps[] = {OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
                     OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t *>(secret), 32),
                     OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, 10 + label_len),
                     OSSL_PARAM_construct_end()};
  return EVP_KDF_derive(kdf_, out, len, ps) == 1;
}

bool QuicInitialDecryptor::client_keys(uint32_t version, const uint8_t *dcid, size_t dcid_len, Keys &out) {
  const QuicVersionParams *v = quic_version_params(version);
  if (!v || !kdf_ || dcid_len == 0 || dcid_len > 20) return false;
  uint8_t initial[32], client[32];
  bool ok = hkdf_extract(v->salt, dcid, dcid_len, initial) &&
            hkdf_expand_label(initial, "client in", client, 32) &&
            hkdf_expand_label(client, v->key_label, out.key, 16) &&
            hkdf_expand_label(client, v->iv_label, out.iv, 12) &&
            hkdf_expand_label(client, v->hp_label, out.hp, 16);
  if (!ok) ERR_clear_error();
  return ok;
}

size_t QuicInitialDecryptor::server_name(const uint8_t *p, size_t n, char *out, size_t cap, QuicOutcome &outcome) {
  outcome = QuicOutcome::NotInitial;
  // A client pads every datagram with an Initial to 1200 octets (RFC 9000
  // section 14.1): a long header, a supported version, the Initial type.
  if (n < 1200 || !(p[0] & 0x80)) return 0;
  uint32_t version = be32(p + 1);
  const QuicVersionParams *v = quic_version_params(version);
  if (!v || (p[0] & 0x30) != v->initial_type || !ok()) return 0;
  size_t dcid_len = p[5];
  if (dcid_len == 0 || dcid_len > 20) return 0;
  const uint8_t *dcid = p + 6;
  size_t i = 6 + dcid_len;
  size_t scid_len = p[i];  // n >= 1200: the connection IDs are in the payload
  if (scid_len > 20) return 0;
  i += 1 + scid_len;
  uint64_t token_len, length;
  if (!varint(p, n, i, token_len) || token_len > n - i) return 0;
  i += size_t(token_len);
  if (!varint(p, n, i, length)) return 0;
  size_t pn_offset = i;
  // the packet (which may share the datagram with others after it) must be
  // whole, and hold the 4 + 16 octets that header protection samples
  if (length > n - pn_offset || length < 4 + 16) {
    outcome = QuicOutcome::Truncated;
    return 0;
  }
  size_t packet_end = pn_offset + size_t(length);

  if (cached_version_ != version || cached_dcid_len_ != dcid_len || std::memcmp(cached_dcid_, dcid, dcid_len) != 0) {
    cached_dcid_len_ = 0xff;
    if (!client_keys(version, dcid, dcid_len, keys_) ||
        EVP_EncryptInit_ex(hp_, nullptr, nullptr, keys_.hp, nullptr) != 1 ||
        EVP_DecryptInit_ex(aead_, nullptr, nullptr, keys_.key, nullptr) != 1) {
      ERR_clear_error();
      outcome = QuicOutcome::NotDecrypted;
      return 0;
    }
    cached_version_ = version;
    cached_dcid_len_ = uint8_t(dcid_len);
    std::memcpy(cached_dcid_, dcid, dcid_len);
  }

  // header protection (RFC 9001 section 5.4): the mask is AES-ECB of the
  // 16 octets 4 after the packet number's start
  uint8_t mask[16];
  int outl = 0;
  if (EVP_EncryptUpdate(hp_, mask, &outl, p + pn_offset + 4, 16) != 1 || outl != 16) {
    ERR_clear_error();
    outcome = QuicOutcome::NotDecrypted;
    return 0;
  }
  uint8_t first = uint8_t(p[0] ^ (mask[0] & 0x0f));
  size_t pn_len = (first & 3) + 1;
  uint8_t pn_bytes[4];
  uint64_t pn = 0;
  for (size_t k = 0; k < pn_len; ++k) {
    pn_bytes[k] = uint8_t(p[pn_offset + k] ^ mask[1 + k]);
    pn = pn << 8 | pn_bytes[k];
  }
  size_t payload = pn_offset + pn_len;
  if (packet_end - payload <= 16) {
    outcome = QuicOutcome::NotDecrypted;
    return 0;
  }
  size_t cipher_len = packet_end - payload - 16;
  if (cipher_len > kMaxPacket) {
    outcome = QuicOutcome::Truncated;
    return 0;
  }

  // packet protection: AES-128-GCM, the nonce the IV xor the packet number
  // (a client's first Initials: the truncated number is the whole one), the
  // unprotected header as associated data
  uint8_t nonce[12], tag[16];
  std::memcpy(nonce, keys_.iv, 12);
  for (int k = 0; k < 8; ++k) nonce[11 - k] ^= uint8_t(pn >> (8 * k));
  std::memcpy(tag, p + packet_end - 16, 16);
  int plain_len = 0, final_len = 0;
  bool opened = EVP_DecryptInit_ex(aead_, nullptr, nullptr, nullptr, nonce) == 1 &&
                EVP_DecryptUpdate(aead_, nullptr, &outl, &first, 1) == 1 &&
                EVP_DecryptUpdate(aead_, nullptr, &outl, p + 1, int(pn_offset - 1)) == 1 &&
                EVP_DecryptUpdate(aead_, nullptr, &outl, pn_bytes, int(pn_len)) == 1 &&
                EVP_DecryptUpdate(aead_, plain_, &plain_len, p + payload, int(cipher_len)) == 1 &&
                EVP_CIPHER_CTX_ctrl(aead_, EVP_CTRL_AEAD_SET_TAG, 16, tag) == 1 &&
                EVP_DecryptFinal_ex(aead_, plain_ + plain_len, &final_len) == 1;
  if (!opened) {
    ERR_clear_error();
    outcome = QuicOutcome::NotDecrypted;
    return 0;
  }
  size_t plain_n = size_t(plain_len) + size_t(final_len);

  // the frames an Initial may carry (RFC 9000 section 17.2.2): the CRYPTO
  // ones are kept, the others skipped; anything else ends the walk
  CryptoPiece pieces[kMaxCryptoFrames];
  int count = 0;
  size_t j = 0;
  while (j < plain_n) {
    uint8_t type = plain_[j++];
    if (type == 0x00 || type == 0x01) continue;  // PADDING, PING
    uint64_t a, b, c, d;
    if (type == v->crypto_frame) {
      if (!varint(plain_, plain_n, j, a) || !varint(plain_, plain_n, j, b) || b > plain_n - j) break;
      if (count < kMaxCryptoFrames && b > 0) pieces[count++] = {a, size_t(b), plain_ + j};
      j += size_t(b);
    } else if (type == 0x02 || type == 0x03) {  // ACK: largest, delay, range count, first range, ranges
      if (!varint(plain_, plain_n, j, a) || !varint(plain_, plain_n, j, b) || !varint(plain_, plain_n, j, c) ||
          !varint(plain_, plain_n, j, d))
        break;
      bool good = true;
      for (uint64_t r = 0; r < c && good; ++r)  // each range is 2 octets at least: bounded by plain_n
        good = varint(plain_, plain_n, j, a) && varint(plain_, plain_n, j, b);
      if (good && type == 0x03)  // ECN counts
        good = varint(plain_, plain_n, j, a) && varint(plain_, plain_n, j, b) && varint(plain_, plain_n, j, c);
      if (!good) break;
    } else if (type == 0x1c) {  // CONNECTION_CLOSE: error code, frame type, reason
      if (!varint(plain_, plain_n, j, a) || !varint(plain_, plain_n, j, b) || !varint(plain_, plain_n, j, c) ||
          c > plain_n - j)
        break;
      j += size_t(c);
    } else {
      break;
    }
  }

  // The data contiguous from offset 0, in any order of the frames (a
  // ClientHello may come in pieces, shuffled): each pass takes the pieces
  // that start within what is put together and reach past it.
  size_t have = 0;
  for (bool grew = true; grew;) {
    grew = false;
    for (int k = 0; k < count; ++k) {
      const CryptoPiece &c = pieces[k];
      if (c.offset > have || c.offset + c.len <= have) continue;
      size_t from = have - size_t(c.offset);
      size_t take = min_size(c.len - from, kMaxPacket - have);
      std::memcpy(crypto_ + have, c.data + from, take);
      have += take;
      if (take) grew = true;
    }
  }
  outcome = QuicOutcome::NoName;
  size_t len = client_hello_server_name(crypto_, have, out, cap);
  if (len) outcome = QuicOutcome::Name;
  return len;
}

void find_names(const PacketMeta &meta, const uint8_t *data, size_t len, QuicInitialDecryptor &quic, char *server,
                char *dns, size_t cap, FoundNames &found) {
  found = FoundNames{};
  if (meta.status != ParseStatus::Ok || !meta.has_l4()) return;
  bool tcp = meta.ip_proto == 6, udp = meta.ip_proto == 17;
  if (!tcp && !udp) return;
  // not past the IP datagram (Ethernet padding), nor for UDP past its length
  size_t end = min_size(len, size_t(meta.l3_offset) + meta.ip_total_length);
  if (udp && size_t(meta.l4_offset) + 8 <= end) {
    size_t udp_len = be16(data + meta.l4_offset + 4);
    if (udp_len >= 8) end = min_size(end, meta.l4_offset + udp_len);
  }
  if (end <= meta.payload_offset) return;
  const uint8_t *p = data + meta.payload_offset;
  size_t n = end - meta.payload_offset;
  if (tcp) {
    found.server_len = tls_server_name(p, n, server, cap);
    if (found.server_len) found.server = FoundNames::Tls;
  } else {
    found.server_len = quic.server_name(p, n, server, cap, found.quic);
    if (found.server_len) found.server = FoundNames::Quic;
  }
  if (is_dns_port(meta.src_port, meta.dst_port)) found.dns_len = dns_query_name(p, n, tcp, dns, cap);
}

}  // namespace sluice::server_names
