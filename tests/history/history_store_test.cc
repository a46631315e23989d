// The history store through include/gemlet/history.hpp: saving, listing, Chinese and English
// search, removal, exports, migration from schema 1, refusals, and encryption at rest.
#include "gemlet/history.hpp"

#include <sqlite3.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/test_util.h"

namespace gemlet {
namespace {

std::unique_ptr<HistoryStore> OpenOk(const std::string& path, const HistoryOptions& options = {}) {
  auto store = HistoryStore::Open(path, options);
  EXPECT_TRUE(store.ok()) << store.message();
  return store.ok() ? std::move(store).value() : nullptr;
}

HistoryOptions Key(std::string key) {
  HistoryOptions o;
  o.key = std::move(key);
  o.kdf_log_n = 12;  // cheap for tests; the default's cost is the same code with a larger N
  return o;
}

// One Chinese and one English conversation; returns their ids.
std::pair<int64_t, int64_t> FillStore(HistoryStore& store) {
  auto zh = store.CreateConversation("", "你是一个乐于助人的助手", "gemlet-demo");
  EXPECT_TRUE(zh.ok()) << zh.message();
  EXPECT_TRUE(store.AppendMessage(*zh, {"user", "今天天气很好，我们去公园散步吧"}).ok());
  EXPECT_TRUE(store.AppendMessage(*zh, {"assistant", "好主意！记得带水，傍晚可能下雨。"}).ok());
  auto en = store.CreateConversation("Umbrella advice", "", "gemlet-demo");
  EXPECT_TRUE(en.ok()) << en.message();
  EXPECT_TRUE(store.AppendMessage(*en, {"user", "What's the WEATHER like in Beijing tomorrow?"}).ok());
  EXPECT_TRUE(store.AppendMessage(*en, {"assistant", "Rainy afternoon: bring an umbrella."}).ok());
  return {*zh, *en};
}

std::vector<int64_t> HitConversations(HistoryStore& store, std::string_view text) {
  auto hits = store.Search(text);
  EXPECT_TRUE(hits.ok()) << hits.message();
  std::vector<int64_t> out;
  if (hits.ok()) {
    for (const SearchHit& h : *hits) out.push_back(h.conversation_id);
  }
  return out;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The store's files as they are on disk now: the database, its WAL and shared memory.
std::string StoreBytes(const std::string& path) {
  return ReadBytes(path) + ReadBytes(path + "-wal") + ReadBytes(path + "-shm") + ReadBytes(path + "-journal");
}

TEST(HistoryStore, SavesListsAndGetsConversations) {
  test::TempDir dir;
  const std::string path = dir.File(HistoryStore::kFileName);
  auto store = OpenOk(path);
  ASSERT_TRUE(store);
  EXPECT_FALSE(store->encrypted());
  EXPECT_EQ(store->schema_version(), HistoryStore::SchemaVersion());
  const auto [zh, en] = FillStore(*store);

  auto list = store->List();
  ASSERT_TRUE(list.ok()) << list.message();
  ASSERT_EQ(list->size(), 2u);
  std::map<int64_t, ConversationSummary> by_id;
  for (const ConversationSummary& s : *list) by_id[s.id] = s;
  EXPECT_EQ(by_id[zh].title, "今天天气很好，我们去公园散步吧");  // from the first user message
  EXPECT_EQ(by_id[en].title, "Umbrella advice");
  EXPECT_EQ(by_id[zh].message_count, 2);
  EXPECT_EQ(by_id[zh].model, "gemlet-demo");

  auto got = store->Get(zh);
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_EQ(got->system, "你是一个乐于助人的助手");
  ASSERT_EQ(got->messages.size(), 2u);
  EXPECT_EQ(got->messages[0].role, "user");
  EXPECT_EQ(got->messages[1].content, "好主意！记得带水，傍晚可能下雨。");

  // The store is owner-only: it holds what the user said.
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // Reopened, it is all there.
  store.reset();
  store = OpenOk(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(store->List()->size(), 2u);
  EXPECT_EQ(store->Get(en)->messages.size(), 2u);
}

TEST(HistoryStore, SearchFindsTwoCharacterChineseWordsAndEnglishWords) {
  test::TempDir dir;
  auto store = OpenOk(dir.File(HistoryStore::kFileName));
  ASSERT_TRUE(store);
  const auto [zh, en] = FillStore(*store);

  EXPECT_EQ(HitConversations(*store, "天气"), std::vector<int64_t>{zh});
  EXPECT_EQ(HitConversations(*store, "公园"), std::vector<int64_t>{zh});
  EXPECT_EQ(HitConversations(*store, "weather"), std::vector<int64_t>{en});
  EXPECT_EQ(HitConversations(*store, "Umbrella"), std::vector<int64_t>{en});
  // Runs match as written (a phrase of bigrams), single characters by themselves.
  EXPECT_EQ(HitConversations(*store, "天气很好"), std::vector<int64_t>{zh});
  EXPECT_TRUE(HitConversations(*store, "天好").empty());
  EXPECT_EQ(HitConversations(*store, "雨").size(), 1u);
  // Every term must match: a Chinese word and an English word from different conversations do not.
  EXPECT_TRUE(HitConversations(*store, "天气 weather").empty());
  EXPECT_EQ(HitConversations(*store, "weather beijing"), std::vector<int64_t>{en});
  EXPECT_TRUE(HitConversations(*store, "snow").empty());
  // Words match whole.
  EXPECT_TRUE(HitConversations(*store, "weath").empty());

  auto hits = store->Search("WEATHER");
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_EQ((*hits)[0].role, "user");
  EXPECT_EQ((*hits)[0].title, "Umbrella advice");
  EXPECT_NE((*hits)[0].snippet.find("WEATHER"), std::string::npos) << (*hits)[0].snippet;
  hits = store->Search("下雨");
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_EQ((*hits)[0].role, "assistant");
  EXPECT_NE((*hits)[0].snippet.find("下雨"), std::string::npos);

  auto empty = store->Search("？！ ...");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
}

TEST(HistoryStore, RemoveDeletesTheConversationAndItsTextFromTheFiles) {
  test::TempDir dir;
  const std::string path = dir.File(HistoryStore::kFileName);
  auto store = OpenOk(path);
  ASSERT_TRUE(store);
  const auto [zh, en] = FillStore(*store);
  ASSERT_NE(StoreBytes(path).find("公园散步"), std::string::npos);  // the probe below can see text
  ASSERT_TRUE(store->Remove(zh).ok());
  EXPECT_TRUE(HitConversations(*store, "天气").empty());
  EXPECT_EQ(HitConversations(*store, "weather"), std::vector<int64_t>{en});
  EXPECT_FALSE(store->Get(zh).ok());
  EXPECT_EQ(store->List()->size(), 1u);
  // secure_delete, the index's merge and the WAL's checkpoint leave none of its text on disk.
  const std::string bytes = StoreBytes(path);
  for (const char* gone : {"公园散步", "公园", "乐于助人", "傍晚"}) EXPECT_EQ(bytes.find(gone), std::string::npos) << gone;

  Status again = store->Remove(zh);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("no conversation"), std::string::npos) << again.message();
  EXPECT_FALSE(store->AppendMessage(zh, {"user", "hi"}).ok());
  EXPECT_EQ(store->AppendMessage(en, {"robot", "hi"}).status().code(), StatusCode::kInvalidArgument);
}

TEST(HistoryStore, ExportsMarkdownAndJson) {
  test::TempDir dir;
  auto store = OpenOk(dir.File(HistoryStore::kFileName));
  ASSERT_TRUE(store);
  const auto [zh, en] = FillStore(*store);
  auto md = store->ExportMarkdown(zh);
  ASSERT_TRUE(md.ok()) << md.message();
  EXPECT_EQ(md->rfind("# 今天天气很好，我们去公园散步吧\n", 0), 0u) << *md;
  EXPECT_NE(md->find("## system\n\n你是一个乐于助人的助手\n"), std::string::npos) << *md;
  EXPECT_NE(md->find("## user\n\n今天天气很好，我们去公园散步吧\n\n## assistant\n\n好主意！"), std::string::npos) << *md;

  auto js = store->ExportJson(en);
  ASSERT_TRUE(js.ok()) << js.message();
  const nlohmann::json j = nlohmann::json::parse(*js);
  EXPECT_EQ(j["id"], en);
  EXPECT_EQ(j["title"], "Umbrella advice");
  ASSERT_EQ(j["messages"].size(), 2u);
  EXPECT_EQ(j["messages"][0]["role"], "user");
  EXPECT_EQ(j["messages"][1]["content"], "Rainy afternoon: bring an umbrella.");
  EXPECT_FALSE(store->ExportJson(en + 100).ok());
}

// Schema 1 was conversations and messages without search; opening one migrates it in place.
TEST(HistoryStore, MigratesASchemaOneStore) {
  test::TempDir dir;
  const std::string path = dir.File(HistoryStore::kFileName);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, R"sql(
    CREATE TABLE conversations(id INTEGER PRIMARY KEY, title TEXT, created_at INTEGER NOT NULL);
    CREATE TABLE messages(id INTEGER PRIMARY KEY, conversation_id INTEGER NOT NULL REFERENCES conversations(id),
                          role TEXT NOT NULL, content TEXT NOT NULL, created_at INTEGER NOT NULL);
    INSERT INTO conversations VALUES(1, '旧的对话', 1700000000), (2, 'old one', 1700000100);
    INSERT INTO messages VALUES(10, 1, 'user', '明天北京会下雨吗', 1700000001),
                               (11, 2, 'user', 'Is the museum open on Monday?', 1700000101),
                               (12, 1, 'assistant', '可能会，带把伞吧', 1700000002),
                               (13, 2, 'assistant', 'Yes, from nine.', 1700000102);
    PRAGMA user_version = 1;
  )sql", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);

  auto store = OpenOk(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), HistoryStore::SchemaVersion());
  EXPECT_EQ(HitConversations(*store, "下雨"), std::vector<int64_t>{1});
  EXPECT_EQ(HitConversations(*store, "museum"), std::vector<int64_t>{2});
  auto one = store->Get(1);
  ASSERT_TRUE(one.ok()) << one.message();
  EXPECT_EQ(one->summary.title, "旧的对话");
  EXPECT_EQ(one->summary.updated_at, 1700000002);
  ASSERT_EQ(one->messages.size(), 2u);
  EXPECT_EQ(one->messages[1].content, "可能会，带把伞吧");
  // The migrated store takes new messages after the old ones, and removal cascades.
  ASSERT_TRUE(store->AppendMessage(1, {"user", "谢谢"}).ok());
  EXPECT_EQ(store->Get(1)->messages.back().content, "谢谢");
  ASSERT_TRUE(store->Remove(2).ok());
  EXPECT_TRUE(HitConversations(*store, "museum").empty());
}

TEST(HistoryStore, RefusesWhatItCannotOpenAndChangesNothing) {
  test::TempDir dir;
  // Not a database.
  const std::string junk = dir.File("junk.db");
  std::ofstream(junk) << "this is not a database, just some text that is long enough to look like a header";
  const std::string junk_before = ReadBytes(junk);
  auto r = HistoryStore::Open(junk);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("is not a gemlet history store"), std::string::npos) << r.message();
  EXPECT_EQ(ReadBytes(junk), junk_before);
  // Another program's SQLite database.
  const std::string other = dir.File("other.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE notes(x)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  r = HistoryStore::Open(other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("not a gemlet history store"), std::string::npos) << r.message();
  // A newer schema.
  const std::string newer = dir.File("newer.db");
  ASSERT_TRUE(OpenOk(newer));
  ASSERT_EQ(sqlite3_open(newer.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  r = HistoryStore::Open(newer);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("newer"), std::string::npos) << r.message();
  // A folder that does not exist: nothing is created.
  r = HistoryStore::Open(dir.File("missing/conversations.db"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("cannot create"), std::string::npos) << r.message();
  EXPECT_FALSE(std::filesystem::exists(dir.File("missing")));
}

// Everything a user typed or was told, its title and its search tokens: the plaintext a scan of an
// encrypted store's files must not find.
std::vector<std::string> Secrets() {
  std::vector<std::string> out = {"今天天气很好，我们去公园散步吧", "好主意！记得带水，傍晚可能下雨。", "你是一个乐于助人的助手",
                                  "gemlet-demo", "Umbrella advice", "WEATHER", "weather", "Beijing", "beijing",
                                  "tomorrow", "Rainy", "rainy", "afternoon", "umbrella"};
  for (const char* zh : {"今天天气很好，我们去公园散步吧", "好主意！记得带水，傍晚可能下雨。", "你是一个乐于助人的助手"}) {
    const std::string s = zh;
    // Every bigram of three-byte characters: what a plaintext index would hold.
    for (size_t i = 0; i + 6 <= s.size(); i += 3) out.push_back(s.substr(i, 6));
  }
  return out;
}

TEST(HistoryStore, AnEncryptedStoreLeavesNoPlaintextOnDiskAndStillSearches) {
  test::TempDir dir;
  const std::string path = dir.File(HistoryStore::kFileName);
  auto store = OpenOk(path, Key("correct horse 电池 staple"));
  ASSERT_TRUE(store);
  EXPECT_TRUE(store->encrypted());
  const auto [zh, en] = FillStore(*store);

  // While open (the messages are in the WAL) and after closing (checkpointed into the file).
  for (int pass = 0; pass < 2; ++pass) {
    const std::string bytes = StoreBytes(path);
    ASSERT_GT(bytes.size(), 4096u);
    for (const std::string& secret : Secrets()) EXPECT_EQ(bytes.find(secret), std::string::npos) << secret << " pass " << pass;
    store.reset();
  }

  store = OpenOk(path, Key("correct horse 电池 staple"));
  ASSERT_TRUE(store);
  EXPECT_EQ(HitConversations(*store, "天气"), std::vector<int64_t>{zh});
  EXPECT_EQ(HitConversations(*store, "weather"), std::vector<int64_t>{en});
  EXPECT_EQ(HitConversations(*store, "雨").size(), 1u);
  EXPECT_TRUE(HitConversations(*store, "天好").empty());
  auto got = store->Get(zh);
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_EQ(got->system, "你是一个乐于助人的助手");
  EXPECT_EQ(got->summary.title, "今天天气很好，我们去公园散步吧");
  EXPECT_EQ(got->messages[1].content, "好主意！记得带水，傍晚可能下雨。");
  auto hits = store->Search("下雨");
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_NE((*hits)[0].snippet.find("下雨"), std::string::npos);
  ASSERT_TRUE(store->Remove(en).ok());
  EXPECT_TRUE(HitConversations(*store, "weather").empty());
}

TEST(HistoryStore, AnEncryptedStoreRefusesAWrongOrMissingKey) {
  test::TempDir dir;
  const std::string path = dir.File(HistoryStore::kFileName);
  {
    auto store = OpenOk(path, Key("秘密 key"));
    ASSERT_TRUE(store);
    FillStore(*store);
  }
  auto wrong = HistoryStore::Open(path, Key("秘密 kez"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("wrong key"), std::string::npos) << wrong.message();
  auto none = HistoryStore::Open(path);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("is encrypted"), std::string::npos) << none.message();
  // Refusals wrote nothing: the right key still reads everything.
  auto store = OpenOk(path, Key("秘密 key"));
  ASSERT_TRUE(store);
  EXPECT_EQ(store->List()->size(), 2u);

  // And a plaintext store takes no key.
  const std::string plain = dir.File("plain.db");
  ASSERT_TRUE(OpenOk(plain));
  auto keyed = HistoryStore::Open(plain, Key("x"));
  ASSERT_FALSE(keyed.ok());
  EXPECT_NE(keyed.message().find("not encrypted"), std::string::npos) << keyed.message();
}

// A sealed field is bound to its row: moved elsewhere (a tampered file) it does not open.
TEST(HistoryStore, ASealedFieldMovedToAnotherRowIsRefused) {
  test::TempDir dir;
  const std::string path = dir.File(HistoryStore::kFileName);
  int64_t zh = 0;
  {
    auto store = OpenOk(path, Key("k"));
    ASSERT_TRUE(store);
    zh = FillStore(*store).first;
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE messages SET content = (SELECT content FROM messages WHERE seq = 2 AND conversation_id = 1)"
                             " WHERE seq = 1 AND conversation_id = 1", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenOk(path, Key("k"));
  ASSERT_TRUE(store);
  auto got = store->Get(zh);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.message().find("does not authenticate"), std::string::npos) << got.message();
}

TEST(HistoryStore, TheDefaultKeyDerivationWorks) {
  test::TempDir dir;
  const std::string path = dir.File(HistoryStore::kFileName);
  HistoryOptions o;
  o.key = "passphrase";
  {
    auto store = OpenOk(path, o);
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->AppendMessage(*store->CreateConversation("", "", ""), {"user", "早上好"}).ok());
  }
  o.kdf_log_n = 11;  // the cost of an existing store is the store's, not the option's
  auto store = OpenOk(path, o);
  ASSERT_TRUE(store);
  EXPECT_EQ(HitConversations(*store, "早上").size(), 1u);
}

}  // namespace
}  // namespace gemlet
