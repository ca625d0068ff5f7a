// Filter expressions in pcap-filter syntax (`tcp and port 443`), compiled by
// libpcap itself so that an expression accepts exactly the packets tcpdump's
// would. The compiled classic-BPF program stays accessible for the JIT.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/packet/packet_meta.hh"

struct bpf_insn;  // <pcap/bpf.h>

namespace sluice {

// A compiled expression; movable, not copyable; owns its BPF program.
class PcapFilter {
public:
  // Compiles `expr` for packets of `link` (pcap_compile, optimized, netmask
  // unknown). nullopt, and *error set to libpcap's message (cleaned up), when
  // libpcap refuses it, or when it has more terms than libpcap compiles in
  // reasonable time (256). Programs compiled in the last minute are reused.
  // Compiling and matching are thread-safe.
  static std::optional<PcapFilter> compile(std::string_view expr, LinkType link, std::string *error = nullptr);

  PcapFilter(PcapFilter &&other) noexcept;
  PcapFilter &operator=(PcapFilter &&other) noexcept;
  PcapFilter(const PcapFilter &) = delete;
  PcapFilter &operator=(const PcapFilter &) = delete;
  ~PcapFilter();

  // Runs the program (libpcap's bpf_filter) on a packet whose
  // first `caplen` bytes are at `data` and whose length on the wire was
  // `wirelen`.
  bool matches(const uint8_t *data, uint32_t caplen, uint32_t wirelen) const;
  bool matches(const uint8_t *data, uint32_t len) const { return matches(data, len, len); }

  const struct bpf_insn *insns() const { return insns_; }
  size_t insn_count() const { return insn_count_; }
  const std::string &expression() const { return expr_; }
  LinkType link_type() const { return link_; }

private:
  PcapFilter() = default;
  void release();

  struct bpf_insn *insns_ = nullptr;  // malloc'ed, a copy of libpcap's program
  size_t insn_count_ = 0;
  std::string expr_;
  LinkType link_ = LinkType::Ethernet;
};

// The DLT_* value pcap_open_dead() takes for a link type (LINKTYPE_RAW and
// both raw-IP DLTs map to this system's DLT_RAW).
int pcap_dlt_for(LinkType link);

// Where an expression is wrong, for diagnostics: a message (lower case, no
// trailing period) and the bytes of `expr` it is about.
struct FilterError {
  std::string message;
  int offset = 0;  // byte offset in the expression; == size() for "at the end"
  int length = 0;  // bytes from offset; 0 at the end
};

// nullopt when libpcap compiles `expr` for Ethernet (acceptance is exactly
// libpcap's, within the bound on terms). Otherwise the problem, located by a
// recognizer of the pcap-filter grammar; what it cannot place is reported on
// the whole expression. Too many terms: from the first one beyond the bound.
std::optional<FilterError> check_filter_expression(std::string_view expr);

// libpcap resolves host, port and protocol names while compiling (DNS,
// /etc/services). The fuzzer turns that off: checks then use the recognizer
// alone, which never looks a name up.
void set_filter_checks_use_libpcap(bool on);

}  // namespace sluice
