// Connections: ports by number or name, through compound inputs and
// outputs to the element ports behind them, stream types checked.
#include "dsl/expander.hh"

namespace sluice::expansion {

std::string Expander::describe(const NodeRef &n) const {
  if (n.kind == NodeRef::Element) return "'" + g_.elements[n.index].name + "' (" + g_.elements[n.index].spec->name + ")";
  if (n.kind == NodeRef::Compound) return "'" + compounds_[n.index]->name + "' (" + compounds_[n.index]->class_name + ")";
  return "?";
}

bool Expander::port_index(const NodeRef &n, const ast::PortRef &p, bool output, int &index) {
  index = p.present ? p.index : 0;
  if (!p.present || !p.named) return true;
  if (n.kind != NodeRef::Element) {
    diags_.error(p.range, "ports of " + std::string(n.kind == NodeRef::Compound ? "compound " + describe(n) : "'input' and 'output'") + " are numbered, not named");
    return false;
  }
  const ElementSpec &spec = *g_.elements[n.index].spec;
  index = output ? spec.output_index(p.name) : spec.input_index(p.name);
  if (index >= 0) return true;
  std::vector<std::string> names;
  for (auto &ps : output ? spec.outputs : spec.inputs) names.push_back(ps.name);
  std::string m = closest_match(p.name, names);
  std::string list;
  for (auto &nm : names) list += (list.empty() ? "" : ", ") + nm;
  diags_.error(p.range, spec.name + " has no " + (output ? "output" : "input") + " named '" + p.name + "'",
               m.empty() ? (list.empty() ? spec.name + " has no " + (output ? "outputs" : "inputs") : "its " + std::string(output ? "outputs" : "inputs") + ": " + list)
                         : "did you mean '" + m + "'?");
  return false;
}

std::vector<PortEnd> Expander::ends_of(const NodeRef &n, int port, bool output, SourceRange where) {
  const char *side = output ? "output" : "input";
  size_t count = 0;
  if (n.kind == NodeRef::Element) {
    const ElementSpec &spec = *g_.elements[n.index].spec;
    if (output ? spec.output_port(port) : spec.input_port(port)) return {{n.index, port}};
    count = output ? spec.outputs.size() : spec.inputs.size();
  } else if (n.kind == NodeRef::Compound) {
    auto &c = *compounds_[n.index];
    auto &ports = output ? c.outs : c.ins;
    if (port < static_cast<int>(ports.size())) return ports[port];
    if (c.broken) return {};  // its ports are incomplete: reported inside
    count = ports.size();
  } else {
    return {};
  }
  diags_.error(where, std::string(side) + " port " + std::to_string(port) + " is out of range: " + describe(n) +
                          " has " + (count == 0 ? std::string("no ") + side + "s"
                                                : std::to_string(count) + " " + side + (count == 1 ? "" : "s")));
  return {};
}

void Expander::taint(const NodeRef &n) {
  if (n.kind == NodeRef::Element) incomplete_.insert(n.index);
  if (n.kind == NodeRef::Compound)
    for (auto *side : {&compounds_[n.index]->ins, &compounds_[n.index]->outs})
      for (auto &ends : *side)
        for (auto &e : ends) incomplete_.insert(e.element);
}

void Expander::connect(const NodeRef &from, const ast::ElementRef &fref, const NodeRef &to, const ast::ElementRef &tref,
             SourceRange arrow, Scope &scope) {
  int before = diags_.error_count();
  connect_checked(from, fref, to, tref, arrow, scope);
  auto broken = [&](const NodeRef &n) { return n.kind == NodeRef::Compound && compounds_[n.index]->broken; };
  if (diags_.error_count() != before || from.kind == NodeRef::None || to.kind == NodeRef::None || broken(from) ||
      broken(to)) {
    taint(from);
    taint(to);
    if (scope.compound && (from.kind == NodeRef::Input || to.kind == NodeRef::Output || from.kind == NodeRef::None ||
                           to.kind == NodeRef::None))
      scope.compound->broken = true;
  }
}

void Expander::connect_checked(const NodeRef &from, const ast::ElementRef &fref, const NodeRef &to, const ast::ElementRef &tref,
                     SourceRange arrow, Scope &scope) {
  if (from.kind == NodeRef::None || to.kind == NodeRef::None) return;  // already reported
  int fp, tp;
  if (!port_index(from, fref.out_port, true, fp) || !port_index(to, tref.in_port, false, tp)) return;
  SourceRange fwhere = fref.out_port.present ? fref.out_port.range : fref.range;
  SourceRange twhere = tref.in_port.present ? tref.in_port.range : tref.range;
  if (from.kind == NodeRef::Output) {
    diags_.error(fref.name_range, "'output' can only be connected to, not from");
    return;
  }
  if (to.kind == NodeRef::Input) {
    diags_.error(tref.name_range, "'input' can only be connected from, not to");
    return;
  }
  if (from.kind == NodeRef::Input && to.kind == NodeRef::Output) {
    diags_.error(arrow, "connecting 'input' straight to 'output' is not supported; put an element between them");
    return;
  }
  CompoundInstance *c = scope.compound;
  if (from.kind == NodeRef::Input) {
    if (c->ins.size() <= static_cast<size_t>(fp)) c->ins.resize(fp + 1);
    auto ends = ends_of(to, tp, false, twhere);
    c->ins[fp].insert(c->ins[fp].end(), ends.begin(), ends.end());
    return;
  }
  if (to.kind == NodeRef::Output) {
    if (c->outs.size() <= static_cast<size_t>(tp)) c->outs.resize(tp + 1);
    auto ends = ends_of(from, fp, true, fwhere);
    c->outs[tp].insert(c->outs[tp].end(), ends.begin(), ends.end());
    return;
  }
  std::vector<PortEnd> sources = ends_of(from, fp, true, fwhere), sinks = ends_of(to, tp, false, twhere);
  for (const PortEnd &a : sources)
    for (const PortEnd &b : sinks) {
      const PortSpec *op = g_.elements[a.element].spec->output_port(a.port);
      const PortSpec *ip = g_.elements[b.element].spec->input_port(b.port);
      if (op->type != ip->type) {
        diags_.error(arrow, std::string("stream type mismatch: ") + stream_type_name(op->type) + " output " +
                                std::to_string(a.port) + " of '" + g_.elements[a.element].name + "' cannot feed " +
                                stream_type_name(ip->type) + " input " + std::to_string(b.port) + " of '" +
                                g_.elements[b.element].name + "'",
                     op->type == StreamType::Packets ? "a FlowTable turns packets into flows" : std::string());
        continue;
      }
      g_.connections.push_back(Connection{a.element, a.port, b.element, b.port, arrow});
    }
}

}  // namespace sluice::expansion
