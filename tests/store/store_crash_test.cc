// kill -9 at random points of `gemlet pull`, `update` and `rollback` (at least 100 trials on one
// store, the downloads slowed so that kills land mid-transfer, mid-hash and mid-switch; trials go on
// until 30 have been killed, since how many finish first depends on the machine's speed and load):
// afterwards the store
// is always consistent. `gemlet verify` passes, the active version resolves to a file with its
// recorded digest, no file outside .partial is one that no state names, and the next pull resumes.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "gemlet/store.hpp"
#include "store/store_test_util.h"

namespace gemlet {
namespace {

namespace fs = std::filesystem;

pid_t Spawn(const std::string& cmd) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1 </dev/null").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Kills the command after `delay` (SIGKILL) and reaps it: whether the kill came before it ended.
bool KilledAfter(const std::string& cmd, std::chrono::microseconds delay) {
  const pid_t pid = Spawn(cmd);
  std::this_thread::sleep_for(delay);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status);
}

// After a kill: readers first (no change made yet, so leftovers are still there but must be
// invisible), then `gemlet verify`, then no file that no state names.
void ExpectConsistent(const std::string& store_dir, const std::vector<std::string>& shas, int trial, const std::string& op) {
  auto store = ModelStore::Open(store_dir);
  ASSERT_TRUE(store.ok());
  auto models = (*store)->List();
  ASSERT_TRUE(models.ok()) << "trial " << trial << ": " << models.message();
  for (const StoredModel& m : *models) {
    const StoredVersion* active = m.Active();
    ASSERT_NE(active, nullptr) << "trial " << trial;
    ASSERT_EQ(test::FileSha(active->path), active->sha256) << "trial " << trial << " (" << op << ")";
    EXPECT_NE(std::find(shas.begin(), shas.end(), active->sha256), shas.end());
    if (!m.previous.empty()) {
      ASSERT_NE(m.Find(m.previous), nullptr);
      EXPECT_TRUE(fs::exists(m.Find(m.previous)->path)) << "a previous pointer only while its file exists";
    }
  }
  auto verify = test::RunCommand(test::GemletBinary() + " verify --store " + store_dir + " 2>&1");
  ASSERT_EQ(verify.exit_code, 0) << "trial " << trial << " (" << op << "): " << verify.out;
  const std::vector<std::string> unnamed = test::UnnamedFiles(store_dir);
  ASSERT_TRUE(unnamed.empty()) << "trial " << trial << ": " << unnamed[0];
}

TEST(StoreCrash, KillNineAtRandomPointsLeavesAConsistentStore) {
  test::TempDir tmp;
  const std::string www = tmp.File("www"), store_dir = tmp.File("store");
  constexpr size_t kSize = 1 << 20;
  std::vector<std::string> shas;
  nlohmann::json versions = nlohmann::json::array();
  for (int v = 1; v <= 3; ++v) {
    const std::string file = www + "/v" + std::to_string(v) + ".gguf";
    test::WriteFile(file, test::RandomBytes(kSize, 100 + v));
    shas.push_back(test::FileSha(file));
    // About 0.35 s a download: the kills below land before, during and after it.
    versions.push_back({{"version", std::to_string(v)}, {"url", "f/slow=3000000/v" + std::to_string(v) + ".gguf"},
                        {"size", kSize}, {"sha256", shas.back()}});
  }
  test::WriteFile(www + "/manifest.json", nlohmann::json({{"models", {{{"name", "m"}, {"versions", versions}}}}}).dump());
  test::LocalServer server(www);
  ASSERT_GT(server.port(), 0);
  const std::string gemlet = "env -u http_proxy -u GEMLET_MANIFEST " + test::GemletBinary();
  const std::string flags = " --store " + store_dir + " --retry-delay-ms 20";
  const std::string manifest = " --manifest " + server.Url("/manifest.json");

  std::mt19937 rng(20);
  int completed = 0, killed = 0;
  // A kill that comes after a quick operation (a rollback, a pull of what is there) tests nothing, and
  // how often that happens depends on the machine; so the trials go on until enough were killed.
  constexpr int kMinTrials = 100, kMinKilled = 30, kMaxTrials = 400;
  for (int trial = 0; trial < kMaxTrials && (trial < kMinTrials || killed < kMinKilled); ++trial) {
    std::string op;
    const bool installed = fs::exists(store_dir + "/m/model.json");
    switch (installed ? rng() % 4 : 0) {
      case 0: op = "pull m:" + std::to_string(1 + rng() % 2) + manifest + flags; break;
      case 1: op = "update m" + std::string(rng() % 2 ? " --keep-old" : "") + manifest + flags; break;
      case 2: op = "rollback m --store " + store_dir; break;
      default: op = "pull m:" + std::to_string(1 + rng() % 3) + (rng() % 2 ? " --keep-old" : "") + manifest + flags; break;
    }
    (KilledAfter(gemlet + " " + op, std::chrono::microseconds(rng() % 250000)) ? killed : completed)++;

    ExpectConsistent(store_dir, shas, trial, op);
    if (::testing::Test::HasFatalFailure()) return;
  }
  std::printf("%d trials killed, %d ran to the end\n", killed, completed);
  EXPECT_GE(killed, kMinKilled) << "too few trials were killed mid-operation";
  EXPECT_GT(completed, 5);
  // Whatever the kills left in .partial, a final pull and update finish and verify.
  auto pull = test::RunCommand(gemlet + " pull m:1" + manifest + flags + " 2>&1");
  ASSERT_EQ(pull.exit_code, 0) << pull.out;
  auto update = test::RunCommand(gemlet + " update m" + manifest + flags + " 2>&1");
  ASSERT_EQ(update.exit_code, 0) << update.out;
  EXPECT_EQ(test::FileSha(*(*ModelStore::Open(store_dir))->Resolve("m")), shas[2]);
  EXPECT_EQ(test::RunCommand(test::GemletBinary() + " verify --store " + store_dir).exit_code, 0);
}

// The same for updates by patch (#20: kill -9 during pull, patch and update): versions 1 and 2 are
// real GGUFs, the manifest offers a `gemlet diff` patch from 1 to 2 (served slowly), and kills land
// in its download, its application and the switch (at least 30 trials, and on until 10 were killed).
TEST(StoreCrash, KillNineDuringPatchUpdatesLeavesAConsistentStore) {
  test::TempDir tmp;
  const std::string www = tmp.File("www"), store_dir = tmp.File("store");
  fs::create_directories(www);
  const std::string g = test::GemletBinary();
  ASSERT_EQ(test::RunCommand(g + " synth --preset tiny-gemma3 --seed 5 -o " + www + "/v0.gguf 2>&1").exit_code, 0);
  ASSERT_EQ(test::RunCommand(g + " quantize " + www + "/v0.gguf " + www + "/v1.gguf Q8_0 2>&1").exit_code, 0);
  ASSERT_EQ(test::RunCommand(g + " quantize " + www + "/v0.gguf " + www + "/v2.gguf Q8_0 --tensor-type ffn_down=q4_0 2>&1").exit_code, 0);
  ASSERT_EQ(test::RunCommand(g + " diff " + www + "/v1.gguf " + www + "/v2.gguf -o " + www + "/1-2.gpatch 2>&1").exit_code, 0);
  const std::vector<std::string> shas = {test::FileSha(www + "/v1.gguf"), test::FileSha(www + "/v2.gguf")};
  const nlohmann::json versions = {
      {{"version", "1"}, {"url", "v1.gguf"}, {"size", fs::file_size(www + "/v1.gguf")}, {"sha256", shas[0]}},
      {{"version", "2"}, {"url", "v2.gguf"}, {"size", fs::file_size(www + "/v2.gguf")}, {"sha256", shas[1]},
       {"patches", {{{"from", "1"}, {"url", "f/slow=2000000/1-2.gpatch"}, {"size", fs::file_size(www + "/1-2.gpatch")},
                     {"sha256", test::FileSha(www + "/1-2.gpatch")}}}}}};
  test::WriteFile(www + "/manifest.json", nlohmann::json({{"models", {{{"name", "m"}, {"versions", versions}}}}}).dump());
  test::LocalServer server(www);
  ASSERT_GT(server.port(), 0);
  const std::string gemlet = "env -u http_proxy -u GEMLET_MANIFEST " + g;
  const std::string flags = " --store " + store_dir + " --retry-delay-ms 20";
  const std::string manifest = " --manifest " + server.Url("/manifest.json");
  std::mt19937 rng(21);
  int killed = 0, completed = 0;
  constexpr int kMinTrials = 30, kMinKilled = 10, kMaxTrials = 120;
  for (int trial = 0; trial < kMaxTrials && (trial < kMinTrials || killed < kMinKilled); ++trial) {
    // Back to version 1 (not killed), then an update by patch, killed at a random point.
    auto reset = test::RunCommand(gemlet + " pull m:1" + manifest + flags + " 2>&1");
    ASSERT_EQ(reset.exit_code, 0) << reset.out;
    const std::string op = "update m" + std::string(rng() % 2 ? " --keep-old" : "") + manifest + flags;
    (KilledAfter(gemlet + " " + op, std::chrono::microseconds(rng() % 400000)) ? killed : completed)++;
    ExpectConsistent(store_dir, shas, trial, op);
    if (::testing::Test::HasFatalFailure()) return;
  }
  std::printf("patch updates: %d killed, %d ran to the end\n", killed, completed);
  EXPECT_GE(killed, kMinKilled);
  EXPECT_GT(completed, 0);
  auto update = test::RunCommand(gemlet + " update m -v" + manifest + flags + " 2>&1");
  ASSERT_EQ(update.exit_code, 0) << update.out;
  EXPECT_EQ(test::FileSha(*(*ModelStore::Open(store_dir))->Resolve("m")), shas[1]);
}

}  // namespace
}  // namespace gemlet
