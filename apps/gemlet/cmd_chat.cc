// `gemlet chat`: an interactive multi-turn conversation. The KV cache carries the conversation, so
// each turn only evaluates its new tokens. Line editing and history come from libedit.
#include <editline/readline.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <optional>
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

int RunChat(int argc, char** argv) {
  CLI::App app{"Chat with a model, turn by turn"};
  app.name("gemlet chat");
  ModelOptions mo;
  GenerationFlags gf;
  std::string system, session_path;
  bool summarize = false;
  AddModelOptions(app, &mo);
  AddGenerationOptions(app, &gf);
  app.add_option("--system", system, "system message");
  // Nothing is recorded unless asked: --history, /keep or --resume.
  bool keep_history = false;
  int64_t resume_id = 0;
  HistoryFlags history_flags;
  app.add_flag("--history", keep_history, "keep this conversation in the history store from the start (gemlet history)");
  app.add_option("--resume", resume_id, "go on with kept conversation ID (gemlet history list), keeping its new turns")
      ->check(Positive());
  AddHistoryStoreFlags(app, &history_flags);
  app.add_option("--session", session_path,
                 "resume the conversation saved in FILE (KV cache included: nothing is evaluated again) and save it "
                 "there on exit, on /save, on SIGTERM and on SIGTSTP (Ctrl-Z)");
  app.add_flag("--summarize-dropped", summarize,
               "when old turns are dropped to stay within the context, the model first writes a short summary of "
               "them, which the conversation keeps");
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (std::string err = SettleSpeculation(&gf); !err.empty()) return UsageError(err);
  const GenerateOptions go = MakeGenerateOptions(gf);
  if (std::string err = Validate(go); !err.empty()) return UsageError(err);
  if (std::string err = Validate(mo.kernels); !err.empty()) return UsageError(err);
  if (resume_id > 0 && !session_path.empty()) return UsageError("--resume and --session do not go together");
  const bool interactive = ::isatty(STDIN_FILENO) == 1;

  auto loaded = LoadForGeneration(mo);
  if (!loaded.ok()) return Fail(loaded.message());
  if (Status s = AttachDraftModel(gf, mo, &loaded.value()); !s.ok()) return Fail(s.message());
  const LoadedModel& m = loaded.value();
  ConversationOptions co;
  co.system = system;
  co.thinking = gf.think;
  co.summarize_dropped = summarize;
  auto created = OpenConversation(m, co);
  if (!created.ok()) return Fail(created.message());
  Conversation& chat = **created;
  if (gf.stats) std::fputs(chat.memory_plan().text.c_str(), stderr);
  if (!session_path.empty() && ::access(session_path.c_str(), F_OK) == 0) {
    if (Status s = chat.LoadState(session_path); !s.ok()) return Fail(s.message() + " (move it away to start afresh)");
    std::fprintf(stderr, "(resumed %zu messages, %d tokens, from %s)\n", chat.messages().size(), chat.n_past(),
                 session_path.c_str());
  }
  ChatRecorder recorder(history_flags, m.engine->info().name.empty() ? m.engine->info().architecture : m.engine->info().name);
  if (resume_id > 0) {
    if (Status s = recorder.Resume(resume_id, chat, &system); !s.ok()) return Fail(s);
    std::fprintf(stderr, "(resumed conversation %lld: %zu messages; new turns are kept)\n", static_cast<long long>(resume_id),
                 chat.messages().size());
  } else if (keep_history) {
    if (Status s = recorder.Keep(chat, system); !s.ok()) return Fail(s);
  }
  auto save_session = [&]() {
    if (session_path.empty()) return true;
    if (Status s = chat.SaveState(session_path); !s.ok()) {
      std::fprintf(stderr, "gemlet: %s\n", s.message().c_str());
      return false;
    }
    return true;
  };

  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read returns so the prompt can recover
  sigaction(SIGINT, &sa, nullptr);
  if (!session_path.empty()) {
    struct sigaction save {};
    save.sa_handler = OnSaveSignal;
    sigemptyset(&save.sa_mask);
    save.sa_flags = 0;
    sigaction(SIGTERM, &save, nullptr);
    sigaction(SIGTSTP, &save, nullptr);
  }

  // While the user types the first message, one thread packs the weights for the kernels: what the
  // first reply would otherwise wait for (seconds for a few GB). When the message comes it stops
  // after the matrix in hand, and the reply packs whatever is left on all threads.
  struct BackgroundPrepare {
    std::atomic<bool> stop{false};
    std::thread thread;
    void Finish() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
    ~BackgroundPrepare() { Finish(); }
  } prepare;
  if (interactive) {
    prepare.thread = std::thread([engine = m.engine, stop = &prepare.stop] { engine->PrepareWeights(stop, 1); });
  }

  if (interactive) {
    const ModelInfo& info = m.engine->info();
    std::fprintf(stderr, "gemlet chat: %s (%s format). /help for commands, Ctrl-D to leave.\n",
                 info.name.empty() ? info.architecture.c_str() : info.name.c_str(), info.chat_format.c_str());
  }
  const bool color = StdoutIsTerminal();
  Reply last;
  bool have_last = false;
  std::string input;
  // A flagged SIGTERM or SIGTSTP: save; then leave (true) or stop for real and go on when continued.
  auto handle_signal = [&]() {
    const int sig = g_signal.exchange(0);
    if (sig == 0) return false;
    save_session();
    if (sig == SIGTERM) return true;
    signal(SIGTSTP, SIG_DFL);
    raise(SIGTSTP);
    struct sigaction again {};
    again.sa_handler = OnSaveSignal;
    sigemptyset(&again.sa_mask);
    sigaction(SIGTSTP, &again, nullptr);
    return false;
  };
  for (;;) {
    if (handle_signal()) return 0;  // one that came while an answer was written
    const bool more = ReadInput(interactive, &input);
    const bool signalled = g_signal.load() != 0;
    if (handle_signal()) return 0;
    if (!more) {
      if (signalled) continue;  // stopped and continued at the prompt
      break;
    }
    if (input.empty()) continue;
    if (input[0] == '/') {
      const size_t space = input.find(' ');
      const std::string cmd = input.substr(0, space);
      const std::string arg = space == std::string::npos ? "" : input.substr(space + 1);
      if (cmd == "/exit" || cmd == "/quit") break;
      if (cmd == "/help") {
        std::fputs(kHelp, stderr);
      } else if (cmd == "/reset") {
        chat.Reset();
        recorder.StartOver();
        std::fputs("(new conversation)\n", stderr);
      } else if (cmd == "/system") {
        chat.SetSystem(arg);
        system = arg;
        std::fprintf(stderr, "(system message %s)\n", arg.empty() ? "removed" : "set");
      } else if (cmd == "/think") {
        if (arg != "on" && arg != "off") {
          std::fputs("usage: /think on|off\n", stderr);
        } else {
          chat.SetThinking(arg == "on");
          std::fprintf(stderr, "(thinking %s)\n", arg.c_str());
        }
      } else if (cmd == "/save" && arg.empty() && !session_path.empty()) {
        prepare.Finish();
        if (save_session()) std::fprintf(stderr, "(session saved to %s)\n", session_path.c_str());
      } else if (cmd == "/save" || cmd == "/load") {
        if (arg.empty()) {
          std::fprintf(stderr, "usage: %s FILE\n", cmd.c_str());
          continue;
        }
        prepare.Finish();
        Status s = cmd == "/save" ? chat.Save(arg) : chat.Load(arg);
        if (s.ok()) std::fprintf(stderr, "(%s %s: %zu messages)\n", cmd == "/save" ? "saved to" : "loaded", arg.c_str(), chat.messages().size());
        else std::fprintf(stderr, "gemlet: %s\n", s.message().c_str());
        if (s.ok() && cmd == "/load") recorder.StartOver();
      } else if (cmd == "/keep") {
        if (Status s = recorder.Keep(chat, system); !s.ok()) std::fprintf(stderr, "gemlet: %s\n", s.message().c_str());
        else if (recorder.conversation_id() == 0) std::fputs("(keeping this conversation from its first answer)\n", stderr);
        else std::fprintf(stderr, "(kept as conversation %lld)\n", static_cast<long long>(recorder.conversation_id()));
      } else if (cmd == "/stats") {
        if (!have_last) {
          std::fputs("(no answer yet)\n", stderr);
        } else {
          std::fprintf(stderr, "last turn: %d prompt tokens evaluated, %d reused from the cache; context %d/%d\n",
                       last.stats.prompt_tokens - last.stats.cached_tokens, last.stats.cached_tokens, chat.n_past(),
                       chat.n_ctx());
          PrintStats(*m.engine, last);
        }
      } else {
        std::fprintf(stderr, "unknown command %s (/help lists them)\n", cmd.c_str());
      }
      continue;
    }
    prepare.Finish();
    g_interrupted.store(false);
    g_answering.store(&chat);
    auto result = chat.Send(input, go, [&](ChunkKind kind, std::string_view text) {
      return PrintChunk(gf, color, kind, text);
    });
    g_answering.store(nullptr);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    if (!result.ok()) {
      std::fprintf(stderr, "gemlet: %s\n", result.message().c_str());
      continue;
    }
    last = std::move(result).value();
    have_last = true;
    if (Status s = recorder.RecordTurn(chat, system); !s.ok()) std::fprintf(stderr, "gemlet: history: %s\n", s.message().c_str());
    if (last.stats.dropped_messages > 0) {
      std::fprintf(stderr, "(the %d oldest messages, %d tokens, were dropped to stay within the context of %d%s)\n",
                   last.stats.dropped_messages, last.stats.dropped_tokens, chat.n_ctx(),
                   last.stats.reevaluated_tokens > 0 ? "; the rest was evaluated again" : "");
    }
    if (last.stats.summarized_messages > 0) {
      std::fprintf(stderr, "(%d dropped messages summarized in %d tokens; the summary stays in the conversation)\n",
                   last.stats.summarized_messages, last.stats.summary_tokens);
    }
    if (last.stats.stop == StopReason::kCancelled) std::fputs("(stopped)\n", stderr);
    if (gf.stats) PrintStats(*m.engine, last);
  }
  if (interactive) std::fputs("\n", stdout);
  return save_session() ? 0 : kInputError;
}

}  // namespace

GEMLET_COMMAND("chat", "talk with a model turn by turn (reuses the KV cache across turns)", RunChat);

}  // namespace gemlet::cli
