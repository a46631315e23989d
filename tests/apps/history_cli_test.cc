// End to end: `gemlet chat` keeps nothing unless asked (--history, /keep), what it keeps is what
// it said, and `gemlet history list|search|show|export|resume|rm` work on it, encrypted too.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "gemlet/history.hpp"

namespace gemlet {
namespace {

const std::string kModel = GEMLET_DEMO_MODEL;

// The binary with a private HOME, XDG_DATA_HOME and XDG_CACHE_HOME, so the default store is
// inside `home` (and the packed-weight cache, which holds no conversation, in home/cache).
std::string Gemlet(const test::TempDir& home) {
  return "HOME=" + home.path() + " XDG_DATA_HOME=" + home.path() + "/data XDG_CACHE_HOME=" + home.path() +
         "/cache GEMLET_HISTORY_KEY_FILE= " + test::GemletBinary();
}
std::string Chat(const test::TempDir& home, const std::string& flags = "") {
  return Gemlet(home) + " chat -m " + kModel + " --temp 0 -n 12 -t 2 " + flags;
}
std::string DefaultStore(const test::TempDir& home) { return home.path() + "/data/gemlet/" + HistoryStore::kFileName; }

StoredConversation Stored(const std::string& path, int64_t id, const std::string& key = "") {
  HistoryOptions o;
  o.key = key;
  auto store = HistoryStore::Open(path, o);
  EXPECT_TRUE(store.ok()) << store.message();
  if (!store.ok()) return {};
  auto c = (*store)->Get(id);
  EXPECT_TRUE(c.ok()) << c.message();
  return c.ok() ? *c : StoredConversation{};
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(HistoryCli, AChatWithoutHistoryWritesNothing) {
  test::TempDir home;
  auto r = test::RunCommand("printf '今天天气很好\\nWhat is the weather like?\\n' | " + Chat(home) + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_FALSE(r.out.empty());
  // Looking at the history makes nothing either.
  auto list = test::RunCommand(Gemlet(home) + " history list 2>&1");
  EXPECT_EQ(list.exit_code, 0) << list.out;
  EXPECT_NE(list.out.find("no conversations kept"), std::string::npos) << list.out;
  EXPECT_FALSE(std::filesystem::exists(home.path() + "/data")) << "the chat or the list wrote a data folder";
  // Nothing else was written but the packed weights.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(home.path())) {
    if (!entry.is_regular_file()) continue;
    EXPECT_EQ(entry.path().extension(), ".gpack") << entry.path();
    EXPECT_EQ(entry.path().string().rfind(home.path() + "/cache/", 0), 0u) << entry.path();
  }
}

TEST(HistoryCli, ChatHistoryKeepsEveryTurnAndSearchFindsChineseAndEnglish) {
  test::TempDir home;
  auto r = test::RunCommand("printf '今天天气很好\\nWhat is the weather like?\\n' | " + Chat(home, "--history --system 简短回答") +
                            " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0);
  const StoredConversation c = Stored(DefaultStore(home), 1);
  ASSERT_EQ(c.messages.size(), 4u);
  EXPECT_EQ(c.system, "简短回答");
  EXPECT_EQ(c.messages[0].content, "今天天气很好");
  EXPECT_EQ(c.messages[2].content, "What is the weather like?");
  // What was kept is what the chat printed.
  EXPECT_EQ(r.out, c.messages[1].content + "\n" + c.messages[3].content + "\n");

  auto list = test::RunCommand(Gemlet(home) + " history list");
  ASSERT_EQ(list.exit_code, 0);
  EXPECT_NE(list.out.find("    1  "), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("4 messages  今天天气很好"), std::string::npos) << list.out;
  auto zh = test::RunCommand(Gemlet(home) + " history search 天气");
  ASSERT_EQ(zh.exit_code, 0);
  EXPECT_NE(zh.out.find("    1  user       今天天气很好"), std::string::npos) << zh.out;
  auto en = test::RunCommand(Gemlet(home) + " history search WEATHER");
  ASSERT_EQ(en.exit_code, 0);
  EXPECT_NE(en.out.find("What is the weather like?"), std::string::npos) << en.out;
  auto none = test::RunCommand(Gemlet(home) + " history search 下雪 2>&1");
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_NE(none.out.find("(no matches)"), std::string::npos) << none.out;

  auto show = test::RunCommand(Gemlet(home) + " history show 1");
  ASSERT_EQ(show.exit_code, 0);
  EXPECT_NE(show.out.find("## user\n\n今天天气很好\n\n## assistant\n\n" + c.messages[1].content), std::string::npos) << show.out;
  auto json = test::RunCommand(Gemlet(home) + " history export 1 --format json");
  ASSERT_EQ(json.exit_code, 0);
  const nlohmann::json j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["messages"].size(), 4u);
  EXPECT_EQ(j["messages"][3]["content"], c.messages[3].content);

  auto rm = test::RunCommand(Gemlet(home) + " history rm 1 2>&1");
  EXPECT_EQ(rm.exit_code, 0) << rm.out;
  auto after = test::RunCommand(Gemlet(home) + " history search 天气 2>&1");
  EXPECT_NE(after.out.find("(no matches)"), std::string::npos) << after.out;
}

TEST(HistoryCli, KeepDuringAChatSavesTheTurnsSoFarAndAfter) {
  test::TempDir home;
  const std::string dir = home.File("store");
  auto r = test::RunCommand("printf '你好\\n/keep\\nWho are you?\\n' | " + Chat(home, "--data-dir " + dir) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("(kept as conversation 1)"), std::string::npos) << r.out;
  const StoredConversation c = Stored(dir + "/" + HistoryStore::kFileName, 1);
  ASSERT_EQ(c.messages.size(), 4u);
  EXPECT_EQ(c.messages[0].content, "你好");
  EXPECT_EQ(c.messages[2].content, "Who are you?");
  EXPECT_FALSE(std::filesystem::exists(home.path() + "/data"));  // --data-dir, not the default
  // --history and no turn, or /keep before any: no empty conversation is kept.
  ASSERT_EQ(test::RunCommand("printf '/keep\n' | " + Chat(home, "--history --data-dir " + dir) + " 2>/dev/null").exit_code, 0);
  auto list = test::RunCommand(Gemlet(home) + " history list --data-dir " + dir);
  EXPECT_EQ(std::count(list.out.begin(), list.out.end(), '\n'), 1) << list.out;
}

// resume ID continues the kept conversation: the answer is the one a chat that loaded the same
// messages gives, and the new turn is kept.
TEST(HistoryCli, ResumeGoesOnWithAKeptConversation) {
  test::TempDir home;
  ASSERT_EQ(test::RunCommand("printf 'Who are you?\\n' | " + Chat(home, "--history --system 'Be brief.'") + " >/dev/null 2>&1").exit_code, 0);
  const std::string exported = home.File("c1.json");
  ASSERT_EQ(test::RunCommand(Gemlet(home) + " history export 1 --format json -o " + exported + " 2>/dev/null").exit_code, 0);
  auto loaded = test::RunCommand("printf '/load " + exported + "\\n再说一遍\\n' | " + Chat(home, "--system 'Be brief.'") + " 2>/dev/null");
  ASSERT_EQ(loaded.exit_code, 0);
  auto resumed = test::RunCommand("printf '再说一遍\\n' | " + Gemlet(home) + " history resume 1 -m " + kModel +
                                  " --temp 0 -n 12 -t 2 2>/dev/null");
  ASSERT_EQ(resumed.exit_code, 0);
  EXPECT_EQ(resumed.out, loaded.out);
  const StoredConversation c = Stored(DefaultStore(home), 1);
  ASSERT_EQ(c.messages.size(), 4u);
  EXPECT_EQ(c.messages[2].content, "再说一遍");
  EXPECT_EQ(c.messages[3].content + "\n", resumed.out);
}

TEST(HistoryCli, AnEncryptedStoreNeedsItsKeyAndHoldsNoPlaintext) {
  test::TempDir home;
  const std::string key = home.File("key.txt");
  std::ofstream(key) << "我的 passphrase\n";
  const std::string wrong = home.File("wrong.txt");
  std::ofstream(wrong) << "not it\n";
  ASSERT_EQ(test::RunCommand("printf '今天天气很好\\nWhat is the weather like?\\n' | " +
                             Chat(home, "--history --key-file " + key) + " >/dev/null 2>&1").exit_code, 0);
  const std::string path = DefaultStore(home);
  const std::string bytes = ReadBytes(path) + ReadBytes(path + "-wal");
  ASSERT_FALSE(bytes.empty());
  for (const char* plain : {"今天天气很好", "天气", "weather", "What is the"}) EXPECT_EQ(bytes.find(plain), std::string::npos) << plain;
  EXPECT_EQ(Stored(path, 1, "我的 passphrase").messages.size(), 4u);

  auto zh = test::RunCommand(Gemlet(home) + " history search 天气 --key-file " + key);
  EXPECT_NE(zh.out.find("今天天气很好"), std::string::npos) << zh.out;
  auto en = test::RunCommand(Gemlet(home) + " history search weather --key-file " + key);
  EXPECT_NE(en.out.find("What is the weather like?"), std::string::npos) << en.out;
  // ExpectOneClearErrorLine runs the binary as is: the store's folder goes on the command line.
  const std::string data = " --data-dir " + home.path() + "/data/gemlet";
  test::ExpectOneClearErrorLine({
      {"history list" + data, "is encrypted"},
      {"history list" + data + " --key-file " + wrong, "wrong key"},
      {"history list" + data + " --key-file " + home.File("nope.txt"), "cannot read the history key file"},
  });
}

TEST(HistoryCli, BadInputGivesOneClearErrorLine) {
  test::TempDir home;
  const std::string data = " --data-dir " + home.File("d");
  ASSERT_EQ(test::RunCommand("printf 'hi\\n' | " + Chat(home, "--history" + data) + " >/dev/null 2>&1").exit_code, 0);
  const std::string junk = home.File("junk");
  std::filesystem::create_directories(junk);
  std::ofstream(junk + "/" + HistoryStore::kFileName) << "not a database at all, but long enough to have a header";
  // ExpectOneClearErrorLine runs the binary as is (the real HOME): every case names its store folder.
  test::ExpectOneClearErrorLine({
      {"history show 99" + data, "no conversation 99"},
      {"history rm 99" + data, "no conversation 99"},
      {"history export 99 --format json" + data, "no conversation 99"},
      {"history resume 99 -m " + kModel + data, "no conversation 99"},
      {"history show 1 --data-dir " + home.File("empty"), "no history store"},
      {"history list --data-dir " + junk, "not a gemlet history store"},
      {"history show abc" + data, "ID"},
      {"history export 1 --format pdf" + data, "--format"},
      {"history search '!?'" + data, "no word"},
      {"history", "subcommand"},
      {"history resume", "needs the ID"},
      {"chat --resume 1 --session x" + data, "do not go together"},
  });
  // The refusals left the store as it was.
  EXPECT_EQ(Stored(home.File("d") + "/" + HistoryStore::kFileName, 1).messages.size(), 2u);
}

}  // namespace
}  // namespace gemlet
