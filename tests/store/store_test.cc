// The model store through its public header (gemlet/store.hpp): install, resolve, switch, keep-old,
// rollback, remove, verify, leftovers of interrupted changes, names, and the manifest format.
#include "gemlet/store.hpp"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "store/store_test_util.h"

namespace gemlet {
namespace {

namespace fs = std::filesystem;
using test::FileSha;
using test::RandomBytes;
using test::WriteFile;

struct Fixture {
  test::TempDir tmp;
  std::string store_dir = tmp.File("store");
  std::unique_ptr<ModelStore> store = std::move(ModelStore::Open(store_dir)).value();
  std::string Make(const std::string& name, uint32_t seed, size_t size = 200000) {
    const std::string path = tmp.File(name);
    WriteFile(path, RandomBytes(size, seed));
    return path;
  }
};

TEST(ModelStore, InstallsResolvesAndReplacesTheOldVersion) {
  Fixture f;
  const std::string a = f.Make("a.gguf", 1), b = f.Make("b.gguf", 2);
  auto v1 = f.store->Install("m", "1", a, FileSha(a), {});
  ASSERT_TRUE(v1.ok()) << v1.message();
  EXPECT_EQ(*f.store->Resolve("m"), v1->path);
  EXPECT_EQ(*f.store->Resolve("m:1"), v1->path);
  EXPECT_EQ(test::ReadFile(v1->path), test::ReadFile(a));
  EXPECT_TRUE(fs::exists(a)) << "a copy, not a move";
  struct stat st {};
  ASSERT_EQ(::stat(v1->path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0222, 0u) << "installed files are read-only";

  auto v2 = f.store->Install("m", "2", b, "", {});  // no digest given: computed and recorded
  ASSERT_TRUE(v2.ok()) << v2.message();
  EXPECT_EQ(v2->sha256, FileSha(b));
  auto m = f.store->Get("m");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->active, "2");
  EXPECT_EQ(m->previous, "");
  EXPECT_EQ(m->versions.size(), 1u);
  EXPECT_FALSE(fs::exists(v1->path)) << "without keep_old the replaced version goes";
  EXPECT_FALSE(f.store->Resolve("m:1").ok());
  EXPECT_NE(f.store->Rollback("m").message().find("no previous version"), std::string::npos);
  EXPECT_TRUE(test::UnnamedFiles(f.store_dir).empty());
}

TEST(ModelStore, KeepOldRollsBackAndForth) {
  Fixture f;
  const std::string a = f.Make("a.gguf", 1), b = f.Make("b.gguf", 2), c = f.Make("c.gguf", 3);
  ASSERT_TRUE(f.store->Install("m", "1", a, "", {}).ok());
  InstallOptions keep;
  keep.keep_old = true;
  ASSERT_TRUE(f.store->Install("m", "2", b, "", keep).ok());
  auto m = f.store->Get("m");
  EXPECT_EQ(m->active, "2");
  EXPECT_EQ(m->previous, "1");
  auto back = f.store->Rollback("m");
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, "1");
  EXPECT_EQ(FileSha(*f.store->Resolve("m")), FileSha(a));
  EXPECT_EQ(*f.store->Rollback("m"), "2") << "rolling back twice returns";
  EXPECT_EQ(FileSha(*f.store->Resolve("m")), FileSha(b));
  // A third version without keep_old: only it stays.
  ASSERT_TRUE(f.store->Install("m", "3", c, "", {}).ok());
  m = f.store->Get("m");
  ASSERT_EQ(m->versions.size(), 1u);
  EXPECT_EQ(m->active, "3");
  EXPECT_TRUE(test::UnnamedFiles(f.store_dir).empty());
  // Activate an installed version; switching to an unknown one is refused.
  EXPECT_NE(f.store->Activate("m", "9", false).message().find("no version '9'"), std::string::npos);
}

TEST(ModelStore, ADigestMismatchInstallsNothing) {
  Fixture f;
  const std::string a = f.Make("a.gguf", 1);
  auto r = f.store->Install("m", "1", a, std::string(64, '0'), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find(a), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("not the expected"), std::string::npos) << r.message();
  EXPECT_TRUE(f.store->List()->empty());
  EXPECT_TRUE(test::UnnamedFiles(f.store_dir).empty());
  EXPECT_TRUE(fs::is_empty(f.store->partial_dir())) << "the staged copy is removed";
  EXPECT_EQ(f.store->Install("m", "1", a, "xyz", {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(ModelStore, TheSameVersionWithOtherBytesIsRefused) {
  Fixture f;
  const std::string a = f.Make("a.gguf", 1), b = f.Make("b.gguf", 2);
  ASSERT_TRUE(f.store->Install("m", "1", a, "", {}).ok());
  auto again = f.store->Install("m", "1", a, "", {});
  EXPECT_TRUE(again.ok()) << "the same bytes again: nothing to do";
  auto other = f.store->Install("m", "1", b, "", {});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.message().find("gemlet rm m"), std::string::npos) << other.message();
  EXPECT_EQ(FileSha(*f.store->Resolve("m")), FileSha(a));
}

TEST(ModelStore, VerifyFindsDamagedAndMissingFiles) {
  Fixture f;
  const std::string a = f.Make("a.gguf", 1), b = f.Make("b.gguf", 2);
  auto v = f.store->Install("m", "1", a, "", {});
  ASSERT_TRUE(f.store->Install("n", "1", b, "", {}).ok());
  auto ok = f.store->Verify("");
  ASSERT_TRUE(ok.ok());
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_TRUE((*ok)[0].ok && (*ok)[1].ok);
  ::chmod(v->path.c_str(), 0644);
  std::string bytes = test::ReadFile(v->path);
  bytes[1000] ^= 1;
  WriteFile(v->path, bytes);
  auto bad = f.store->Verify("m");
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_FALSE((*bad)[0].ok);
  EXPECT_NE((*bad)[0].problem.find("SHA-256"), std::string::npos);
  WriteFile(v->path, bytes.substr(10));
  EXPECT_NE((*f.store->Verify("m"))[0].problem.find("size"), std::string::npos);
  fs::remove(v->path);
  EXPECT_NE((*f.store->Verify("m"))[0].problem.find("missing"), std::string::npos);
}

// What a kill -9 can leave: a version file no state names, a state's .tmp, a model folder that
// never got a state, a half-removed tree. Invisible to readers, removed by the next change.
TEST(ModelStore, LeftoversOfInterruptedChangesAreInvisibleAndCollected) {
  Fixture f;
  const std::string a = f.Make("a.gguf", 1);
  ASSERT_TRUE(f.store->Install("m", "1", a, "", {}).ok());
  WriteFile(f.store_dir + "/m/7/m.gguf", "half");
  WriteFile(f.store_dir + "/m/1/other.gguf", "stray");
  WriteFile(f.store_dir + "/m/model.json.tmp", "{");
  WriteFile(f.store_dir + "/ghost/1/ghost.gguf", "never installed");
  WriteFile(f.store_dir + "/.trash-1-2-x/1/x.gguf", "removed");
  EXPECT_EQ(f.store->List()->size(), 1u) << "ghost has no state: not a model";
  EXPECT_FALSE(f.store->Get("ghost").ok());
  EXPECT_EQ(test::UnnamedFiles(f.store_dir).size(), 5u);
  auto v = f.store->Verify("");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->size(), 1u);
  EXPECT_TRUE(test::UnnamedFiles(f.store_dir).empty());
  EXPECT_FALSE(fs::exists(f.store_dir + "/ghost"));
}

TEST(ModelStore, NamesAreChecked) {
  Fixture f;
  const std::string a = f.Make("a.gguf", 1);
  for (const char* bad : {"", "../x", ".hidden", "a/b", "a b", "x:y"}) {
    auto r = f.store->Install(bad, "1", a, "", {});
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(f.store->Install("ok", "../1", a, "", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::is_empty(f.store->partial_dir()));
}

TEST(ModelStore, RemoveTakesEveryVersion) {
  Fixture f;
  const std::string a = f.Make("a.gguf", 1), b = f.Make("b.gguf", 2);
  ASSERT_TRUE(f.store->Install("m", "1", a, "", {}).ok());
  InstallOptions keep;
  keep.keep_old = true;
  ASSERT_TRUE(f.store->Install("m", "2", b, "", keep).ok());
  ASSERT_TRUE(f.store->Remove("m").ok());
  auto gone = f.store->Get("m");
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.message().find("no model 'm' in the store " + f.store->dir()), std::string::npos) << gone.message();
  EXPECT_FALSE(fs::exists(f.store_dir + "/m"));
  EXPECT_FALSE(f.store->Remove("m").ok());
}

TEST(ModelStore, MoveRenamesAFileOfTheStoresFilesystem) {
  Fixture f;
  const std::string staged = f.store->partial_dir() + "/download.part";
  WriteFile(staged, RandomBytes(5000, 4));
  const std::string sha = FileSha(staged);
  InstallOptions o;
  o.move = true;
  o.source = "https://example.org/models/tiny-Q4_0.gguf?download=1";
  auto v = f.store->Install("tiny", "3", staged, sha, o);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_FALSE(fs::exists(staged));
  EXPECT_EQ(fs::path(v->path).filename(), "tiny-Q4_0.gguf") << "the source's own file name";
  EXPECT_EQ(v->source, o.source);
}

TEST(Manifest, ParsesVersionsPatchesAndRelativeUrls) {
  const std::string text = R"({"models": [{"name": "tiny", "notes": "a test model", "versions": [
      {"version": "1", "url": "v1/tiny.gguf", "size": 10, "sha256": ")" + std::string(64, 'A') + R"("},
      {"version": "2", "url": "/abs/tiny.gguf", "sha256": ")" + std::string(64, 'b') + R"(", "notes": "better",
       "patches": [{"from": "1", "url": "p/1-2.gpatch", "size": 3, "sha256": ")" + std::string(64, 'c') + R"("}]}]}]})";
  auto m = Manifest::Parse(text, "https://mirror.example/models/manifest.json");
  ASSERT_TRUE(m.ok()) << m.message();
  const ManifestModel* tiny = m->Find("tiny");
  ASSERT_NE(tiny, nullptr);
  EXPECT_EQ(tiny->Latest()->version, "2");
  EXPECT_EQ(tiny->Find("1")->url, "https://mirror.example/models/v1/tiny.gguf");
  EXPECT_EQ(tiny->Find("1")->sha256, std::string(64, 'a')) << "lowercased";
  EXPECT_EQ(tiny->Find("1")->size, 10u);
  EXPECT_EQ(tiny->Latest()->url, "https://mirror.example/abs/tiny.gguf");
  ASSERT_NE(tiny->Latest()->PatchFrom("1"), nullptr);
  EXPECT_EQ(tiny->Latest()->PatchFrom("1")->url, "https://mirror.example/models/p/1-2.gpatch");
  EXPECT_EQ(tiny->Latest()->PatchFrom("0"), nullptr);
  auto local = Manifest::Parse(text, "/srv/store/manifest.json");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->Find("tiny")->Find("1")->url, "/srv/store/v1/tiny.gguf");
}

TEST(Manifest, ErrorsNameTheManifestAndTheField) {
  const std::string digest = std::string(64, 'a');
  struct Case {
    std::string json, expect;
  } cases[] = {
      {"not json", "m.json is not valid JSON: "},
      {R"({"models": 3})", "\"models\" array"},
      {R"({"models": [{"versions": []}]})", "m.json: models[0].name is missing"},
      {R"({"models": [{"name": "x", "versions": []}]})", "models[0].versions must list at least one version"},
      {R"({"models": [{"name": "x", "versions": [{"version": "1", "url": "u"}]}]})", "models[0].versions[0].sha256 is missing"},
      {R"({"models": [{"name": "x", "versions": [{"version": "1", "url": "u", "sha256": "12"}]}]})",
       "models[0].versions[0].sha256: '12' is not a SHA-256 digest"},
      {R"({"models": [{"name": "x", "versions": [{"version": "1", "url": "u", "size": -1, "sha256": ")" + digest + R"("}]}]})",
       "models[0].versions[0].size is not a byte count"},
      {R"({"models": [{"name": "../x", "versions": [{"version": "1", "url": "u", "sha256": ")" + digest + R"("}]}]})",
       "models[0].name: model name '../x' is not valid"},
      {R"({"models": [{"name": "x", "versions": [{"version": "1", "url": "u", "sha256": ")" + digest +
           R"("}, {"version": "1", "url": "u", "sha256": ")" + digest + R"("}]}]})",
       "models[0].versions[1].version: '1' is listed twice"},
  };
  for (const Case& c : cases) {
    auto m = Manifest::Parse(c.json, "m.json");
    ASSERT_FALSE(m.ok()) << c.json;
    EXPECT_NE(m.message().find(c.expect), std::string::npos) << m.message();
  }
}

}  // namespace
}  // namespace gemlet
