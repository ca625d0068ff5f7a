#include "engine/packet/pcap_filter.hh"

#include <arpa/inet.h>
#include <pcap/pcap.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "engine/packet/filter_diagnosis.hh"

namespace sluice {

namespace {

// libpcap's messages, in the style of ours: "can't parse filter expression:
// syntax error" -> "syntax error"; lower-case start, no trailing period,
// single quotes.
std::string clean_pcap_message(std::string m) {
  for (const char *prefix : {"can't parse filter expression: "})
    if (m.rfind(prefix, 0) == 0) m.erase(0, std::strlen(prefix));
  if (m == "syntax error in filter expression") m = "syntax error";
  while (!m.empty() && (m.back() == '.' || m.back() == '\n' || m.back() == ' ')) m.pop_back();
  for (char &c : m)
    if (c == '"') c = '\'';
  // "Illegal ..." -> "illegal ...", but "VLAN tag ..." stays
  if (m.size() >= 2 && std::isupper(static_cast<unsigned char>(m[0])) &&
      !std::isupper(static_cast<unsigned char>(m[1])))
    m[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(m[0])));
  return m;
}


// Programs compiled lately, by expression and link type. A reload checks its
// file, which compiles every Filter (for Ethernet), before it stops the
// lanes; the instances it prepares while they stand still find their
// program here rather than wait for libpcap again. Names in an expression
// (`host example.com`) are looked up again once an entry is a minute old.
class RecentPrograms {
 public:
  std::optional<std::vector<bpf_insn>> find(const std::string &expr, int dlt) {
    std::lock_guard lock(mutex_);
    auto now = std::chrono::steady_clock::now();
    std::erase_if(entries_, [&](const Entry &e) { return now - e.made > kLifetime; });
    for (const Entry &e : entries_)
      if (e.dlt == dlt && e.expr == expr) return e.insns;
    return std::nullopt;
  }
  void add(const std::string &expr, int dlt, const bpf_insn *insns, size_t count) {
    std::lock_guard lock(mutex_);
    if (entries_.size() == kEntries) entries_.pop_front();
    entries_.push_back({expr, dlt, std::vector<bpf_insn>(insns, insns + count), std::chrono::steady_clock::now()});
  }

 private:
  static constexpr size_t kEntries = 16;
  static constexpr std::chrono::seconds kLifetime{60};
  struct Entry {
    std::string expr;
    int dlt;
    std::vector<bpf_insn> insns;
    std::chrono::steady_clock::time_point made;
  };
  std::mutex mutex_;
  std::deque<Entry> entries_;
};

RecentPrograms &recent_programs() {
  static RecentPrograms r;
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------
// PcapFilter

int pcap_dlt_for(LinkType link) {
  switch (link) {
    case LinkType::Raw:
    case LinkType::RawDlt12:
    case LinkType::RawDlt14:
      return DLT_RAW;  // pcap_open_dead() takes DLT_RAW, not LINKTYPE_RAW (101)
    case LinkType::Loop:
      return DLT_LOOP;
    default:
      return static_cast<int>(link);
  }
}

std::optional<PcapFilter> PcapFilter::compile(std::string_view expr, LinkType link, std::string *error) {
  std::string text(expr);
  if (text.find('\0') != std::string::npos) {
    if (error) *error = "NUL byte in the filter expression";
    return std::nullopt;
  }
  if (auto big = too_many_terms(text)) {
    if (error) *error = big->message;
    return std::nullopt;
  }
  const int dlt = pcap_dlt_for(link);
  std::vector<bpf_insn> insns;
  if (auto recent = recent_programs().find(text, dlt)) {
    insns = std::move(*recent);
  } else {
    // pcap_compile() may run on several threads at once (libpcap 1.8 on):
    // one slow expression holds up no other.
    pcap_t *p = pcap_open_dead(dlt, 65535);
    if (!p) {
      if (error) *error = "libpcap cannot open a dead handle for link type " + std::to_string(int(link));
      return std::nullopt;
    }
    struct bpf_program prog {};
    if (pcap_compile(p, &prog, text.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0) {
      if (error) *error = clean_pcap_message(pcap_geterr(p));
      pcap_close(p);
      return std::nullopt;
    }
    pcap_close(p);
    insns.assign(prog.bf_insns, prog.bf_insns + prog.bf_len);
    pcap_freecode(&prog);
    recent_programs().add(text, dlt, insns.data(), insns.size());
  }
  PcapFilter f;
  f.insns_ = static_cast<bpf_insn *>(std::malloc(std::max<size_t>(insns.size(), 1) * sizeof(bpf_insn)));
  if (!f.insns_) throw std::bad_alloc();
  std::copy(insns.begin(), insns.end(), f.insns_);
  f.insn_count_ = insns.size();
  f.expr_ = std::move(text);
  f.link_ = link;
  return f;
}

PcapFilter::PcapFilter(PcapFilter &&o) noexcept
    : insns_(o.insns_), insn_count_(o.insn_count_), expr_(std::move(o.expr_)), link_(o.link_) {
  o.insns_ = nullptr;
  o.insn_count_ = 0;
}

PcapFilter &PcapFilter::operator=(PcapFilter &&o) noexcept {
  if (this != &o) {
    release();
    insns_ = o.insns_;
    insn_count_ = o.insn_count_;
    expr_ = std::move(o.expr_);
    link_ = o.link_;
    o.insns_ = nullptr;
    o.insn_count_ = 0;
  }
  return *this;
}

PcapFilter::~PcapFilter() { release(); }

void PcapFilter::release() {
  std::free(insns_);
  insns_ = nullptr;
  insn_count_ = 0;
}

bool PcapFilter::matches(const uint8_t *data, uint32_t caplen, uint32_t wirelen) const {
  if (!insns_) return false;  // moved from
  // bpf_filter(program, packet, length on the wire, captured length)
  return bpf_filter(insns_, data, wirelen, caplen) != 0;
}

}  // namespace sluice
