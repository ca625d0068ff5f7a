// Golden diagnostics: every tests/dsl/invalid/X.pipe is compiled and its
// diagnostics (file:line:column: severity: message, in order) must equal
// X.expected. Every .pipe in configs/, examples/ and tests/dsl/valid/ must
// check clean. SLUICE_UPDATE_GOLDEN=1 rewrites the .expected files.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "frontend_fixture.hh"

namespace fs = std::filesystem;
using namespace sluice;

static std::vector<fs::path> pipe_files(const std::string &dir) {
  std::vector<fs::path> out;
  for (auto &e : fs::directory_iterator(dir))
    if (e.path().extension() == ".pipe") out.push_back(fs::relative(e.path(), SLUICE_SOURCE_DIR));
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("invalid configurations give the expected diagnostics", "[golden]") {
  fs::current_path(SLUICE_SOURCE_DIR);
  auto files = pipe_files("tests/dsl/invalid");
  REQUIRE(files.size() >= 10);
  bool update = std::getenv("SLUICE_UPDATE_GOLDEN") != nullptr;
  for (const auto &f : files) {
    DYNAMIC_SECTION(f.string()) {
      auto c = test::compile_file(f.string());
      std::string got;
      for (auto &l : c->lines) got += l + "\n";
      fs::path expected_path = fs::path(f).replace_extension(".expected");
      if (update) std::ofstream(expected_path) << got;
      std::ifstream in(expected_path);
      REQUIRE(in.good());
      std::string expected((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      CHECK_FALSE(c->ok);
      CHECK(got == expected);
    }
  }
}

TEST_CASE("every configuration in the repository checks clean", "[golden]") {
  fs::current_path(SLUICE_SOURCE_DIR);
  std::vector<fs::path> files;
  for (const char *dir : {"configs", "examples", "tests/dsl/valid"})
    for (auto &f : pipe_files(dir)) files.push_back(f);
  REQUIRE(files.size() >= 8);
  for (const auto &f : files) {
    DYNAMIC_SECTION(f.string()) {
      auto c = test::compile_file(f.string());
      INFO(c->printed);
      CHECK(c->ok);
      CHECK(c->lines.empty());  // no warnings either
      CHECK(!c->lanes.lanes.empty());
    }
  }
}
