// The CLI's side of the history store: where it lives, the key file, and the recorder that keeps
// a chat's turns once the user asks (chat --history, /keep, history resume).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "gemlet/gemlet.hpp"
#include "gemlet/history.hpp"

namespace gemlet::cli {

struct HistoryFlags {
  std::string data_dir;  // empty: DefaultDataDir()
  std::string key_file;  // empty: $GEMLET_HISTORY_KEY_FILE, else a plaintext store
};
// --data-dir DIR and --key-file FILE.
void AddHistoryStoreFlags(CLI::App& app, HistoryFlags* flags);

// $XDG_DATA_HOME/gemlet, else ~/.local/share/gemlet ("" when neither is known).
std::string DefaultDataDir();
// DIR/conversations.db ("" when there is no folder to put it in).
std::string HistoryPath(const HistoryFlags& flags);
// Opens the store; `create`: make the folder (owner-only) and the store when missing, else a
// missing store is an error that says how to make one.
Result<std::unique_ptr<HistoryStore>> OpenHistory(const HistoryFlags& flags, bool create);

// Keeps a chat in the store from the moment it is asked to: Keep saves what was said so far and
// makes every later turn saved too; a resumed conversation goes on where it was stored.
class ChatRecorder {
 public:
  ChatRecorder(HistoryFlags flags, std::string model) : flags_(std::move(flags)), model_(std::move(model)) {}

  bool keeping() const { return keeping_; }
  int64_t conversation_id() const { return id_; }  // 0: nothing stored yet

  // /keep and --history: opens the store (creating it) and saves the messages so far (with none
  // yet, the first turn makes the stored conversation).
  Status Keep(const Conversation& chat, const std::string& system);
  // --resume ID: loads the stored conversation into `chat` (its system message too, unless
  // `system` is set), and goes on saving into it.
  Status Resume(int64_t id, Conversation& chat, std::string* system);
  // After an answer: saves the turn (the last user message and its answer).
  Status RecordTurn(const Conversation& chat, const std::string& system);
  // /reset and /load: the next turn starts another stored conversation (when keeping).
  void StartOver() { id_ = 0; }

 private:
  Status Append(const Message& m);

  HistoryFlags flags_;
  std::string model_;
  std::unique_ptr<HistoryStore> store_;
  bool keeping_ = false;
  int64_t id_ = 0;  // the stored conversation; 0: none yet
};

}  // namespace gemlet::cli
