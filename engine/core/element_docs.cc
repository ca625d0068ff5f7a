#include "engine/core/element_docs.hh"

#include "engine/flow/flow_extension.hh"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <sstream>

namespace sluice {

namespace {

constexpr size_t kWidth = 80;  // terminal help is wrapped to this many columns

// The library's groups in pipeline order; a plugin's own groups come after them.
constexpr const char *kGroupOrder[] = {"source", "packet", "flow", "export"};

int group_rank(const std::string &g) {
  for (size_t i = 0; i < std::size(kGroupOrder); ++i)
    if (g == kGroupOrder[i]) return static_cast<int>(i);
  return static_cast<int>(std::size(kGroupOrder));
}

const char *group_title(const std::string &g) {
  if (g == "source") return "Sources";
  if (g == "packet") return "Packet elements";
  if (g == "flow") return "Flow elements";
  if (g == "export") return "Exporters";
  return g.c_str();
}

// Elements grouped in pipeline order, by name within a group.
std::vector<std::vector<const ElementSpec *>> by_group() {
  std::vector<const ElementSpec *> all = ElementRegistry::global().all();
  std::stable_sort(all.begin(), all.end(), [](const ElementSpec *a, const ElementSpec *b) {
    int ra = group_rank(a->group), rb = group_rank(b->group);
    return ra != rb ? ra < rb : a->group < b->group;
  });
  std::vector<std::vector<const ElementSpec *>> groups;
  for (const ElementSpec *s : all) {
    if (groups.empty() || groups.back().front()->group != s->group) groups.emplace_back();
    groups.back().push_back(s);
  }
  return groups;
}

std::vector<std::string> paragraphs(const std::string &text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 2;
  }
  return out;
}

// Writes `tokens` separated by `glue` and a space, starting at column `col`;
// a token that would pass kWidth starts a new line at column `indent`.
std::vector<std::string> words(const std::string &text);

// The tokens after one another, `glue` between two, wrapped at kWidth
// (between words, a token longer than a line too), continuing at `indent`.
void flow(std::ostream &os, const std::vector<std::string> &tokens, const std::string &glue, size_t col, size_t indent) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<std::string> ws = words(tokens[i]);
    for (size_t k = 0; k < ws.size(); ++k) {
      std::string w = ws[k] + (k + 1 == ws.size() && i + 1 < tokens.size() ? glue : "");
      if (i > 0 || k > 0) {
        if (col + 1 + w.size() > kWidth) {
          os << "\n" << std::string(indent, ' ');
          col = indent;
        } else {
          os << ' ';
          ++col;
        }
      }
      os << w;
      col += w.size();
    }
  }
  os << "\n";
}

std::vector<std::string> words(const std::string &text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Word-wraps each paragraph of `text` at `indent`, a blank line between paragraphs.
void wrap(std::ostream &os, const std::string &text, size_t indent) {
  bool first = true;
  for (const std::string &para : paragraphs(text)) {
    os << (first ? "" : "\n") << std::string(indent, ' ');
    first = false;
    flow(os, words(para), "", indent, indent);
  }
}

std::string pad(const std::string &s, size_t width) { return s.size() >= width ? s : s + std::string(width - s.size(), ' '); }

std::string port_index_text(size_t i, const PortSpec &p) { return p.variadic ? std::to_string(i) + "..N" : std::to_string(i); }

std::string connection_text(const PortSpec &p) {
  return std::string(p.required ? "required" : "optional") + (p.multi ? ", many" : "");
}

std::string default_text(const ArgSpec &a) {
  if (a.required) return "required";
  return a.default_text.empty() ? "no default" : "default " + a.default_text;
}

// Which arguments may be given without their keyword; "" if none.
std::string positional_note(const ElementSpec &spec) {
  std::vector<std::string> pos;
  for (const ArgSpec &a : spec.args)
    if (a.positional) pos.push_back("`" + a.name + "`");
  if (pos.empty()) return "";
  if (pos.size() == 1) return pos[0] + " may be given without its keyword.";
  std::string list;
  for (const auto &p : pos) list += (list.empty() ? "" : ", ") + p;
  return "These arguments may be given without their keyword, in this order: " + list + ".";
}

void print_ports(std::ostream &os, const char *title, const std::vector<PortSpec> &ports) {
  if (ports.empty()) {
    os << "\n" << title << ": none\n";
    return;
  }
  os << "\n" << title << ":\n";
  size_t w = 0;
  for (const PortSpec &p : ports) w = std::max(w, p.name.size());
  for (size_t i = 0; i < ports.size(); ++i) {
    const PortSpec &p = ports[i];
    os << "  " << pad(port_index_text(i, p), 5) << pad(p.name, w) << "  " << stream_type_name(p.type) << ", "
       << connection_text(p) << "\n";
    if (!p.doc.empty()) wrap(os, p.doc, 6);
  }
}

// ---- Markdown ----

// A table cell: one line, pipes escaped, paragraphs kept apart.
std::string cell(const std::string &text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "\n\n") == 0) {
      out += "<br><br>";
      ++i;
    } else if (text[i] == '\n') {
      out += ' ';
    } else if (text[i] == '|') {
      out += "\\|";
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string code(const std::string &s) { return "`" + s + "`"; }

// GitHub's heading anchors: lower case, spaces to dashes, most punctuation dropped.
std::string anchor(const std::string &title) {
  std::string a;
  for (char c : title) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') a += static_cast<char>(std::tolower(c));
    else if (c == ' ') a += '-';
  }
  return a;
}

void markdown_ports(std::ostream &os, const char *title, const std::vector<PortSpec> &ports) {
  if (ports.empty()) {
    os << "**" << title << ":** none\n\n";
    return;
  }
  os << "**" << title << "**\n\n"
     << "| port | name | stream | connection | description |\n"
     << "|---|---|---|---|---|\n";
  for (size_t i = 0; i < ports.size(); ++i) {
    const PortSpec &p = ports[i];
    os << "| " << port_index_text(i, p) << " | " << code(p.name) << " | " << stream_type_name(p.type) << " | "
       << connection_text(p) << " | " << cell(p.doc) << " |\n";
  }
  os << "\n";
}

void markdown_args(std::ostream &os, const ElementSpec &spec) {
  if (spec.args.empty()) {
    os << "**Arguments:** none\n\n";
    return;
  }
  os << "**Arguments**\n\n"
     << "| argument | type | default | range | description |\n"
     << "|---|---|---|---|---|\n";
  for (const ArgSpec &a : spec.args) {
    std::string def = a.required ? "*required*" : a.default_text.empty() ? "*none*" : code(a.default_text);
    std::string range = a.range_text();
    os << "| " << code(a.name) << (a.positional ? " (positional)" : "") << " | " << cell(a.type_text()) << " | "
       << cell(def) << " | " << (range.empty() ? "" : code(range)) << " | " << cell(a.doc)
       << (a.reloadable ? " *Changed by a hot reload without losing state.*" : "") << " |\n";
  }
  os << "\n";
  std::string pos = positional_note(spec);
  if (!pos.empty()) os << pos << "\n\n";
}

std::string common_handler_names() {
  std::string names;
  for (const HandlerSpec &h : common_handlers()) names += (names.empty() ? "" : ", ") + h.name;
  return names;
}

void print_handlers(std::ostream &os, const ElementSpec &spec) {
  bool writable = std::any_of(spec.handlers.begin(), spec.handlers.end(), [](const HandlerSpec &h) { return h.writable; });
  os << "\nHandlers (`sluice ctl read ELEMENT.HANDLER`" << (writable ? ", `write` where marked" : "") << "):\n";
  size_t w = 0;
  for (const HandlerSpec &h : spec.handlers) w = std::max(w, h.name.size());
  for (const HandlerSpec &h : spec.handlers) {
    os << "  " << pad(h.name, w) << "  " << (h.writable ? "read, write  " : "read         ");
    flow(os, words(h.doc), "", w + 17, w + 17);
  }
  os << "  ";
  flow(os, words(std::string(spec.handlers.empty() ? "" : "and ") + "the counters every element has: " +
                 common_handler_names()),
       "", 2, 2);
}

void markdown_handlers(std::ostream &os, const ElementSpec &spec) {
  os << "**Handlers** (`sluice ctl read ELEMENT.HANDLER`";
  if (spec.handlers.empty()) {
    os << "): the counters every element has (" << common_handler_names() << ").\n\n";
    return;
  }
  bool writable = std::any_of(spec.handlers.begin(), spec.handlers.end(), [](const HandlerSpec &h) { return h.writable; });
  os << (writable ? ", `write` where marked" : "") << "), besides the counters every element has ("
     << common_handler_names() << "):\n\n"
     << "| handler | access | description |\n"
     << "|---|---|---|\n";
  for (const HandlerSpec &h : spec.handlers)
    os << "| " << code(h.name) << " | " << (h.writable ? "read, write" : "read") << " | " << cell(h.doc) << " |\n";
  os << "\n";
}

// The metrics the element reports beyond the counters every element keeps.
std::string metric_labels(const MetricSpec &m) {
  std::string labels = "lane, element";
  for (const std::string &l : m.labels) labels += ", " + l;
  return labels;
}

void print_metrics(std::ostream &os, const ElementSpec &spec) {
  if (spec.metrics.empty()) return;
  os << "\nMetrics (at `--metrics`, with the prefix sluice_):\n";
  for (const MetricSpec &m : spec.metrics) {
    os << "  " << m.name << "  " << metric_kind_name(m.kind) << "; labels " << metric_labels(m) << "\n      ";
    flow(os, words(m.help), "", 6, 6);
  }
}

void markdown_metrics(std::ostream &os, const ElementSpec &spec) {
  if (spec.metrics.empty()) return;
  os << "**Metrics** (at `--metrics`), besides the counters every element has (docs/control.md):\n\n"
     << "| metric | type | labels | description |\n"
     << "|---|---|---|---|\n";
  for (const MetricSpec &m : spec.metrics)
    os << "| " << code("sluice_" + m.name) << " | " << metric_kind_name(m.kind) << " | " << metric_labels(m) << " | "
       << cell(m.help) << " |\n";
  os << "\n";
}

// The flow record fields the element adds (flow_extension.hh), as the
// registry has them.
std::string field_kind(const FlowExtField &f) {
  return f.def.kind == FlowExtKind::Text ? "text, up to " + std::to_string(f.def.size) + " octets"
                                         : "unsigned" + std::to_string(8 * f.def.size);
}
std::string field_ipfix(const FlowExtField &f) {
  return "IPFIX " + std::to_string(f.def.element_id) +
         (f.def.enterprise ? " (enterprise " + std::to_string(f.def.enterprise) + ")" : " (IANA)");
}

void print_flow_fields(std::ostream &os, const ElementSpec &spec) {
  if (spec.flow_fields.empty()) return;
  os << "\nFlow record fields it adds (FlowLog column; IPFIX element):\n";
  for (const std::string &name : spec.flow_fields) {
    const FlowExtField *f = find_flow_ext_field(name);
    if (!f) continue;
    os << "  " << name << "  ";
    flow(os, words(std::string(f->def.column) + "; " + field_kind(*f) + "; " + field_ipfix(*f) + ". " + f->def.describe),
         "", 4, 4);
  }
}

void markdown_flow_fields(std::ostream &os, const ElementSpec &spec) {
  if (spec.flow_fields.empty()) return;
  os << "**Flow record fields** it adds:\n\n"
     << "| field | FlowLog column | type | IPFIX | description |\n"
     << "|---|---|---|---|---|\n";
  for (const std::string &name : spec.flow_fields)
    if (const FlowExtField *f = find_flow_ext_field(name))
      os << "| " << code(name) << " | " << code(f->def.column) << " | " << field_kind(*f) << " | " << field_ipfix(*f)
         << " | " << cell(f->def.describe) << " |\n";
  os << "\n";
}

}  // namespace

void print_element_list(std::ostream &os) {
  size_t name_w = 0, group_w = 0;
  for (const ElementSpec *s : ElementRegistry::global().all()) {
    name_w = std::max(name_w, s->name.size());
    group_w = std::max(group_w, s->group.size());
  }
  for (const auto &group : by_group())
    for (const ElementSpec *s : group) os << pad(s->name, name_w + 2) << pad(s->group, group_w + 2) << s->summary << "\n";
  os << "\n`sluice elements NAME` describes one element; docs/elements.md has them all.\n";
}

void print_element_help(std::ostream &os, const ElementSpec &spec) {
  flow(os, words(spec.name + " (" + spec.group + "): " + spec.summary), "", 0, 2);
  os << "\n";
  wrap(os, spec.doc, 2);
  print_ports(os, "Inputs", spec.inputs);
  print_ports(os, "Outputs", spec.outputs);
  print_flow_fields(os, spec);
  if (spec.args.empty()) {
    os << "\nArguments: none\n";
    print_handlers(os, spec);
    print_metrics(os, spec);
    return;
  }
  os << "\nArguments:\n";
  size_t w = 0;
  for (const ArgSpec &a : spec.args) w = std::max(w, a.name.size());
  for (const ArgSpec &a : spec.args) {
    std::vector<std::string> fields = {a.type_text(), default_text(a)};
    if (!a.range_text().empty()) fields.push_back("range " + a.range_text());
    if (a.positional) fields.push_back("positional");
    if (a.reloadable) fields.push_back("reloads in place");
    os << "  " << pad(a.name, w) << "  ";
    flow(os, fields, ";", w + 4, w + 4);
    if (!a.doc.empty()) wrap(os, a.doc, 6);
  }
  std::string pos = positional_note(spec);
  if (!pos.empty()) {
    os << "\n";
    wrap(os, pos, 0);
  }
  print_handlers(os, spec);
  print_metrics(os, spec);
}

void write_elements_markdown(std::ostream &out) {
  // built whole so that the file ends in exactly one newline
  std::ostringstream os;
  auto groups = by_group();
  os << "# Element reference\n\n"
     << "<!-- Generated by `sluice elements --markdown`: do not edit by hand. -->\n\n"
     << "This file is generated from the element specs in `elements/` by `sluice elements --markdown`. "
        "Do not edit it by hand: change the spec, then regenerate it with\n"
        "`build/engine/sluice elements --markdown > docs/elements.md`.\n\n"
     << "The same text is printed by `sluice elements NAME`.\n\n"
     << "**Units.** Counts take binary suffixes `K M G` (`64K` = 65536); byte sizes `B KB MB GB` (binary; a "
        "bare number is bytes); durations need one of `ns us ms s min h d`; rates are decimal, "
        "`bps Kbps Mbps Gbps Tbps` or `pps Kpps Mpps Gpps`; fractions are `1/N` or a decimal.\n\n"
     << "**Ports.** A port carries a `packets` or a `flows` stream, and the two never connect. A *required* "
        "port must be connected. A port marked *many* takes several connections: an input merges them, an "
        "output sends every item to each. A port numbered `0..N` repeats: `t[0]`, `t[1]`, and so on.\n\n"
     << "## Contents\n\n";
  for (const auto &g : groups) {
    os << "- [" << group_title(g.front()->group) << "](#" << anchor(group_title(g.front()->group)) << "):";
    for (size_t i = 0; i < g.size(); ++i)
      os << (i ? ", " : " ") << "[" << g[i]->name << "](#" << anchor(g[i]->name) << ")";
    os << "\n";
  }
  os << "\n";
  for (const auto &g : groups) {
    os << "## " << group_title(g.front()->group) << "\n\n";
    for (const ElementSpec *s : g) {
      os << "### " << s->name << "\n\n" << "*" << s->summary << "*\n\n";
      for (const std::string &p : paragraphs(s->doc)) os << p << "\n\n";
      markdown_ports(os, "Inputs", s->inputs);
      markdown_ports(os, "Outputs", s->outputs);
      markdown_flow_fields(os, *s);
      markdown_args(os, *s);
      markdown_handlers(os, *s);
      markdown_metrics(os, *s);
    }
  }
  std::string text = os.str();
  text.erase(text.find_last_not_of('\n') + 1);
  out << text << "\n";
}

}  // namespace sluice
