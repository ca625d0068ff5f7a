// `require`: the .pipe files a file includes (each once) and the plugins it
// loads (checked: ABI, names, ownership as root).
#include <dlfcn.h>

#include "dsl/expander.hh"
#include "dsl/lexer.hh"

namespace sluice::expansion {

// Parses one file of `sm` into `out`; false on syntax errors (reported).
bool parse_file(SourceManager &sm, int file, Diagnostics &diags, ast::File &out) {
  Lexer lexer(sm, file, diags);
  out.file_index = file;
  PipeParser parser(lexer, diags, out);
  int before = diags.error_count();
  parser.parse();
  return diags.error_count() == before;
}

void Expander::collect_requires(ast::File &file, std::vector<ast::Statement> &out) {
  for (auto &st : file.statements) {
    if (st.kind != ast::Statement::Kind::Require) {
      out.push_back(std::move(st));
      continue;
    }
    const std::string &req = st.require.path;
    if (!opts_.allow_require) {
      diags_.error(st.require.range, "'require' is disabled here");
      continue;
    }
    fs::path base = fs::path(sm_.file(file.file_index).name).parent_path();
    fs::path p = fs::path(req).is_absolute() ? fs::path(req) : base / req;
    std::error_code ec;
    // A plugin named without a directory that is not beside the file: the
    // installed plugin directory's (the sluice-plugins package).
    if (!fs::exists(p, ec) && req.find('/') == std::string::npos && fs::path(req).extension() == ".so")
      if (fs::path installed = installed_plugin_dir() / req; fs::exists(installed, ec)) p = installed;
    if (!fs::exists(p, ec)) {
      diags_.error(st.require.range, "cannot find required file '" + req + "'",
                   "paths are relative to the file that requires them (" + (base.empty() ? std::string(".") : base.string()) + ")");
      continue;
    }
    if (!fs::is_regular_file(p, ec)) {
      diags_.error(st.require.range, "'" + req + "' is not a regular file");
      continue;
    }
    // what was checked is what is opened: the file's absolute path, links resolved
    fs::path canon = fs::canonical(p, ec);
    if (ec) {
      diags_.error(st.require.range, "cannot read required file '" + req + "': " + ec.message());
      continue;
    }
    if (p.extension() == ".so") {
      load_plugin(canon, st.require.range);
      continue;
    }
    if (!required_.insert(canon.string()).second) continue;  // already included
    std::string text, error;
    if (!read_user_file(p.string(), kMaxPipeFileBytes, text, &error)) {
      diags_.error(st.require.range, error);
      continue;
    }
    int f = sm_.add(p.string(), std::move(text));
    ast::File sub;
    if (!parse_file(sm_, f, diags_, sub)) ++syntax_errors_;
    collect_requires(sub, out);
  }
}

fs::path Expander::installed_plugin_dir() {
#ifdef SLUICE_PLUGIN_DIR_FROM_BIN
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) return (exe.parent_path() / SLUICE_PLUGIN_DIR_FROM_BIN).lexically_normal();
#endif
  return {};
}

void Expander::load_plugin(const fs::path &p, SourceRange where) {
  if (std::string why = untrusted_as_root(p.string()); !why.empty()) {
    diags_.error(where, "refusing to load plugin '" + p.string() + "' as root: " + why,
                 "a plugin runs as this process: it and its directories must be root's and writable only by root");
    return;
  }
  ElementRegistry::global().take_refused();
  void *h = dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    diags_.error(where, std::string("cannot load plugin: ") + dlerror());
    return;
  }
  for (const std::string &name : ElementRegistry::global().take_refused())
    diags_.error(where, "plugin '" + p.string() + "' defines element '" + name + "', a name taken already",
                 "an element class is defined once: built in, or by one plugin; rename the plugin's");
  using AbiFn = int (*)();
  auto abi = reinterpret_cast<AbiFn>(dlsym(h, "sluice_plugin_abi"));
  if (!abi) {
    diags_.error(where, "'" + p.string() + "' is not a Sluice plugin (it has no sluice_plugin_abi symbol)");
    return;
  }
  if (abi() != kPluginAbi)
    diags_.error(where, "plugin '" + p.string() + "' was built for ABI " + std::to_string(abi()) +
                            ", this sluice has ABI " + std::to_string(kPluginAbi),
                 "rebuild the plugin against this version of Sluice");
}

}  // namespace sluice::expansion
