// SQLite connection, statements and transactions for the history store.
#include "history/sqlite_db.h"

#include <sqlite3.h>

namespace gemlet::history {

Statement::Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) { other.stmt_ = nullptr; }
Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Statement& Statement::BindText(int index, std::string_view value) {
  sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return *this;
}
Statement& Statement::BindBlob(int index, std::string_view value) {
  sqlite3_bind_blob64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Result<bool> Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error("running a statement");
}

Status Statement::Run() {
  for (;;) {
    ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }
bool Statement::IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
std::string Statement::Bytes(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  const int n = sqlite3_column_bytes(stmt_, column);
  return data ? std::string(static_cast<const char*>(data), n) : std::string();
}

Result<std::unique_ptr<Db>> Db::Open(const std::string& path) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  std::unique_ptr<Db> db(new Db(raw, path));
  if (rc != SQLITE_OK) return db->Error("opening");
  sqlite3_extended_result_codes(raw, 1);
  // Another gemlet writing the same store (two chats) holds the lock for one short transaction.
  sqlite3_busy_timeout(raw, 5000);
  return db;
}

Db::~Db() { sqlite3_close_v2(db_); }

Status Db::Exec(const std::string& sql) {
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) return Error("running SQL");
  return Status::Ok();
}

Result<Statement> Db::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) != SQLITE_OK) {
    return Error("preparing a statement");
  }
  return Statement(this, stmt);
}

Result<int64_t> Db::QueryInt(const std::string& sql) {
  ASSIGN_OR_RETURN(Statement stmt, Prepare(sql));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.Int(0) : int64_t{0};
}

Result<std::string> Db::QueryText(const std::string& sql) {
  ASSIGN_OR_RETURN(Statement stmt, Prepare(sql));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.Bytes(0) : std::string();
}

int64_t Db::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
int Db::changes() const { return sqlite3_changes(db_); }

Status Db::Error(std::string_view doing) const {
  const char* message = db_ ? sqlite3_errmsg(db_) : "out of memory";
  return Status::Error("history store '" + path_ + "': " + std::string(doing) + ": " + message);
}

Result<Transaction> Transaction::Begin(Db& db) {
  RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (db_) (void)db_->Exec("ROLLBACK");
}

Status Transaction::Commit() {
  Db* db = db_;
  db_ = nullptr;
  Status s = db->Exec("COMMIT");
  if (!s.ok()) (void)db->Exec("ROLLBACK");
  return s;
}

}  // namespace gemlet::history
