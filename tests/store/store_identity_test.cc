// A new version of a model in the store is never mistaken for the old one by the engine's caches:
// the packed-weight cache and saved session states are keyed by the file's identity (size, mtime,
// inode, a hash of its first and last MiB: Engine identity() in src/runtime), not by its path. Here
// the new version is the worst case: same size, same first and last MiB (a byte changed in the
// middle), at the very same store path, installed right after the old one was removed.
#include <gtest/gtest.h>

#include "gemlet/gemlet.hpp"
#include "gemlet/store.hpp"
#include "store/store_test_util.h"

namespace gemlet {
namespace {

// Whether the best kernels (after "ref") pack weights.
bool PackingKernels() {
  const std::string best = AvailableKernels().size() >= 2 ? AvailableKernels()[1] : "";
  return test::KernelTablePacksWeights(best);
}

struct Loaded {
  std::shared_ptr<Engine> engine;
  std::unique_ptr<Session> session;
};

Loaded Load(const std::string& path, const std::string& cache_dir) {
  EngineOptions eo;
  eo.cache_dir = cache_dir;
  auto engine = Engine::Load(path, eo);
  EXPECT_TRUE(engine.ok()) << engine.message();
  if (!engine.ok()) return {};
  SessionOptions so;
  so.n_ctx = 64;
  auto session = Session::Create(*engine, so);
  EXPECT_TRUE(session.ok()) << session.message();
  return {*engine, session.ok() ? std::move(session).value() : nullptr};
}

TEST(StoreIdentity, ANewVersionAtTheSamePathIsNotTheOldOne) {
  test::TempDir tmp;
  // One file name in two folders: installed under the same name, they land at the same store path.
  const std::string old_file = tmp.File("old/demo.gguf"), new_file = tmp.File("new/demo.gguf"), cache = tmp.File("cache");
  std::string bytes = test::ReadFile(GEMLET_DEMO_MODEL);
  ASSERT_GT(bytes.size(), 4u << 20);
  test::WriteFile(old_file, bytes);
  bytes[bytes.size() / 2] ^= 0x01;  // a weight's low bit: the model still loads, its ends are the same
  test::WriteFile(new_file, bytes);
  auto store = ModelStore::Open(tmp.File("store"));
  ASSERT_TRUE(store.ok());

  auto v1 = (*store)->Install("demo", "1", old_file, "", {});
  ASSERT_TRUE(v1.ok()) << v1.message();
  const std::string state = tmp.File("session.state");
  {
    Loaded a = Load(v1->path, cache);
    ASSERT_TRUE(a.session);
    if (PackingKernels()) {
      EXPECT_EQ(a.engine->info().packed_cache, "built");
    }
    const std::vector<int32_t> prompt = a.engine->Tokenize("Once upon a time", {.add_special = true});
    ASSERT_TRUE(a.session->Evaluate(prompt).ok());
    ASSERT_TRUE(a.session->SaveState(state).ok());
  }
  {
    // The control: the same file again is the same model (the checks below can fail).
    Loaded again = Load(v1->path, cache);
    ASSERT_TRUE(again.session);
    if (PackingKernels()) {
      EXPECT_EQ(again.engine->info().packed_cache, "loaded");
    }
    EXPECT_TRUE(again.session->LoadState(state).ok());
  }

  // Version 1 removed, then other bytes installed as version 1 again: the same path.
  ASSERT_TRUE((*store)->Remove("demo").ok());
  auto v1b = (*store)->Install("demo", "1", new_file, "", {});
  ASSERT_TRUE(v1b.ok()) << v1b.message();
  ASSERT_EQ(v1b->path, v1->path);
  {
    Loaded b = Load(*(*store)->Resolve("demo"), cache);
    ASSERT_TRUE(b.session);
    if (PackingKernels()) {
      EXPECT_EQ(b.engine->info().packed_cache, "built") << "the old packed weights are not reused";
    }
    const Status s = b.session->LoadState(state);
    ASSERT_FALSE(s.ok()) << "a session of the old version was accepted";
    EXPECT_NE(s.message().find("another model file (or another version of it)"), std::string::npos) << s.message();
  }

  // An update to version 2 (another path) and a rollback: each switch is seen.
  InstallOptions keep;
  keep.keep_old = true;
  auto v2 = (*store)->Install("demo", "2", old_file, "", keep);
  ASSERT_TRUE(v2.ok()) << v2.message();
  {
    Loaded c = Load(*(*store)->Resolve("demo"), cache);
    ASSERT_TRUE(c.session);
    EXPECT_FALSE(c.session->LoadState(state).ok()) << "same bytes as the saved one, but another file: refused, not guessed";
  }
  ASSERT_TRUE((*store)->Rollback("demo").ok());
  {
    Loaded d = Load(*(*store)->Resolve("demo"), cache);
    ASSERT_TRUE(d.session);
    EXPECT_FALSE(d.session->LoadState(state).ok());
  }
}

}  // namespace
}  // namespace gemlet
