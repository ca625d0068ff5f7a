// Flow record extensions: fields that elements (built in or from plugins)
// add to flow records, beyond the fixed ones of FlowRecord.
//
// How a field gets into a record
//
// 1. An element file registers the field once (SLUICE_FLOW_FIELD below):
//    its name (an IPFIX-style information element name), its FlowLog column,
//    its kind and size, its IPFIX element id. Registration gives it a slot
//    in FlowRecord::ext, the same for every record of the process.
// 2. The element's spec names the fields it sets (ElementSpec::sets_flow_field):
//    a graph with such an element "uses" the field; its FlowTables keep it,
//    its FlowLogs write a column for it, its IPFIX exporters a template field.
// 3. On the data path the element puts a value on a packet
//    (set_packet_label(PacketAnno::labels, slot, bytes)) before the packet
//    reaches the FlowTable. The table copies the value into the packet's
//    flow; the first value a flow gets is the one it keeps (a later one is
//    ignored), through active timeouts, until the flow ends.
//
// A slot in the record is one length octet (0: no value) and then up to
// `size` octets of value. A text longer than its size is cut at the size
// (set_packet_label says so, for the element to count).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace sluice {

struct FlowRecord;

// The octets at the end of every FlowRecord for extension fields.
inline constexpr size_t kFlowExtBytes = 192;

enum class FlowExtKind : uint8_t {
  Text,    // UTF-8 or ASCII text (a host name): IPFIX string, variable length
  Number,  // an unsigned number, big-endian in `size` octets (1, 2, 4 or 8)
};

// What an element file declares.
struct FlowExtFieldDef {
  const char *name;      // "tlsServerName": IPFIX information element name, JSON key
  const char *column;    // "tls_server_name": the FlowLog CSV column
  FlowExtKind kind;
  uint8_t size;          // octets of value kept: Text at most 254, Number 1, 2, 4 or 8
  uint32_t enterprise;   // IPFIX private enterprise number; 0 for an IANA element
  uint16_t element_id;   // IPFIX information element id (without the enterprise bit)
  const char *describe;  // one sentence for `sluice elements` and docs
};

// Where a field lives in FlowRecord::ext: what the data path needs, copied
// into an element's members (so a fused loop reads it from the element,
// never from a registry).
struct FlowExtSlot {
  uint16_t offset = 0;  // of the length octet in FlowRecord::ext
  uint8_t size = 0;     // octets of value
  FlowExtKind kind = FlowExtKind::Text;
};

struct FlowExtField {
  FlowExtFieldDef def;
  FlowExtSlot slot;
};

// Registers a field: its slot follows the fields registered before. A field
// registered again with the same definition (the same plugin loaded twice)
// gets its first slot. Throws std::runtime_error for a name registered with
// another definition, a bad size, or when kFlowExtBytes is full.
const FlowExtField &register_flow_ext_field(const FlowExtFieldDef &def);
// The field of that name, or nullptr.
const FlowExtField *find_flow_ext_field(std::string_view name);

// Registers a field when the element file (or plugin) is loaded:
//   SLUICE_FLOW_FIELD(kServerName, {"tlsServerName", "tls_server_name", FlowExtKind::Text, 80, 0, 0, "..."});
// declares `const FlowExtField &kServerName`.
#define SLUICE_FLOW_FIELD(var, ...) \
  static const ::sluice::FlowExtField &var = ::sluice::register_flow_ext_field(::sluice::FlowExtFieldDef __VA_ARGS__)

// Values put on a packet for its flow (PacketAnno::labels): at most kMax,
// their octets together at most kBytes. Sources set count to 0 (and so
// empty the labels: `used` counts only while count > 0).
struct PacketLabels {
  static constexpr unsigned kMax = 4;
  static constexpr unsigned kBytes = 160;
  struct Label {
    uint16_t offset;  // the field's slot (FlowExtSlot::offset)
    uint8_t length;   // octets of value, >= 1
    uint8_t start;    // where they are in `value`
  };
  uint8_t count;  // labels set
  uint8_t used;   // octets of `value` in use
  Label label[kMax];
  uint8_t value[kBytes];
};

enum class LabelResult : uint8_t {
  Set,      // the whole value is on the packet
  Cut,      // a text longer than the field's size: its first `size` octets are
  NoRoom,   // the packet has kMax labels or kBytes octets already: nothing set
  Empty,    // a zero-length value: nothing set
};

// Puts a value for the field of `slot` on a packet. A Number is given as its
// big-endian octets (`len` == slot.size).
// Room left on a packet: labels, and octets of value. A count of 0 means
// no octets in use, whatever `used` says (sources reset only the count, and
// a buffer comes back from the pool with its last packet's labels).
inline unsigned packet_labels_free(const PacketLabels &l) { return l.count < PacketLabels::kMax ? PacketLabels::kMax - l.count : 0; }
inline size_t packet_label_octets_free(const PacketLabels &l) {
  size_t used = l.count ? l.used : 0;
  return used < PacketLabels::kBytes ? PacketLabels::kBytes - used : 0;
}

inline LabelResult set_packet_label(PacketLabels &l, const FlowExtSlot &slot, const void *data, size_t len) {
  if (len == 0) return LabelResult::Empty;
  if (l.count == 0) l.used = 0;
  bool cut = len > slot.size;
  if (cut) len = slot.size;
  if (l.count >= PacketLabels::kMax || l.used + len > PacketLabels::kBytes) return LabelResult::NoRoom;
  PacketLabels::Label &lb = l.label[l.count++];
  lb.offset = slot.offset;
  lb.length = uint8_t(len);
  lb.start = l.used;
  std::memcpy(l.value + l.used, data, len);
  l.used = uint8_t(l.used + len);
  return cut ? LabelResult::Cut : LabelResult::Set;
}

// Copies the labels into a flow's extension octets `ext` (ext_bytes of
// them): a field that already has a value keeps it.
inline void apply_packet_labels(const PacketLabels &l, uint8_t *ext, size_t ext_bytes) {
  for (unsigned i = 0; i < l.count && i < PacketLabels::kMax; ++i) {
    const PacketLabels::Label &lb = l.label[i];
    if (size_t(lb.offset) + 1 + lb.length > ext_bytes || size_t(lb.start) + lb.length > PacketLabels::kBytes ||
        lb.length == 0 || ext[lb.offset] != 0)
      continue;
    ext[lb.offset] = lb.length;
    std::memcpy(ext + lb.offset + 1, l.value + lb.start, lb.length);
  }
}

// A record's value of a field: empty when the flow got none.
std::string_view flow_ext_value(const FlowRecord &r, const FlowExtSlot &slot);
// The value as text: a Text field as it is, with every octet that is not
// printable ASCII (and '"', '\\', ',') written as \xHH, so that it is safe in
// CSV and JSON; a Number field in decimal; "" when unset.
std::string flow_ext_text(const FlowRecord &r, const FlowExtField &f);

}  // namespace sluice
