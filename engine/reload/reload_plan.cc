#include "engine/reload/reload_plan.hh"

#include <map>
#include <set>

namespace sluice {

const char *reload_action_name(ReloadAction a) {
  switch (a) {
    case ReloadAction::Keep: return "keep";
    case ReloadAction::Reconfigure: return "reconfigure";
    case ReloadAction::Migrate: return "migrate";
    case ReloadAction::Remove: return "remove";
    case ReloadAction::Add: return "add";
  }
  return "?";
}

namespace {

// The arguments of an element as its first instance got them (lane 0, or
// the shared one): values after defaults and variables, as canonical text.
std::vector<std::pair<const ArgSpec *, std::string>> resolved_args(const LaneGraph &lg, int element) {
  std::vector<std::pair<const ArgSpec *, std::string>> out;
  for (const Node &n : lg.nodes) {
    if (n.element != element) continue;
    for (const ResolvedArg &a : n.args) out.emplace_back(a.spec, a.value.to_string());
    break;
  }
  return out;
}

struct ArgChange {
  std::string name, before, after;
  bool reloadable;
};

std::vector<ArgChange> changed_args(const LaneGraph &running, int old_e, const LaneGraph &next, int new_e) {
  auto before = resolved_args(running, old_e), after = resolved_args(next, new_e);
  std::map<std::string, std::string> old_values;
  for (auto &[spec, text] : before) old_values[spec->name] = text;
  std::vector<ArgChange> out;
  for (auto &[spec, text] : after) {
    auto it = old_values.find(spec->name);
    std::string was = it == old_values.end() ? "(none)" : it->second;
    if (was != text) out.push_back({spec->name, was, text, spec->reloadable});
  }
  return out;
}

std::string describe(const std::vector<ArgChange> &changes) {
  std::string s;
  for (const ArgChange &c : changes) {
    if (!s.empty()) s += ", ";
    s += c.name + " " + c.before + " -> " + c.after;
  }
  return s;
}

std::string connection_text(const ElementGraph &g, const Connection &c) {
  return g.elements[c.from].name + "[" + std::to_string(c.from_port) + "] -> [" + std::to_string(c.to_port) + "]" +
         g.elements[c.to].name;
}

}  // namespace

unsigned ReloadPlan::count(ReloadAction a) const {
  unsigned n = 0;
  for (const ReloadStep &s : steps) n += s.action == a;
  return n;
}

bool ReloadPlan::changes_nothing() const {
  return count(ReloadAction::Keep) == steps.size() && connected.empty() && disconnected.empty();
}

const ReloadStep *ReloadPlan::find(const std::string &element) const {
  for (const ReloadStep &s : steps)
    if (s.element == element) return &s;
  return nullptr;
}

std::string ReloadPlan::text() const {
  std::string s = "reload plan: " + std::to_string(count(ReloadAction::Keep)) + " kept, " +
                  std::to_string(count(ReloadAction::Reconfigure)) + " reconfigured, " +
                  std::to_string(count(ReloadAction::Migrate)) + " migrated, " +
                  std::to_string(count(ReloadAction::Remove)) + " removed, " +
                  std::to_string(count(ReloadAction::Add)) + " added; " + std::to_string(connected.size()) +
                  " connections added, " + std::to_string(disconnected.size()) + " removed\n";
  size_t width = 8;
  for (const ReloadStep &st : steps) width = std::max(width, st.element.size());
  for (const ReloadStep &st : steps) {
    std::string action = reload_action_name(st.action);
    s += "  " + action + std::string(12 - action.size(), ' ') + st.element +
         std::string(width + 2 - st.element.size(), ' ') + st.class_name;
    if (!st.reason.empty()) s += ": " + st.reason;
    s += "\n";
  }
  for (const std::string &c : connected) s += "  connect     " + c + "\n";
  for (const std::string &c : disconnected) s += "  disconnect  " + c + "\n";
  return s;
}

bool plan_reload(const LaneGraph &running, const LaneGraph &next, Diagnostics &diags, ReloadPlan &out) {
  const ElementGraph &og = *running.graph, &ng = *next.graph;
  out = {};
  bool ok = true;
  auto refuse = [&](SourceRange where, const std::string &what) {
    diags.error(where, what, "a running probe keeps its sources and lanes; restart it to change them");
    ok = false;
  };

  // Where a refusal about something missing points: the new graph's first
  // element, or the start of its file when it has none (an empty file, a
  // file an editor is still writing).
  SourceRange start_of_new{{0, 0}, {0, 0}};
  if (!ng.elements.empty()) start_of_new = ng.elements.front().range;
  if (next.lanes.empty()) {
    refuse(start_of_new, "the new graph has no source, the running one " + std::to_string(running.lanes.size()) +
                             " lane" + (running.lanes.size() == 1 ? "" : "s"));
    return false;
  }

  std::vector<bool> matched(ng.elements.size(), false);
  for (size_t oi = 0; oi < og.elements.size(); ++oi) {
    const Element &oe = og.elements[oi];
    ReloadStep st;
    st.element = oe.name;
    st.class_name = oe.spec->name;
    st.old_element = int(oi);
    int ni = ng.find(oe.name);
    bool same_class = ni >= 0 && ng.elements[ni].spec == oe.spec;
    if (oe.spec->is_source()) {
      if (!same_class) {  // pointed at where the new graph's elements begin
        refuse(ni >= 0 ? ng.elements[ni].range : start_of_new,
               "source '" + oe.name + "' (" + oe.spec->name + ") is missing from the new graph");
        continue;
      }
      matched[ni] = true;
      auto changes = changed_args(running, int(oi), next, ni);
      if (!changes.empty()) refuse(ng.elements[ni].range, "source '" + oe.name + "' changed: " + describe(changes));
      st.new_element = ni;
      out.steps.push_back(st);
      continue;
    }
    if (!same_class) {  // gone, or the name now holds another class: remove (and add below)
      st.action = ReloadAction::Remove;
      st.reason = oe.spec->flags & kStateful ? "its flows are exported with reason forced end" : "";
      out.steps.push_back(st);
      continue;
    }
    matched[ni] = true;
    st.new_element = ni;
    const Element &ne = ng.elements[ni];
    auto changes = changed_args(running, int(oi), next, ni);
    bool all_live = true;
    for (const ArgChange &c : changes) all_live = all_live && c.reloadable;
    if (ne.shared != oe.shared) {
      st.action = ReloadAction::Migrate;
      st.reason = std::string(ne.shared ? "becomes shared" : "no longer shared") +
                  (oe.spec->flags & kStateful ? ": its state moves into the new instance" : ": a new instance");
    } else if (changes.empty()) {
      st.action = ReloadAction::Keep;
    } else if (all_live) {
      st.action = ReloadAction::Reconfigure;
      st.reason = describe(changes);
    } else {
      st.action = ReloadAction::Migrate;
      st.reason = describe(changes) +
                  (oe.spec->flags & kStateful ? ": a new instance; its state moves into it" : ": a new instance");
    }
    out.steps.push_back(st);
  }
  for (size_t ni = 0; ni < ng.elements.size(); ++ni) {
    if (matched[ni]) continue;
    const Element &ne = ng.elements[ni];
    if (ne.spec->is_source()) {
      refuse(ne.range, "source '" + ne.name + "' is new");
      continue;
    }
    ReloadStep st;
    st.action = ReloadAction::Add;
    st.element = ne.name;
    st.class_name = ne.spec->name;
    st.new_element = int(ni);
    out.steps.push_back(st);
  }
  if (ok && running.lanes.size() != next.lanes.size())
    refuse(ng.elements[size_t(next.lanes[0].source)].range, "the new graph has " + std::to_string(next.lanes.size()) +
                                                               " lanes, the running one " +
                                                               std::to_string(running.lanes.size()));

  std::set<std::string> before, after;
  for (const Connection &c : og.connections) before.insert(connection_text(og, c));
  for (const Connection &c : ng.connections) after.insert(connection_text(ng, c));
  for (const std::string &c : after)
    if (!before.count(c)) out.connected.push_back(c);
  for (const std::string &c : before)
    if (!after.count(c)) out.disconnected.push_back(c);
  return ok;
}

}  // namespace sluice
