#include "engine/runtime/host_profile.hh"

#include <yaml.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

namespace sluice {

namespace {

// Walks a libyaml document; every error names file:line:column.
class ProfileReader {
 public:
  ProfileReader(const std::string &path, yaml_document_t &doc, HostProfile &out)
      : path_(path), doc_(doc), out_(out) {}

  bool read(std::string *error) {
    yaml_node_t *root = yaml_document_get_root_node(&doc_);
    if (!root) return true;  // an empty file: the defaults
    if (!expect(root, YAML_MAPPING_NODE, "a mapping of settings")) return fail(error);
    for (auto *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; ++p) {
      yaml_node_t *k = node(p->key), *v = node(p->value);
      std::string key = scalar(k);
      if (key == "name") {
        if (!expect(v, YAML_SCALAR_NODE, "a name")) return fail(error);
        out_.name = scalar(v);
      } else if (key == "memory") {
        if (!read_memory(v)) return fail(error);
      } else if (key == "eal") {
        if (!read_eal(v)) return fail(error);
      } else {
        problem(k, "unknown key '" + key + "' (known: name, memory, eal)");
        return fail(error);
      }
    }
    if (!out_.hugepages) out_.eal_args.insert(out_.eal_args.begin(), "--no-huge");
    if (out_.memory_mb) out_.eal_args.insert(out_.eal_args.end(), {"-m", std::to_string(out_.memory_mb)});
    return true;
  }

 private:
  yaml_node_t *node(int id) { return yaml_document_get_node(&doc_, id); }
  static std::string scalar(yaml_node_t *n) {
    return n && n->type == YAML_SCALAR_NODE ? std::string(reinterpret_cast<char *>(n->data.scalar.value), n->data.scalar.length)
                                            : std::string();
  }
  void problem(yaml_node_t *n, const std::string &msg) {
    msg_ = path_ + ":" + std::to_string(n->start_mark.line + 1) + ":" + std::to_string(n->start_mark.column + 1) +
           ": error: " + msg;
  }
  bool expect(yaml_node_t *n, yaml_node_type_t t, const char *what) {
    if (n->type == t) return true;
    problem(n, std::string("expected ") + what);
    return false;
  }
  bool fail(std::string *error) {
    *error = msg_;
    return false;
  }

  bool read_memory(yaml_node_t *m) {
    if (!expect(m, YAML_MAPPING_NODE, "a mapping (hugepages, mb)")) return false;
    for (auto *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; ++p) {
      yaml_node_t *k = node(p->key), *v = node(p->value);
      std::string key = scalar(k), val = scalar(v);
      if (key == "hugepages") {
        if (val == "true" || val == "yes") out_.hugepages = true;
        else if (val == "false" || val == "no") out_.hugepages = false;
        else return problem(v, "hugepages: expected true or false, not '" + val + "'"), false;
      } else if (key == "mb") {
        if (val == "auto") continue;
        char *end = nullptr;
        unsigned long n = std::strtoul(val.c_str(), &end, 10);
        if (val.empty() || *end || n < 64 || n > (1ul << 22))
          return problem(v, "mb: expected auto or megabytes (64 or more), not '" + val + "'"), false;
        out_.memory_mb = unsigned(n);
      } else {
        return problem(k, "unknown key '" + key + "' in memory (known: hugepages, mb)"), false;
      }
    }
    return true;
  }

  bool read_eal(yaml_node_t *m) {
    if (!expect(m, YAML_MAPPING_NODE, "a mapping (args)")) return false;
    for (auto *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; ++p) {
      yaml_node_t *k = node(p->key), *v = node(p->value);
      if (scalar(k) != "args") return problem(k, "unknown key '" + scalar(k) + "' in eal (known: args)"), false;
      if (!expect(v, YAML_SEQUENCE_NODE, "a list of EAL options")) return false;
      for (auto *i = v->data.sequence.items.start; i < v->data.sequence.items.top; ++i) {
        yaml_node_t *a = node(*i);
        if (!expect(a, YAML_SCALAR_NODE, "an EAL option")) return false;
        out_.eal_args.push_back(scalar(a));
      }
    }
    return true;
  }

  std::string path_;
  yaml_document_t &doc_;
  HostProfile &out_;
  std::string msg_;
};

}  // namespace

std::string default_host_profile_path() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec).parent_path();
  // the working directory, the source tree of a build (build/engine/sluice),
  // an installed share directory
  for (const fs::path &p : {fs::path("configs/laptop.yaml"), exe / "../../configs/laptop.yaml",
                            exe / "../share/sluice/configs/laptop.yaml", fs::path(SLUICE_SHARE_DIR "/configs/laptop.yaml")})
    if (fs::exists(p, ec)) return p.lexically_normal().string();
  return "";
}

bool load_host_profile(const std::string &path, HostProfile &out, std::string *error) {
  out = HostProfile{};
  std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) {
    *error = path + ": error: cannot read host profile: " + std::strerror(errno);
    return false;
  }
  yaml_parser_t parser;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_file(&parser, f.get());
  yaml_document_t doc;
  if (!yaml_parser_load(&parser, &doc)) {
    *error = path + ":" + std::to_string(parser.problem_mark.line + 1) + ":" +
             std::to_string(parser.problem_mark.column + 1) + ": error: " +
             (parser.problem ? parser.problem : "malformed YAML");
    yaml_parser_delete(&parser);
    return false;
  }
  bool ok = ProfileReader(path, doc, out).read(error);
  yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  return ok;
}

}  // namespace sluice
