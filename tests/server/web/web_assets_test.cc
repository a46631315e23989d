// The chat page compiled into the binary: every file of src/server/web/ is there, byte for byte,
// with its content type, and the page asks for no file the table lacks.
#include "server/web/web_assets.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace gemlet::server {
namespace {

const std::filesystem::path kWebDir = GEMLET_WEB_SOURCE_DIR;

std::string ReadSource(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The page's files: everything in the folder but the C++ and CMake that embed them.
std::set<std::string> PageFiles() {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(kWebDir)) {
    const std::string name = entry.path().filename().string();
    const std::string ext = entry.path().extension().string();
    if (ext == ".h" || ext == ".cc" || name == "CMakeLists.txt") continue;
    names.insert(name);
  }
  return names;
}

TEST(WebAssets, EveryPageFileIsEmbeddedByteForByte) {
  const std::set<std::string> names = PageFiles();
  ASSERT_FALSE(names.empty()) << "no files in " << kWebDir;
  for (const std::string& name : names) {
    const WebAsset* asset = FindWebAsset("/" + name);
    ASSERT_NE(asset, nullptr) << name << " is in src/server/web but not in GEMLET_WEB_FILES (its CMakeLists.txt)";
    EXPECT_EQ(asset->path, "/" + name);
    EXPECT_EQ(asset->body, ReadSource(kWebDir / name)) << name << " differs from its source";
  }
  EXPECT_EQ(WebAssets().size(), names.size());
}

TEST(WebAssets, ContentTypes) {
  const std::pair<const char*, const char*> expected[] = {
      {"/index.html", "text/html; charset=utf-8"},
      {"/style.css", "text/css; charset=utf-8"},
      {"/app.js", "text/javascript; charset=utf-8"},
      {"/markdown.js", "text/javascript; charset=utf-8"},
      {"/favicon.svg", "image/svg+xml"},
  };
  for (const auto& [path, type] : expected) {
    const WebAsset* asset = FindWebAsset(path);
    ASSERT_NE(asset, nullptr) << path;
    EXPECT_EQ(asset->content_type, type) << path;
  }
}

TEST(WebAssets, RootIsIndexAndOtherPathsAreExact) {
  ASSERT_NE(FindWebAsset("/"), nullptr);
  EXPECT_EQ(FindWebAsset("/"), FindWebAsset("/index.html"));
  for (const char* path : {"", "index.html", "/nope.js", "/web_assets.h", "/CMakeLists.txt",
                           "/../web/index.html", "/index.html?x=1", "//index.html", "/INDEX.HTML"}) {
    EXPECT_EQ(FindWebAsset(path), nullptr) << path;
  }
}

// Every src="..." and href="..." of index.html and every `from "./x.js"` of the scripts is a file
// of the table, so a file left out of GEMLET_WEB_FILES fails here rather than in a browser.
TEST(WebAssets, ThePageNeedsOnlyEmbeddedFiles) {
  const std::regex reference(R"((?:src|href)="([^"]+)\"|from "\./([^"]+)\")");
  int checked = 0;
  for (const WebAsset& asset : WebAssets()) {
    if (asset.path != "/index.html" && !asset.path.ends_with(".js")) continue;
    const std::string body(asset.body);
    for (std::sregex_iterator m(body.begin(), body.end(), reference), end; m != end; ++m) {
      const std::string file = (*m)[1].matched ? (*m)[1].str() : (*m)[2].str();
      EXPECT_NE(FindWebAsset("/" + file), nullptr) << asset.path << " needs " << file;
      ++checked;
    }
  }
  EXPECT_GE(checked, 5);
}

// The <meta> policy is the header's, less frame-ancestors (which only a header can set).
TEST(WebAssets, MetaPolicyMatchesTheHeader) {
  const WebAsset* index = FindWebAsset("/index.html");
  ASSERT_NE(index, nullptr);
  std::smatch m;
  const std::string body(index->body);
  ASSERT_TRUE(std::regex_search(body, m, std::regex(R"(http-equiv="Content-Security-Policy" content="([^"]+)\")")));
  EXPECT_EQ(m[1].str() + "; frame-ancestors 'none'", kWebContentSecurityPolicy);
}

}  // namespace
}  // namespace gemlet::server
