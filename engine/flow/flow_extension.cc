#include "engine/flow/flow_extension.hh"

#include <deque>
#include <mutex>
#include <stdexcept>

#include "engine/flow/flow_record.hh"

namespace sluice {

namespace {

// Fields live as long as the process (a plugin is never unloaded), in a
// deque so that references handed out stay valid.
struct Registry {
  std::mutex mutex;
  std::deque<FlowExtField> fields;
  size_t used = 0;
};
Registry &registry() {
  static Registry r;
  return r;
}

bool same_def(const FlowExtFieldDef &a, const FlowExtFieldDef &b) {
  return std::string_view(a.column) == b.column && a.kind == b.kind && a.size == b.size &&
         a.enterprise == b.enterprise && a.element_id == b.element_id;
}

}  // namespace

const FlowExtField &register_flow_ext_field(const FlowExtFieldDef &def) {
  Registry &r = registry();
  std::lock_guard lock(r.mutex);
  std::string name = def.name ? def.name : "";
  for (const FlowExtField &f : r.fields)
    if (name == f.def.name) {
      if (!same_def(f.def, def))
        throw std::runtime_error("flow record field " + name + " is defined twice, differently");
      return f;
    }
  if (name.empty() || !def.column || !*def.column)
    throw std::runtime_error("flow record field: a name and a column are needed");
  bool size_ok = def.kind == FlowExtKind::Text ? def.size >= 1 && def.size <= 254
                                               : def.size == 1 || def.size == 2 || def.size == 4 || def.size == 8;
  if (!size_ok) throw std::runtime_error("flow record field " + name + ": size " + std::to_string(def.size) + " not allowed");
  if (r.used + 1 + def.size > kFlowExtBytes)
    throw std::runtime_error("flow record field " + name + " does not fit: " + std::to_string(r.used) + " of the " +
                             std::to_string(kFlowExtBytes) + " octets for fields are taken and it needs " +
                             std::to_string(1 + def.size));
  FlowExtField f{def, {uint16_t(r.used), def.size, def.kind}};
  r.used += 1 + def.size;
  return r.fields.emplace_back(f);
}

const FlowExtField *find_flow_ext_field(std::string_view name) {
  Registry &r = registry();
  std::lock_guard lock(r.mutex);
  for (const FlowExtField &f : r.fields)
    if (name == f.def.name) return &f;
  return nullptr;
}

std::string_view flow_ext_value(const FlowRecord &r, const FlowExtSlot &slot) {
  if (size_t(slot.offset) + 1 + slot.size > kFlowExtBytes) return {};
  uint8_t len = r.ext[slot.offset];
  if (len == 0 || len > slot.size) return {};
  return {reinterpret_cast<const char *>(r.ext + slot.offset + 1), len};
}

std::string flow_ext_text(const FlowRecord &r, const FlowExtField &f) {
  std::string_view v = flow_ext_value(r, f.slot);
  if (v.empty()) return {};
  if (f.slot.kind == FlowExtKind::Number) {
    uint64_t n = 0;
    for (char c : v) n = n << 8 | uint8_t(c);
    return std::to_string(n);
  }
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    auto u = uint8_t(c);
    if (u < 0x20 || u > 0x7e || c == '"' || c == '\\' || c == ',') {
      char hex[5];
      snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace sluice
