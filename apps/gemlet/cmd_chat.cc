// `gemlet chat`: an interactive multi-turn conversation. The KV cache carries the conversation, so
// each turn only evaluates its new tokens. Line editing and history come from libedit.
#include <editline/readline.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "chat_history.h"
#include "cli_common.h"
#include "command.h"

namespace gemlet::cli {
namespace {

// Ctrl-C: at the prompt it drops the line; while an answer is written it cancels it (Cancel only
// stores an atomic flag, which a signal handler may do).
std::atomic<bool> g_interrupted{false};
std::atomic<Conversation*> g_answering{nullptr};
void OnSigint(int) {
  g_interrupted.store(true);
  if (Conversation* c = g_answering.load()) c->Cancel();
}
// SIGTERM and SIGTSTP with --session: the handler only flags (and stops an answer being written);
// the chat loop saves the session, then exits (SIGTERM) or stops itself (SIGTSTP).
std::atomic<int> g_signal{0};
void OnSaveSignal(int sig) {
  g_signal.store(sig);
  if (Conversation* c = g_answering.load()) c->Cancel();
}

const char* kHelp =
    "commands:\n"
    "  /reset          start a new conversation (keeps the system message)\n"
    "  /system TEXT    set the system message (empty TEXT removes it)\n"
    "  /think on|off   Gemma 4: thinking before answering\n"
    "  /save FILE      save the conversation as JSON (no FILE, with --session: save the session now)\n"
    "  /load FILE      load a saved conversation\n"
    "  /image FILE     attach an image to the next message (needs --mmproj; repeatable)\n"
    "  /audio FILE     attach an audio clip to the next message (needs --mmproj; repeatable)\n"
    "  /lora [FILE[:SCALE] ...]  run the next turns with these LoRA adapters (none: the base model;\n"
    "                  no argument: list the ones in use)\n"
    "  /keep           keep this conversation in the history, and every turn after (gemlet history)\n"
    "  /stats          speeds and memory of the last answer\n"
    "  /help           this list\n"
    "  /exit           leave (or Ctrl-D)\n"
    "Ctrl-C stops the answer being written; a line ending in \\ continues on the next line.\n";

// Reads one (possibly continued) line; false at end of input.
bool ReadInput(bool interactive, std::string* out) {
  out->clear();
  for (bool first = true;; first = false) {
    std::string line;
    if (interactive) {
      g_interrupted.store(false);
      char* raw = readline(first ? "> " : ". ");
      if (raw == nullptr) {
        if (g_signal.load() != 0) return false;  // SIGTERM or SIGTSTP: the loop saves
        if (g_interrupted.load()) {  // Ctrl-C at the prompt: drop the line, stay in the chat
          std::fputs("\n", stdout);
          out->clear();
          first = true;
          continue;
        }
        return false;
      }
      line = raw;
      std::free(raw);
    } else if (!std::getline(std::cin, line)) {
      return !out->empty();
    }
    const bool continued = !line.empty() && line.back() == '\\';
    if (continued) line.pop_back();
    *out += line;
    if (!continued) break;
    *out += "\n";
  }
  if (interactive && !out->empty()) add_history(out->c_str());
  return true;
}

struct ChatFlags {
  ModelOptions model;
  GenerationFlags generation;
  std::string system, session_path;
  bool summarize = false, keep_history = false;
  int64_t resume_id = 0;
  HistoryFlags history;
  MediaFlags media;  // --image, --audio: with the first message
};

void AddChatFlags(CLI::App& app, ChatFlags* f) {
  AddModelOptions(app, &f->model);
  AddGenerationOptions(app, &f->generation);
  app.add_option("--system", f->system, "system message");
  AddMediaFlags(app, &f->media);
  // Nothing is recorded unless asked: --history, /keep or --resume.
  app.add_flag("--history", f->keep_history, "keep this conversation in the history store from the start (gemlet history)");
  app.add_option("--resume", f->resume_id, "go on with kept conversation ID (gemlet history list), keeping its new turns")
      ->check(Positive());
  AddHistoryStoreFlags(app, &f->history);
  app.add_option("--session", f->session_path,
                 "resume the conversation saved in FILE (KV cache included: nothing is evaluated again) and save it "
                 "there on exit, on /save, on SIGTERM and on SIGTSTP (Ctrl-Z)");
  app.add_flag("--summarize-dropped", f->summarize,
               "when old turns are dropped to stay within the context, the model first writes a short summary of "
               "them, which the conversation keeps");
}

// Ctrl-C always; SIGTERM and SIGTSTP when a session file is kept (the loop saves it first).
void InstallChatSignals(bool with_session) {
  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read returns so the prompt can recover
  sigaction(SIGINT, &sa, nullptr);
  if (with_session) {
    struct sigaction save {};
    save.sa_handler = OnSaveSignal;
    sigemptyset(&save.sa_mask);
    save.sa_flags = 0;
    sigaction(SIGTERM, &save, nullptr);
    sigaction(SIGTSTP, &save, nullptr);
  }
}

// While the user types the first message, one thread packs the weights for the kernels: what the
// first reply would otherwise wait for (seconds for a few GB). When the message comes it stops
// after the matrix in hand, and the reply packs whatever is left on all threads.
struct BackgroundPrepare {
  std::atomic<bool> stop{false};
  std::thread thread;
  void Start(std::shared_ptr<Engine> engine) {
    thread = std::thread([engine, stop = &stop] { engine->PrepareWeights(stop, 1); });
  }
  void Finish() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
  ~BackgroundPrepare() { Finish(); }
};

// The conversation's loop: lines in, commands or answers out, signals saved on.
class ChatLoop {
 public:
  ChatLoop(ChatFlags& f, const LoadedModel& m, Conversation& chat, ChatRecorder& recorder, bool interactive,
           std::vector<ContentPart> first_media)
      : f_(f), m_(m), chat_(chat), recorder_(recorder), interactive_(interactive),
        go_(MakeGenerateOptions(f.generation)), pending_media_(std::move(first_media)) {
    if (interactive_) prepare_.Start(m.engine);
  }

  // Until the input ends, /exit or SIGTERM; the exit code.
  int Run() {
    if (interactive_) {
      const ModelInfo& info = m_.engine->info();
      std::fprintf(stderr, "gemlet chat: %s (%s format). /help for commands, Ctrl-D to leave.\n",
                   info.name.empty() ? info.architecture.c_str() : info.name.c_str(), info.chat_format.c_str());
    }
    std::string input;
    for (;;) {
      if (HandleSignal()) return 0;  // one that came while an answer was written
      const bool more = ReadInput(interactive_, &input);
      const bool signalled = g_signal.load() != 0;
      if (HandleSignal()) return 0;
      if (!more) {
        if (signalled) continue;  // stopped and continued at the prompt
        break;
      }
      if (input.empty()) continue;
      if (input[0] == '/') {
        if (!Command(input)) break;
        continue;
      }
      Answer(input);
    }
    if (interactive_) std::fputs("\n", stdout);
    return SaveSession() ? 0 : kInputError;
  }

 private:
  bool SaveSession() {
    if (f_.session_path.empty()) return true;
    if (Status s = chat_.SaveState(f_.session_path); !s.ok()) {
      std::fprintf(stderr, "gemlet: %s\n", s.message().c_str());
      return false;
    }
    return true;
  }

  // A flagged SIGTERM or SIGTSTP: save; then leave (true) or stop for real and go on when continued.
  bool HandleSignal() {
    const int sig = g_signal.exchange(0);
    if (sig == 0) return false;
    SaveSession();
    if (sig == SIGTERM) return true;
    signal(SIGTSTP, SIG_DFL);
    raise(SIGTSTP);
    struct sigaction again {};
    again.sa_handler = OnSaveSignal;
    sigemptyset(&again.sa_mask);
    sigaction(SIGTSTP, &again, nullptr);
    return false;
  }

  // A /command; false for /exit.
  bool Command(const std::string& input) {
    const size_t space = input.find(' ');
    const std::string cmd = input.substr(0, space);
    const std::string arg = space == std::string::npos ? "" : input.substr(space + 1);
    if (cmd == "/exit" || cmd == "/quit") return false;
    if (cmd == "/help") {
      std::fputs(kHelp, stderr);
    } else if (cmd == "/reset") {
      chat_.Reset();
      recorder_.StartOver();
      std::fputs("(new conversation)\n", stderr);
    } else if (cmd == "/system") {
      chat_.SetSystem(arg);
      f_.system = arg;
      std::fprintf(stderr, "(system message %s)\n", arg.empty() ? "removed" : "set");
    } else if (cmd == "/think") {
      if (arg != "on" && arg != "off") {
        std::fputs("usage: /think on|off\n", stderr);
      } else {
        chat_.SetThinking(arg == "on");
        std::fprintf(stderr, "(thinking %s)\n", arg.c_str());
      }
    } else if (cmd == "/save" && arg.empty() && !f_.session_path.empty()) {
      prepare_.Finish();
      if (SaveSession()) std::fprintf(stderr, "(session saved to %s)\n", f_.session_path.c_str());
    } else if (cmd == "/save" || cmd == "/load") {
      SaveOrLoad(cmd, arg);
    } else if (cmd == "/image" || cmd == "/audio") {
      Attach(cmd, arg);
    } else if (cmd == "/lora") {
      Lora(arg);
    } else if (cmd == "/keep") {
      if (Status s = recorder_.Keep(chat_, f_.system); !s.ok()) std::fprintf(stderr, "gemlet: %s\n", s.message().c_str());
      else if (recorder_.conversation_id() == 0) std::fputs("(keeping this conversation from its first answer)\n", stderr);
      else std::fprintf(stderr, "(kept as conversation %lld)\n", static_cast<long long>(recorder_.conversation_id()));
    } else if (cmd == "/stats") {
      if (!have_last_) {
        std::fputs("(no answer yet)\n", stderr);
      } else {
        std::fprintf(stderr, "last turn: %d prompt tokens evaluated, %d reused from the cache; context %d/%d\n",
                     last_.stats.prompt_tokens - last_.stats.cached_tokens, last_.stats.cached_tokens, chat_.n_past(),
                     chat_.n_ctx());
        PrintStats(*m_.engine, last_);
      }
    } else {
      std::fprintf(stderr, "unknown command %s (/help lists them)\n", cmd.c_str());
    }
    return true;
  }

  // /lora: lists the adapters in use, or switches to the ones named ("none" or "-": the base model).
  // Switching loads nothing but the new adapters; the next turn evaluates the conversation again.
  void Lora(const std::string& arg) {
    if (arg.empty()) {
      const std::vector<AdapterUse> in_use = chat_.adapters();
      if (in_use.empty()) std::fputs("(no LoRA adapters: the base model)\n", stderr);
      for (const AdapterUse& u : in_use) {
        std::fprintf(stderr, "(%s: %s, rank %d, scale %g)\n", u.adapter->name().c_str(), u.adapter->path().c_str(),
                     u.adapter->rank(), static_cast<double>(u.scale));
      }
      return;
    }
    std::vector<std::string> specs;
    std::istringstream words(arg);
    for (std::string w; words >> w;) {
      if (w != "none" && w != "-") specs.push_back(w);
    }
    Result<std::vector<AdapterUse>> adapters = LoadAdapters(*m_.engine, specs, f_.model.lora_any_base);
    if (!adapters.ok()) {
      std::fprintf(stderr, "gemlet: %s\n", adapters.message().c_str());
      return;
    }
    if (Status s = chat_.SetAdapters(adapters.value()); !s.ok()) {
      std::fprintf(stderr, "gemlet: %s\n", s.message().c_str());
      return;
    }
    std::fprintf(stderr, "(%zu LoRA adapter%s from the next turn)\n", adapters->size(), adapters->size() == 1 ? "" : "s");
  }

  // Encodes an image or clip for the next message (now: a bad file is said at once, not after typing).
  void Attach(const std::string& cmd, const std::string& path) {
    if (path.empty()) {
      std::fprintf(stderr, "usage: %s FILE\n", cmd.c_str());
      return;
    }
    MediaFlags one;
    (cmd == "/image" ? one.images : one.audio).push_back(path);
    auto parts = EncodeMedia(*m_.engine, f_.model, one);
    if (!parts.ok()) {
      std::fprintf(stderr, "gemlet: %s\n", parts.message().c_str());
      return;
    }
    pending_media_.push_back(parts.value()[0]);
    const EncodedMedia& media = *parts.value()[0].media;
    int soft_tokens = media.n_tokens;
    for (const auto& crop : media.crops) soft_tokens += crop->n_tokens;  // --pan-and-scan
    std::fprintf(stderr, "(%s %s attached to the next message: %d soft tokens%s)\n", cmd == "/image" ? "image" : "clip",
                 path.c_str(), soft_tokens,
                 media.crops.empty() ? "" : (", with " + std::to_string(media.crops.size()) + " crops").c_str());
  }

  void SaveOrLoad(const std::string& cmd, const std::string& arg) {
    if (arg.empty()) {
      std::fprintf(stderr, "usage: %s FILE\n", cmd.c_str());
      return;
    }
    prepare_.Finish();
    Status s = cmd == "/save" ? chat_.Save(arg) : chat_.Load(arg);
    if (s.ok()) std::fprintf(stderr, "(%s %s: %zu messages)\n", cmd == "/save" ? "saved to" : "loaded", arg.c_str(), chat_.messages().size());
    else std::fprintf(stderr, "gemlet: %s\n", s.message().c_str());
    if (s.ok() && cmd == "/load") recorder_.StartOver();
  }

  // One turn: the answer streamed, then what happened to the context, and the history.
  void Answer(const std::string& input) {
    prepare_.Finish();
    g_interrupted.store(false);
    g_answering.store(&chat_);
    const StreamCallback print = [&](ChunkKind kind, std::string_view text) {
      return PrintChunk(f_.generation, color_, kind, text);
    };
    Result<Reply> result = Status::Error("unreachable");
    if (pending_media_.empty()) {
      result = chat_.Send(input, go_, print);
    } else {
      std::vector<ContentPart> parts = std::move(pending_media_);
      pending_media_.clear();
      parts.push_back({input, nullptr});
      result = chat_.Send(parts, go_, print);
    }
    g_answering.store(nullptr);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    if (!result.ok()) {
      std::fprintf(stderr, "gemlet: %s\n", result.message().c_str());
      return;
    }
    last_ = std::move(result).value();
    have_last_ = true;
    if (Status s = recorder_.RecordTurn(chat_, f_.system); !s.ok()) std::fprintf(stderr, "gemlet: history: %s\n", s.message().c_str());
    const GenerationStats& st = last_.stats;
    if (st.dropped_messages > 0) {
      std::fprintf(stderr, "(the %d oldest messages, %d tokens, were dropped to stay within the context of %d%s)\n",
                   st.dropped_messages, st.dropped_tokens, chat_.n_ctx(),
                   st.reevaluated_tokens > 0 ? "; the rest was evaluated again" : "");
    }
    if (st.summarized_messages > 0) {
      std::fprintf(stderr, "(%d dropped messages summarized in %d tokens; the summary stays in the conversation)\n",
                   st.summarized_messages, st.summary_tokens);
    }
    if (st.stop == StopReason::kCancelled) std::fputs("(stopped)\n", stderr);
    if (f_.generation.stats) PrintStats(*m_.engine, last_);
  }

  ChatFlags& f_;
  const LoadedModel& m_;
  Conversation& chat_;
  ChatRecorder& recorder_;
  const bool interactive_;
  const GenerateOptions go_;
  const bool color_ = StdoutIsTerminal();
  BackgroundPrepare prepare_;
  Reply last_;
  bool have_last_ = false;
  std::vector<ContentPart> pending_media_;  // --image, --audio, /image, /audio: for the next message
};

int RunChat(int argc, char** argv) {
  CLI::App app{"Chat with a model, turn by turn"};
  app.name("gemlet chat");
  ChatFlags f;
  AddChatFlags(app, &f);
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (std::string err = SettleSpeculation(&f.generation); !err.empty()) return UsageError(err);
  if (std::string err = Validate(MakeGenerateOptions(f.generation)); !err.empty()) return UsageError(err);
  if (std::string err = Validate(f.model.kernels); !err.empty()) return UsageError(err);
  if (f.resume_id > 0 && !f.session_path.empty()) return UsageError("--resume and --session do not go together");
  const bool interactive = ::isatty(STDIN_FILENO) == 1;

  auto loaded = LoadForGeneration(f.model);
  if (!loaded.ok()) return Fail(loaded.message());
  if (Status s = AttachDraftModel(f.generation, f.model, &loaded.value()); !s.ok()) return Fail(s.message());
  const LoadedModel& m = loaded.value();
  ConversationOptions co;
  co.system = f.system;
  co.thinking = f.generation.think;
  co.summarize_dropped = f.summarize;
  auto created = OpenConversation(m, co);
  if (!created.ok()) return Fail(created.message());
  Conversation& chat = **created;
  if (f.generation.stats) std::fputs(chat.memory_plan().text.c_str(), stderr);
  if (!f.session_path.empty() && ::access(f.session_path.c_str(), F_OK) == 0) {
    if (Status s = chat.LoadState(f.session_path); !s.ok()) return Fail(s.message() + " (move it away to start afresh)");
    std::fprintf(stderr, "(resumed %zu messages, %d tokens, from %s)\n", chat.messages().size(), chat.n_past(),
                 f.session_path.c_str());
  }
  ChatRecorder recorder(f.history, m.engine->info().name.empty() ? m.engine->info().architecture : m.engine->info().name);
  if (f.resume_id > 0) {
    if (Status s = recorder.Resume(f.resume_id, chat, &f.system); !s.ok()) return Fail(s);
    std::fprintf(stderr, "(resumed conversation %lld: %zu messages; new turns are kept)\n",
                 static_cast<long long>(f.resume_id), chat.messages().size());
  } else if (f.keep_history) {
    if (Status s = recorder.Keep(chat, f.system); !s.ok()) return Fail(s);
  }
  if (Status s = SettleMmproj(&f.model); !s.ok()) return Fail(s);
  if (!f.media.empty() && f.model.mmproj.empty()) {
    return UsageError("--image and --audio need the model's towers: --mmproj FILE|NAME (a catalog model pulled by name brings NAME-mmproj)");
  }
  auto first_media = EncodeMedia(*m.engine, f.model, f.media);
  if (!first_media.ok()) return Fail(first_media.message());
  InstallChatSignals(!f.session_path.empty());
  return ChatLoop(f, m, chat, recorder, interactive, std::move(first_media).value()).Run();
}

}  // namespace

GEMLET_COMMAND("chat", "talk with a model turn by turn (reuses the KV cache across turns)", RunChat);

}  // namespace gemlet::cli
