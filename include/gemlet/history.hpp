// gemlet's conversation history store: conversations the user chose to keep, in one SQLite file,
// searchable in Chinese and English, optionally encrypted with the user's passphrase.
//
// Nothing is recorded unless the app asks: the store only holds what is appended to it. It is in the
// gemlet_history library, apart from libgemlet, because it needs SQLite and OpenSSL, which phones
// do not all ship (Android's NDK has neither): an app that keeps no history links nothing extra.
//
// Durability: each AppendMessage is one transaction in a WAL journal synced on commit
// (synchronous=FULL), so a crash or power loss loses at most the message being written.
//
// Encryption (HistoryOptions::key): every text field (titles, system messages, model names, message
// contents) is sealed with AES-256-GCM under a key derived from the passphrase with scrypt, and
// the search index holds keyed hashes (HMAC-SHA256) of the search tokens, never the tokens: no
// plaintext reaches the database, its WAL or its journal. In clear stay the schema, ids, roles,
// timestamps, counts and sizes (a sealed field is its text's length + 28 bytes), and which messages
// share a search token (equal tokens hash alike).
//
// A HistoryStore is one SQLite connection: use it from one thread at a time. Several processes may
// open the same file (writers wait for each other up to a few seconds).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gemlet/gemlet.hpp"
#include "gemlet/status.hpp"

namespace gemlet {

struct HistoryOptions {
  // The user's passphrase. Empty: a plaintext store. A new store opened with a key is encrypted
  // for good; an existing store must be opened with the key it was created with (or none).
  std::string key{};
  // scrypt cost of a new encrypted store, as log2(N) (r = 8, p = 1): 15 takes ~32 MiB and a
  // fraction of a second. Read from the store when it is opened again.
  int kdf_log_n = 15;
};

struct StoredMessage {
  int64_t id = 0;
  std::string role;  // "user", "assistant" (or "system")
  std::string content;
  int64_t created_at = 0;  // Unix seconds
};

struct ConversationSummary {
  int64_t id = 0;
  std::string title;  // the first user message's start unless a title was given
  std::string model;
  int64_t created_at = 0;  // Unix seconds
  int64_t updated_at = 0;
  int message_count = 0;
};

struct StoredConversation {
  ConversationSummary summary;
  std::string system;
  std::vector<StoredMessage> messages;  // in the order they were appended
};

struct SearchHit {
  int64_t conversation_id = 0;
  int64_t message_id = 0;
  std::string title;    // of the conversation
  std::string role;
  std::string snippet;  // the matched text with a few words around it, on one line
  int64_t created_at = 0;
};

class HistoryStore {
 public:
  // The store's file name in an app's data folder (EngineOptions::data_dir).
  static constexpr const char* kFileName = "conversations.db";
  // The schema this build writes; older stores are migrated when opened, newer ones refused.
  static int SchemaVersion();

  // Opens the store at `path`, creating it (mode 0600) when missing. Refused: a file that is not a
  // history store, a schema newer than this build's, a key for a plaintext store, no key or a
  // wrong key for an encrypted one. Nothing is written on a refusal.
  static Result<std::unique_ptr<HistoryStore>> Open(const std::string& path, const HistoryOptions& options = {});
  ~HistoryStore();
  HistoryStore(const HistoryStore&) = delete;
  HistoryStore& operator=(const HistoryStore&) = delete;

  bool encrypted() const;
  int schema_version() const;  // after migration: SchemaVersion()

  // A new, empty conversation; an empty title is taken from its first user message.
  Result<int64_t> CreateConversation(std::string_view title, std::string_view system, std::string_view model);
  // Appends one message (one durable transaction); returns its id.
  Result<int64_t> AppendMessage(int64_t conversation_id, const Message& message);

  Result<std::vector<ConversationSummary>> List();  // most recently updated first
  // Messages that contain every word and every run of Chinese/Japanese/Korean characters of `text`
  // (runs match as written: "天气" finds 今天天气很好; words match whole, any case). Best first.
  Result<std::vector<SearchHit>> Search(std::string_view text, int limit = 50);
  Result<StoredConversation> Get(int64_t conversation_id);
  // Deletes the conversation and its messages, and rewrites the search index and the WAL so that
  // their text does not linger in free pages.
  Status Remove(int64_t conversation_id);

  Result<std::string> ExportMarkdown(int64_t conversation_id);
  // {"id", "title", "model", "system", "created_at", "updated_at", "messages": [{"role", "content",
  // "created_at"}]}: Conversation::Load reads it (`/load FILE` in gemlet chat).
  Result<std::string> ExportJson(int64_t conversation_id);

  struct Impl;

 private:
  explicit HistoryStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gemlet
