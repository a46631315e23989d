// A small RAII layer over SQLite's C API for the history store: a connection, prepared
// statements, and transactions that roll back unless committed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace gemlet::history {

class Db;

class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  // Parameters count from 1, as in SQLite. Text and blobs are copied.
  Statement& Bind(int index, int64_t value);
  Statement& BindText(int index, std::string_view value);
  Statement& BindBlob(int index, std::string_view value);
  Statement& BindNull(int index);

  // true: a row is ready; false: done.
  Result<bool> Step();
  Status Run();  // steps to the end, for statements that return no rows
  void Reset();

  int64_t Int(int column) const;
  std::string Bytes(int column) const;  // text or blob as stored
  bool IsNull(int column) const;

 private:
  friend class Db;
  Statement(Db* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Db* db_;
  sqlite3_stmt* stmt_;
};

class Db {
 public:
  // Opens, creating the file when missing; errors name the path.
  static Result<std::unique_ptr<Db>> Open(const std::string& path);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  Status Exec(const std::string& sql);  // one or more statements, no rows wanted
  Result<Statement> Prepare(std::string_view sql);
  // The first column of the first row of `sql` as an integer (0 when no row).
  Result<int64_t> QueryInt(const std::string& sql);
  Result<std::string> QueryText(const std::string& sql);
  int64_t last_insert_rowid() const;
  int changes() const;

  // "'path': <SQLite's message>" for the connection's last error.
  Status Error(std::string_view doing) const;
  const std::string& path() const { return path_; }

 private:
  Db(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
};

// BEGIN IMMEDIATE (the write lock up front, so a transaction never fails half-way on a lock);
// rolled back on destruction unless Commit succeeded.
class Transaction {
 public:
  static Result<Transaction> Begin(Db& db);
  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  Status Commit();

 private:
  explicit Transaction(Db* db) : db_(db) {}
  Db* db_;
};

}  // namespace gemlet::history
