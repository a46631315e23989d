// Opening the history store from the CLI's flags, and saving a chat's turns into it.
#include "chat_history.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gemlet::cli {
namespace {

constexpr char kKeyFileVariable[] = "GEMLET_HISTORY_KEY_FILE";

// The passphrase: the key file's contents without a final line break.
Result<std::string> ReadKey(const HistoryFlags& flags) {
  std::string path = flags.key_file;
  if (path.empty()) {
    const char* env = std::getenv(kKeyFileVariable);
    if (env == nullptr || *env == '\0') return std::string();
    path = env;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot read the history key file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  std::string key = text.str();
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (key.empty()) return Status::Error("the history key file '" + path + "' is empty");
  return key;
}

}  // namespace

void AddHistoryStoreFlags(CLI::App& app, HistoryFlags* flags) {
  app.add_option("--data-dir", flags->data_dir,
                 "folder of the history store, conversations.db (default: $XDG_DATA_HOME/gemlet, else ~/.local/share/gemlet)");
  app.add_option("--key-file", flags->key_file,
                 std::string("passphrase of an encrypted history store, read from FILE (default: $") + kKeyFileVariable +
                     "); a new store made with one is encrypted");
}

std::string DefaultDataDir() {
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && *xdg == '/') return std::string(xdg) + "/gemlet";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') return std::string(home) + "/.local/share/gemlet";
  return std::string();
}

std::string HistoryPath(const HistoryFlags& flags) {
  const std::string dir = flags.data_dir.empty() ? DefaultDataDir() : flags.data_dir;
  return dir.empty() ? std::string() : dir + "/" + HistoryStore::kFileName;
}

Result<std::unique_ptr<HistoryStore>> OpenHistory(const HistoryFlags& flags, bool create) {
  const std::string path = HistoryPath(flags);
  if (path.empty()) return Status::Error("no folder for the history store: set --data-dir (no $HOME)");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (!create) {
      return Status::Error("no history store at " + path + " ('gemlet chat --history' or /keep in a chat saves one)");
    }
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (!std::filesystem::exists(dir, ec)) {
      if (!std::filesystem::create_directories(dir, ec)) return Status::Error("cannot create " + dir.string() + ": " + ec.message());
      std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
    }
  }
  auto key = ReadKey(flags);
  if (!key.ok()) return key.status();
  HistoryOptions options;
  options.key = std::move(key).value();
  auto store = HistoryStore::Open(path, options);
  if (!store.ok() && store.message().find(" is encrypted") != std::string::npos) {
    return Status::Error(store.message() + " (--key-file FILE or $" + kKeyFileVariable + ")");
  }
  return store;
}

Status ChatRecorder::Keep(const Conversation& chat, const std::string& system) {
  if (!store_) {
    auto store = OpenHistory(flags_, /*create=*/true);
    if (!store.ok()) return store.status();
    store_ = std::move(store).value();
  }
  keeping_ = true;
  const std::vector<Message> messages = chat.messages();
  // Already kept; or nothing said yet: the first turn creates it (no empty conversations).
  if (id_ != 0 || messages.empty()) return Status::Ok();
  auto id = store_->CreateConversation("", system, model_);
  if (!id.ok()) return id.status();
  id_ = *id;
  for (const Message& m : messages) {
    if (Status s = Append(m); !s.ok()) return s;
  }
  return Status::Ok();
}

Status ChatRecorder::Resume(int64_t id, Conversation& chat, std::string* system) {
  auto store = OpenHistory(flags_, /*create=*/false);
  if (!store.ok()) return store.status();
  auto stored = (*store)->Get(id);
  if (!stored.ok()) return stored.status();
  std::vector<Message> messages;
  for (const StoredMessage& m : stored->messages) {
    if (m.role == "system") continue;  // a conversation's system message is its own field
    messages.push_back({m.role, m.content});
  }
  if (Status s = chat.SetMessages(std::move(messages)); !s.ok()) return s;
  if (system->empty()) *system = stored->system;
  chat.SetSystem(*system);
  store_ = std::move(store).value();
  keeping_ = true;
  id_ = id;
  return Status::Ok();
}

Status ChatRecorder::RecordTurn(const Conversation& chat, const std::string& system) {
  if (!keeping_) return Status::Ok();
  if (id_ == 0) return Keep(chat, system);  // after /reset or /load: a new stored conversation
  const std::vector<Message> messages = chat.messages();
  const size_t n = messages.size();
  if (n < 2 || messages[n - 2].role != "user" || messages[n - 1].role != "assistant") return Status::Ok();
  if (Status s = Append(messages[n - 2]); !s.ok()) return s;
  return Append(messages[n - 1]);
}

Status ChatRecorder::Append(const Message& m) {
  // The store keeps text: a message with images keeps its words, each image as a mark.
  Message kept{m.role, m.content};
  for (const ContentPart& part : m.parts) {
    kept.content += part.media ? (part.media->kind == MediaKind::kAudio ? "[audio]\n" : "[image]\n") : part.text;
  }
  auto id = store_->AppendMessage(id_, kept);
  return id.ok() ? Status::Ok() : id.status();
}

}  // namespace gemlet::cli
