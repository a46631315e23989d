// kill -9 while the history store is being written: the database opens, passes SQLite's and the
// search index's integrity checks, and holds every message the writer saw committed, plus at most
// the one it was writing.
#include "gemlet/history.hpp"

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include <gtest/gtest.h>

#include "common/test_util.h"

namespace gemlet {
namespace {

std::string Text(int64_t n) {
  return "第" + std::to_string(n) + "条消息：今天天气很好。Message msg" + std::to_string(n) +
         " says the weather is fine. " + std::string(static_cast<size_t>(n % 7) * 40, 'x');
}

// The writer: appends numbered messages until killed, reporting each one after its commit.
[[noreturn]] void Writer(const std::string& path, const HistoryOptions& options, int64_t conversation, int report_fd) {
  auto store = HistoryStore::Open(path, options);
  if (!store.ok()) _exit(3);
  auto existing = (*store)->Get(conversation);
  if (!existing.ok()) _exit(4);
  for (int64_t n = static_cast<int64_t>(existing->messages.size());; ++n) {
    if (!(*store)->AppendMessage(conversation, {n % 2 == 0 ? "user" : "assistant", Text(n)}).ok()) _exit(5);
    if (::write(report_fd, &n, sizeof n) != static_cast<ssize_t>(sizeof n)) _exit(6);
  }
}

std::string Pragma(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
      const int rc = sqlite3_step(stmt);
      if (rc == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      else if (rc == SQLITE_DONE) out = "done";
      else out = sqlite3_errmsg(db);
    } else {
      out = sqlite3_errmsg(db);
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return out;
}

void KillDuringWrites(const HistoryOptions& options, int trials, uint32_t seed) {
  test::TempDir dir;
  const std::string path = dir.File(HistoryStore::kFileName);
  int64_t conversation = 0;
  {
    auto store = HistoryStore::Open(path, options);
    ASSERT_TRUE(store.ok()) << store.message();
    auto id = (*store)->CreateConversation("", "断电测试", "demo");
    ASSERT_TRUE(id.ok()) << id.message();
    conversation = *id;
  }
  std::mt19937 rng(seed);
  int64_t committed = 0;  // messages the writers reported, over all trials
  for (int trial = 0; trial < trials; ++trial) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      Writer(path, options, conversation, fds[1]);
    }
    ::close(fds[1]);
    // A random moment: in the open, between commits or, mostly, inside one.
    ::usleep(std::uniform_int_distribution<int>(0, 40000)(rng));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer stopped by itself (exit " << WEXITSTATUS(status) << ")";
    int64_t n = 0;
    while (::read(fds[0], &n, sizeof n) == static_cast<ssize_t>(sizeof n)) committed = n + 1;
    ::close(fds[0]);

    SCOPED_TRACE("trial " + std::to_string(trial));
    ASSERT_EQ(Pragma(path, "PRAGMA integrity_check"), "ok");
    ASSERT_EQ(Pragma(path, "INSERT INTO message_index(message_index) VALUES('integrity-check')"), "done");
    auto store = HistoryStore::Open(path, options);
    ASSERT_TRUE(store.ok()) << store.message();
    auto got = (*store)->Get(conversation);
    ASSERT_TRUE(got.ok()) << got.message();
    const int64_t have = static_cast<int64_t>(got->messages.size());
    // Every reported message, and at most the one committed but not yet reported.
    ASSERT_GE(have, committed);
    ASSERT_LE(have, committed + 1);
    for (int64_t k = 0; k < have; ++k) ASSERT_EQ(got->messages[k].content, Text(k)) << "message " << k;
    committed = have;
    if (have > 0) {
      auto hits = (*store)->Search("msg" + std::to_string(have - 1) + " 天气");
      ASSERT_TRUE(hits.ok()) << hits.message();
      ASSERT_EQ(hits->size(), 1u);
      EXPECT_EQ((*hits)[0].message_id, got->messages.back().id);
    }
  }
  // The trials did write: the test saw commits to check, not only kills before the first. (How
  // many depends on the disk: each commit waits for an fsync.)
  EXPECT_GT(committed, 0);
}

TEST(HistoryCrash, KillNineDuringWritesLeavesAReadableStore) { KillDuringWrites({}, 30, 20240601); }

TEST(HistoryCrash, KillNineDuringEncryptedWritesLeavesAReadableStore) {
  HistoryOptions o;
  o.key = "断电 key";
  o.kdf_log_n = 10;
  KillDuringWrites(o, 10, 7);
}

}  // namespace
}  // namespace gemlet
