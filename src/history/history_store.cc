// HistoryStore (include/gemlet/history.hpp): conversations in SQLite, sealed fields and hashed
// search tokens when the store is encrypted.
#include "gemlet/history.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <optional>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "history/crypto.h"
#include "history/schema.h"
#include "history/search_index.h"
#include "history/sqlite_db.h"

namespace gemlet {

using history::Db;
using history::Keys;
using history::Statement;
using history::Transaction;

namespace {

constexpr char kEncryptionNone[] = "none";
constexpr char kEncryptionScryptGcm[] = "scrypt+aes-256-gcm+hmac-sha256";
constexpr size_t kTitleChars = 60;

// Where each sealed field lives: a value sealed for one place does not open in another.
std::string ConversationAad(int64_t id, const char* column) { return "conversation/" + std::to_string(id) + "/" + column; }
std::string MessageAad(int64_t conversation_id, int64_t seq) {
  return "message/" + std::to_string(conversation_id) + "/" + std::to_string(seq);
}

bool IsUtf8Lead(char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }

// Byte offset `n` characters after `from` (or the end).
size_t AdvanceChars(std::string_view s, size_t from, size_t n) {
  size_t i = from;
  while (i < s.size() && n > 0) {
    ++i;
    while (i < s.size() && !IsUtf8Lead(s[i])) ++i;
    --n;
  }
  return i;
}
// Byte offset `n` characters before `from` (or 0).
size_t BackChars(std::string_view s, size_t from, size_t n) {
  size_t i = from;
  while (i > 0 && n > 0) {
    --i;
    while (i > 0 && !IsUtf8Lead(s[i])) --i;
    --n;
  }
  return i;
}

std::string OneLine(std::string_view s) {
  std::string out;
  for (char c : s) {
    const bool space = c == '\n' || c == '\r' || c == '\t' || c == ' ';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string TitleFrom(std::string_view content) {
  const std::string line = OneLine(content);
  const size_t cut = AdvanceChars(line, 0, kTitleChars);
  return cut < line.size() ? line.substr(0, cut) + "…" : line;
}

// The matched text with some context, on one line. Terms are found by ASCII-lowercased search
// (byte offsets stay those of the content); a term not found that way shows the message's start.
std::string Snippet(std::string_view content, const std::vector<history::QueryTerm>& terms) {
  std::string lower(content);
  for (char& c : lower) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
  size_t best = std::string::npos, best_len = 0;
  for (const history::QueryTerm& t : terms) {
    const size_t at = lower.find(t.text);
    if (at != std::string::npos && at < best) best = at, best_len = t.text.size();
  }
  if (best == std::string::npos) best = 0;
  const size_t begin = BackChars(content, best, 20);
  const size_t end = AdvanceChars(content, best + best_len, 40);
  return (begin > 0 ? "…" : "") + OneLine(content.substr(begin, end - begin)) + (end < content.size() ? "…" : "");
}

std::string IsoTime(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

Status NoConversation(int64_t id) {
  return Status::Error("no conversation " + std::to_string(id) + " in the history ('gemlet history list' shows them)");
}

}  // namespace

struct HistoryStore::Impl {
  std::unique_ptr<Db> db;
  std::optional<Keys> keys;

  const Keys* k() const { return keys ? &*keys : nullptr; }

  // A text field: TEXT in a plaintext store, a sealed BLOB in an encrypted one.
  Status BindField(Statement& stmt, int index, std::string_view text, const std::string& aad) const {
    if (!keys) {
      stmt.BindText(index, text);
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(std::string sealed, keys->Seal(text, aad));
    stmt.BindBlob(index, sealed);
    return Status::Ok();
  }
  Result<std::string> ReadField(const Statement& stmt, int column, const std::string& aad) const {
    if (stmt.IsNull(column)) return std::string();
    if (!keys) return stmt.Bytes(column);
    return keys->Unseal(stmt.Bytes(column), aad);
  }

  Result<ConversationSummary> Summary(const Statement& row) const {
    // Columns: id, title, model, created_at, updated_at, message count.
    ConversationSummary s;
    s.id = row.Int(0);
    ASSIGN_OR_RETURN(s.title, ReadField(row, 1, ConversationAad(s.id, "title")));
    ASSIGN_OR_RETURN(s.model, ReadField(row, 2, ConversationAad(s.id, "model")));
    s.created_at = row.Int(3);
    s.updated_at = row.Int(4);
    s.message_count = static_cast<int>(row.Int(5));
    return s;
  }
};

namespace {

// Reads what the store says about its encryption and checks `key` against it; `keys` receives the
// derived keys of an encrypted store.
Status CheckKey(Db& db, int version, const HistoryOptions& options, std::optional<Keys>* keys) {
  std::string encryption = kEncryptionNone;
  if (version >= 2) {
    ASSIGN_OR_RETURN(encryption, db.QueryText("SELECT value FROM meta WHERE key = 'encryption'"));
  }
  const std::string where = "history store '" + db.path() + "'";
  if (encryption == kEncryptionNone) {
    if (!options.key.empty()) return Status::Error(where + " is not encrypted: open it without a key");
    return Status::Ok();
  }
  if (encryption != kEncryptionScryptGcm) return Status::Error(where + ": unknown encryption '" + encryption + "'");
  if (options.key.empty()) return Status::Error(where + " is encrypted: open it with its key");
  ASSIGN_OR_RETURN(std::string salt, db.QueryText("SELECT value FROM meta WHERE key = 'kdf_salt'"));
  ASSIGN_OR_RETURN(int64_t log_n, db.QueryInt("SELECT value FROM meta WHERE key = 'kdf_log_n'"));
  ASSIGN_OR_RETURN(std::string check, db.QueryText("SELECT value FROM meta WHERE key = 'key_check'"));
  ASSIGN_OR_RETURN(Keys derived, Keys::Derive(options.key, salt, static_cast<int>(log_n)));
  if (!history::ConstantTimeEqual(derived.check(), check)) return Status::Error("wrong key for the " + where);
  keys->emplace(std::move(derived));
  return Status::Ok();
}

}  // namespace

int HistoryStore::SchemaVersion() { return history::kSchemaVersion; }

HistoryStore::HistoryStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HistoryStore::~HistoryStore() = default;

Result<std::unique_ptr<HistoryStore>> HistoryStore::Open(const std::string& path, const HistoryOptions& options) {
  if (path.empty()) return Status::Error(StatusCode::kInvalidArgument, "no path for the history store");
  if (!options.key.empty() && (options.kdf_log_n < 10 || options.kdf_log_n > 22)) {
    return Status::Error(StatusCode::kInvalidArgument, "kdf_log_n must be in 10..22");
  }
  // Created here, owner-only (SQLite gives its -wal and -shm files the same mode); removed again if
  // the store cannot be set up, so a failed open leaves nothing behind.
  bool created = false;
  if (::access(path.c_str(), F_OK) != 0) {
    const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return Status::Error("cannot create '" + path + "': " + std::strerror(errno));
    if (fd >= 0) {
      ::close(fd);
      created = true;
    }
  }
  auto impl = std::make_unique<Impl>();
  Status s = [&]() -> Status {
    ASSIGN_OR_RETURN(impl->db, Db::Open(path));
    Db& db = *impl->db;
    auto version = db.QueryInt("PRAGMA user_version");
    if (!version.ok()) return Status::Error("'" + path + "' is not a gemlet history store (" + version.message() + ")");
    if (*version > history::kSchemaVersion) {
      return Status::Error("history store '" + path + "' has schema " + std::to_string(*version) +
                           ", newer than this gemlet's " + std::to_string(history::kSchemaVersion) + ": update gemlet");
    }
    std::function<Status()> setup_encryption;
    if (*version == 0) {
      ASSIGN_OR_RETURN(int64_t tables, db.QueryInt("SELECT COUNT(*) FROM sqlite_master"));
      if (tables != 0) return Status::Error("'" + path + "' is a SQLite database, but not a gemlet history store");
      if (!options.key.empty()) {
        ASSIGN_OR_RETURN(std::string salt, history::RandomBytes(16));
        ASSIGN_OR_RETURN(Keys keys, Keys::Derive(options.key, salt, options.kdf_log_n));
        impl->keys.emplace(std::move(keys));
        setup_encryption = [&db, &impl, salt, log_n = options.kdf_log_n]() -> Status {
          RETURN_IF_ERROR(db.Exec(std::string("UPDATE meta SET value = '") + kEncryptionScryptGcm + "' WHERE key = 'encryption'"));
          ASSIGN_OR_RETURN(Statement put, db.Prepare("INSERT INTO meta VALUES(?, ?)"));
          RETURN_IF_ERROR(put.BindText(1, "kdf_salt").BindBlob(2, salt).Run());
          put.Reset();
          RETURN_IF_ERROR(put.BindText(1, "kdf_log_n").Bind(2, log_n).Run());
          put.Reset();
          return put.BindText(1, "key_check").BindBlob(2, impl->keys->check()).Run();
        };
      }
    } else {
      RETURN_IF_ERROR(CheckKey(db, static_cast<int>(*version), options, &impl->keys));
    }
    // WAL: a commit appends to the log, so a crash mid-write leaves the last commit intact; FULL
    // syncs the log at each commit, so a committed message survives power loss too (one fsync per
    // message is nothing next to generating it). secure_delete zeroes what Remove frees; temp_store
    // keeps sort spills off the disk.
    ASSIGN_OR_RETURN(std::string mode, db.QueryText("PRAGMA journal_mode = WAL"));
    if (mode != "wal") return Status::Error("history store '" + path + "': cannot use a WAL journal (" + mode + ")");
    RETURN_IF_ERROR(db.Exec("PRAGMA synchronous = FULL; PRAGMA secure_delete = ON; PRAGMA temp_store = MEMORY"));
    return history::Migrate(db, static_cast<int>(*version), setup_encryption);
  }();
  if (!s.ok()) {
    impl.reset();
    if (created) {
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((path + suffix).c_str());
    }
    return s;
  }
  return std::unique_ptr<HistoryStore>(new HistoryStore(std::move(impl)));
}

bool HistoryStore::encrypted() const { return impl_->keys.has_value(); }

int HistoryStore::schema_version() const {
  auto v = impl_->db->QueryInt("PRAGMA user_version");
  return v.ok() ? static_cast<int>(*v) : -1;
}

Result<int64_t> HistoryStore::CreateConversation(std::string_view title, std::string_view system,
                                                 std::string_view model) {
  Db& db = *impl_->db;
  ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db));
  const int64_t now = Now();
  ASSIGN_OR_RETURN(Statement insert, db.Prepare("INSERT INTO conversations(created_at, updated_at) VALUES(?, ?)"));
  RETURN_IF_ERROR(insert.Bind(1, now).Bind(2, now).Run());
  const int64_t id = db.last_insert_rowid();
  // The fields are sealed for this row's id, which exists only now.
  ASSIGN_OR_RETURN(Statement update, db.Prepare("UPDATE conversations SET title = ?, system = ?, model = ? WHERE id = ?"));
  if (title.empty()) update.BindNull(1);
  else RETURN_IF_ERROR(impl_->BindField(update, 1, title, ConversationAad(id, "title")));
  RETURN_IF_ERROR(impl_->BindField(update, 2, system, ConversationAad(id, "system")));
  RETURN_IF_ERROR(impl_->BindField(update, 3, model, ConversationAad(id, "model")));
  RETURN_IF_ERROR(update.Bind(4, id).Run());
  RETURN_IF_ERROR(tx.Commit());
  return id;
}

Result<int64_t> HistoryStore::AppendMessage(int64_t conversation_id, const Message& message) {
  if (message.role != "user" && message.role != "assistant" && message.role != "system") {
    return Status::Error(StatusCode::kInvalidArgument, "unknown message role '" + message.role + "'");
  }
  Db& db = *impl_->db;
  ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db));
  ASSIGN_OR_RETURN(Statement find, db.Prepare("SELECT title IS NULL FROM conversations WHERE id = ?"));
  find.Bind(1, conversation_id);
  ASSIGN_OR_RETURN(bool exists, find.Step());
  if (!exists) return NoConversation(conversation_id);
  const bool untitled = find.Int(0) != 0;
  ASSIGN_OR_RETURN(Statement next, db.Prepare("SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE conversation_id = ?"));
  next.Bind(1, conversation_id);
  RETURN_IF_ERROR(next.Step().status());
  const int64_t seq = next.Int(0);
  const int64_t now = Now();

  ASSIGN_OR_RETURN(Statement insert, db.Prepare(
      "INSERT INTO messages(conversation_id, seq, role, content, created_at) VALUES(?, ?, ?, ?, ?)"));
  insert.Bind(1, conversation_id).Bind(2, seq).BindText(3, message.role);
  RETURN_IF_ERROR(impl_->BindField(insert, 4, message.content, MessageAad(conversation_id, seq)));
  RETURN_IF_ERROR(insert.Bind(5, now).Run());
  const int64_t id = db.last_insert_rowid();

  const history::IndexRow row = history::MakeIndexRow(message.content, impl_->k());
  ASSIGN_OR_RETURN(Statement index, db.Prepare("INSERT INTO message_index(rowid, grams, chars) VALUES(?, ?, ?)"));
  RETURN_IF_ERROR(index.Bind(1, id).BindText(2, row.grams).BindText(3, row.chars).Run());

  ASSIGN_OR_RETURN(Statement touch, db.Prepare("UPDATE conversations SET updated_at = ? WHERE id = ?"));
  RETURN_IF_ERROR(touch.Bind(1, now).Bind(2, conversation_id).Run());
  if (untitled && message.role == "user") {
    ASSIGN_OR_RETURN(Statement title, db.Prepare("UPDATE conversations SET title = ? WHERE id = ?"));
    RETURN_IF_ERROR(impl_->BindField(title, 1, TitleFrom(message.content), ConversationAad(conversation_id, "title")));
    RETURN_IF_ERROR(title.Bind(2, conversation_id).Run());
  }
  RETURN_IF_ERROR(tx.Commit());
  return id;
}

Result<std::vector<ConversationSummary>> HistoryStore::List() {
  ASSIGN_OR_RETURN(Statement stmt, impl_->db->Prepare(
      "SELECT c.id, c.title, c.model, c.created_at, c.updated_at,"
      " (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id)"
      " FROM conversations c ORDER BY c.updated_at DESC, c.id DESC"));
  std::vector<ConversationSummary> out;
  for (;;) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(ConversationSummary s, impl_->Summary(stmt));
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<SearchHit>> HistoryStore::Search(std::string_view text, int limit) {
  const std::vector<history::QueryTerm> terms = history::TokenizeQuery(text);
  if (terms.empty()) {
    return Status::Error(StatusCode::kInvalidArgument, "the search text has no word and no Chinese, Japanese or Korean character");
  }
  ASSIGN_OR_RETURN(Statement stmt, impl_->db->Prepare(
      "SELECT m.id, m.conversation_id, m.seq, m.role, m.content, m.created_at, c.title"
      " FROM message_index JOIN messages m ON m.id = message_index.rowid"
      " JOIN conversations c ON c.id = m.conversation_id"
      " WHERE message_index MATCH ? ORDER BY message_index.rank, m.id DESC LIMIT ?"));
  stmt.BindText(1, history::MatchExpression(terms, impl_->k())).Bind(2, limit > 0 ? limit : -1);
  std::vector<SearchHit> out;
  for (;;) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    SearchHit hit;
    hit.message_id = stmt.Int(0);
    hit.conversation_id = stmt.Int(1);
    hit.role = stmt.Bytes(3);
    ASSIGN_OR_RETURN(std::string content, impl_->ReadField(stmt, 4, MessageAad(hit.conversation_id, stmt.Int(2))));
    hit.snippet = Snippet(content, terms);
    hit.created_at = stmt.Int(5);
    ASSIGN_OR_RETURN(hit.title, impl_->ReadField(stmt, 6, ConversationAad(hit.conversation_id, "title")));
    out.push_back(std::move(hit));
  }
  return out;
}

Result<StoredConversation> HistoryStore::Get(int64_t conversation_id) {
  Db& db = *impl_->db;
  StoredConversation out;
  {
    ASSIGN_OR_RETURN(Statement stmt, db.Prepare(
        "SELECT c.id, c.title, c.model, c.created_at, c.updated_at,"
        " (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id), c.system"
        " FROM conversations c WHERE c.id = ?"));
    stmt.Bind(1, conversation_id);
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return NoConversation(conversation_id);
    ASSIGN_OR_RETURN(out.summary, impl_->Summary(stmt));
    ASSIGN_OR_RETURN(out.system, impl_->ReadField(stmt, 6, ConversationAad(conversation_id, "system")));
  }
  ASSIGN_OR_RETURN(Statement stmt, db.Prepare(
      "SELECT id, seq, role, content, created_at FROM messages WHERE conversation_id = ? ORDER BY seq"));
  stmt.Bind(1, conversation_id);
  for (;;) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    StoredMessage m;
    m.id = stmt.Int(0);
    m.role = stmt.Bytes(2);
    ASSIGN_OR_RETURN(m.content, impl_->ReadField(stmt, 3, MessageAad(conversation_id, stmt.Int(1))));
    m.created_at = stmt.Int(4);
    out.messages.push_back(std::move(m));
  }
  return out;
}

Status HistoryStore::Remove(int64_t conversation_id) {
  Db& db = *impl_->db;
  {
    ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db));
    ASSIGN_OR_RETURN(Statement unindex, db.Prepare(
        "DELETE FROM message_index WHERE rowid IN (SELECT id FROM messages WHERE conversation_id = ?)"));
    RETURN_IF_ERROR(unindex.Bind(1, conversation_id).Run());
    ASSIGN_OR_RETURN(Statement messages, db.Prepare("DELETE FROM messages WHERE conversation_id = ?"));
    RETURN_IF_ERROR(messages.Bind(1, conversation_id).Run());
    ASSIGN_OR_RETURN(Statement conversation, db.Prepare("DELETE FROM conversations WHERE id = ?"));
    RETURN_IF_ERROR(conversation.Bind(1, conversation_id).Run());
    if (db.changes() == 0) return NoConversation(conversation_id);
    // FTS5 records a deletion as a marker beside the old tokens; merging the segments drops both.
    RETURN_IF_ERROR(db.Exec("INSERT INTO message_index(message_index) VALUES('optimize')"));
    RETURN_IF_ERROR(tx.Commit());
  }
  // The zeroed pages are in the WAL; copying them into the file and emptying the WAL overwrites the
  // old text there too. Best effort: a reader in another process can keep a checkpoint from finishing.
  (void)db.Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  return Status::Ok();
}

Result<std::string> HistoryStore::ExportMarkdown(int64_t conversation_id) {
  ASSIGN_OR_RETURN(StoredConversation c, Get(conversation_id));
  std::string out = "# " + (c.summary.title.empty() ? "Conversation " + std::to_string(c.summary.id) : c.summary.title) + "\n\n";
  out += "- conversation: " + std::to_string(c.summary.id) + "\n";
  if (!c.summary.model.empty()) out += "- model: " + c.summary.model + "\n";
  out += "- created: " + IsoTime(c.summary.created_at) + "\n";
  out += "- updated: " + IsoTime(c.summary.updated_at) + "\n";
  if (!c.system.empty()) out += "\n## system\n\n" + c.system + "\n";
  for (const StoredMessage& m : c.messages) out += "\n## " + m.role + "\n\n" + m.content + "\n";
  return out;
}

Result<std::string> HistoryStore::ExportJson(int64_t conversation_id) {
  ASSIGN_OR_RETURN(StoredConversation c, Get(conversation_id));
  nlohmann::json j;
  j["id"] = c.summary.id;
  j["title"] = c.summary.title;
  j["model"] = c.summary.model;
  j["system"] = c.system;
  j["created_at"] = IsoTime(c.summary.created_at);
  j["updated_at"] = IsoTime(c.summary.updated_at);
  j["messages"] = nlohmann::json::array();
  for (const StoredMessage& m : c.messages) {
    j["messages"].push_back({{"role", m.role}, {"content", m.content}, {"created_at", IsoTime(m.created_at)}});
  }
  // Invalid UTF-8 (a model can emit broken bytes) becomes U+FFFD rather than an exception.
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace gemlet
