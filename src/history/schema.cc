// Schema versions of the history store and the migrations between them.
#include "history/schema.h"

#include <iterator>

#include "history/search_index.h"

namespace gemlet::history {
namespace {

Status CreateV1(Db& db) {
  return db.Exec(R"sql(
    CREATE TABLE conversations(
      id INTEGER PRIMARY KEY,
      title TEXT,
      created_at INTEGER NOT NULL);
    CREATE TABLE messages(
      id INTEGER PRIMARY KEY,
      conversation_id INTEGER NOT NULL REFERENCES conversations(id),
      role TEXT NOT NULL,
      content TEXT NOT NULL,
      created_at INTEGER NOT NULL);
  )sql");
}

// Text columns hold TEXT in a plaintext store and sealed BLOBs in an encrypted one, hence no types.
Status V1ToV2(Db& db) {
  RETURN_IF_ERROR(db.Exec(R"sql(
    CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
    INSERT INTO meta VALUES('encryption', 'none');
    ALTER TABLE conversations ADD COLUMN system;
    ALTER TABLE conversations ADD COLUMN model;
    ALTER TABLE conversations ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;
    UPDATE conversations SET updated_at = COALESCE(
      (SELECT MAX(m.created_at) FROM messages m WHERE m.conversation_id = conversations.id), created_at);
    CREATE TABLE messages_v2(
      id INTEGER PRIMARY KEY,
      conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
      seq INTEGER NOT NULL,
      role TEXT NOT NULL CHECK(role IN ('system', 'user', 'assistant')),
      content NOT NULL,
      created_at INTEGER NOT NULL,
      UNIQUE(conversation_id, seq));
    INSERT INTO messages_v2
      SELECT id, conversation_id, ROW_NUMBER() OVER (PARTITION BY conversation_id ORDER BY id), role, content, created_at
      FROM messages;
    DROP TABLE messages;
    ALTER TABLE messages_v2 RENAME TO messages;
    CREATE INDEX conversations_by_update ON conversations(updated_at);
    -- rowid = messages.id. Tokens come from search_tokens.cc; FTS5's ascii tokenizer only splits
    -- them at the spaces between them.
    CREATE VIRTUAL TABLE message_index USING fts5(grams, chars, tokenize = 'ascii');
  )sql"));
  // A v1 store is plaintext (encryption came with v2).
  ASSIGN_OR_RETURN(Statement read, db.Prepare("SELECT id, content FROM messages"));
  ASSIGN_OR_RETURN(Statement write, db.Prepare("INSERT INTO message_index(rowid, grams, chars) VALUES(?, ?, ?)"));
  for (;;) {
    ASSIGN_OR_RETURN(bool row, read.Step());
    if (!row) break;
    const IndexRow index = MakeIndexRow(read.Bytes(1), nullptr);
    write.Reset();
    RETURN_IF_ERROR(write.Bind(1, read.Int(0)).BindText(2, index.grams).BindText(3, index.chars).Run());
  }
  return Status::Ok();
}

struct Migration {
  int to;
  Status (*run)(Db&);
};
// Append only: a released step never changes, a new version adds a step.
constexpr Migration kMigrations[] = {{1, CreateV1}, {2, V1ToV2}};
static_assert(std::size(kMigrations) == kSchemaVersion);

}  // namespace

Status Migrate(Db& db, int from, const std::function<Status()>& before_commit) {
  if (from == kSchemaVersion && !before_commit) return Status::Ok();
  // SQLite's recipe for rebuilding a table: foreign keys off around the transaction, checked before
  // it commits.
  RETURN_IF_ERROR(db.Exec("PRAGMA foreign_keys = OFF"));
  Status s = [&]() -> Status {
    ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db));
    // Read again under the write lock: another process may have migrated it meanwhile.
    ASSIGN_OR_RETURN(int64_t now, db.QueryInt("PRAGMA user_version"));
    if (now != from) return Status::Error("history store '" + db.path() + "' changed while it was opened; try again");
    for (const Migration& m : kMigrations) {
      if (m.to <= from) continue;
      if (Status st = m.run(db); !st.ok()) return st.WithContext("migrating to schema " + std::to_string(m.to));
    }
    if (before_commit) RETURN_IF_ERROR(before_commit());
    ASSIGN_OR_RETURN(int64_t broken, db.QueryInt("SELECT COUNT(*) FROM pragma_foreign_key_check"));
    if (broken != 0) return Status::Error("history store '" + db.path() + "': messages of missing conversations");
    RETURN_IF_ERROR(db.Exec("PRAGMA user_version = " + std::to_string(kSchemaVersion)));
    return tx.Commit();
  }();
  RETURN_IF_ERROR(db.Exec("PRAGMA foreign_keys = ON"));
  return s;
}

}  // namespace gemlet::history
