// The public Conversation (gemlet.hpp) over runtime::ChatSession, and the engine's lifecycle
// signals that reach every live conversation (memory warnings, going to the background).
#include <sys/stat.h>

#include "gemlet/gemlet.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "api/api_internal.h"
#include "model/lora.h"
#include "runtime/chat.h"
#include "runtime/memory_governor.h"
#include "runtime/memory_report.h"

namespace gemlet {

namespace {
// The pressure Linux PSI shows now (the app's warnings are events, handed to each conversation:
// Conversation::Impl::pending_warning).
runtime::PressureLevel PsiPressure(const Engine::Impl& e) {
  std::string note;
  const runtime::PressureLevel level = runtime::PsiPressureLevel(e.options.memory_pressure_path, &e.psi_unreadable, &note);
  if (!note.empty()) api::Log(1, note);
  return level;
}
}  // namespace

// ---- Conversation ----

struct Conversation::Impl {
  std::shared_ptr<Engine> engine;
  std::unique_ptr<runtime::ChatSession> chat;
  DraftSession draft;  // SessionOptions::draft_model's; it follows the chat's history by itself
  std::atomic<bool> cancel{false};
  int own_threads = 1;
  // Suspend for apps (ConversationOptions::state_path): OnBackground saves here. `busy` is held by
  // every call, so a save from the app's lifecycle thread never meets a Send half-way; a save asked
  // for during a call is made when it returns.
  std::string state_path;
  runtime::PressureLadder ladder;
  // An app's warning that came while a call ran (or from inside it): taken at the next turn.
  std::atomic<int> pending_warning{0};
  int pressure_actions = 0;
  uint64_t pressure_released = 0;
  mutable std::mutex busy;
  std::atomic<std::thread::id> busy_thread{};  // who holds `busy` (a stream callback may call OnBackground)
  std::atomic<bool> save_requested{false};
  std::vector<AdapterUse> adapters;  // SetAdapters' list, as given

  ~Impl() {
    if (!engine) return;  // Create failed before registering it
    Engine::Impl& e = engine->impl();
    std::lock_guard<std::mutex> lock(e.conversations_mutex);
    std::erase(e.conversations, this);
  }
  MemoryStats Memory() const {
    MemoryStats m = runtime::SessionMemory(chat->session());
    m.pressure_actions = pressure_actions;
    m.pressure_released_bytes = pressure_released;
    return m;
  }
  // The memory governor, between calls (the caller holds `busy`): the ladder's next steps for this
  // level (or an app's warning that came meanwhile), each logged and reported.
  void Govern(runtime::PressureLevel level) {
    level = std::max(level, static_cast<runtime::PressureLevel>(pending_warning.exchange(0)));
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    for (const MemoryActionEvent& e : runtime::ShedMemory(*chat, ladder, level, now)) {
      ++pressure_actions;
      pressure_released += e.bytes_released;
      api::Log(2, runtime::DescribeMemoryAction(e));
      if (engine->options().on_memory_action) engine->options().on_memory_action(e);
    }
  }
  // Saves when a save was asked for; the caller holds `busy`.
  void SaveIfRequested() {
    if (!save_requested.exchange(false)) return;
    const Status s = chat->SaveState(state_path);
    if (s.ok()) api::Log(1, "saved the conversation to " + state_path + " (the app went to the background)");
    else api::Log(2, "could not save the conversation for the background: " + s.message());
  }
  // Every call: holds `busy` for its length, then makes a save that came in meanwhile.
  template <typename F>
  auto Call(F&& f) {
    struct Finally {
      Impl* impl;
      ~Finally() {
        if (impl->state_path.empty() || !impl->save_requested.load()) return;
        std::lock_guard<std::mutex> lock(impl->busy);
        impl->SaveIfRequested();
      }
    } finally{this};
    std::lock_guard<std::mutex> lock(busy);
    struct Owner {
      std::atomic<std::thread::id>& id;
      explicit Owner(std::atomic<std::thread::id>& i) : id(i) { id.store(std::this_thread::get_id()); }
      ~Owner() { id.store(std::thread::id()); }
    } owner(busy_thread);
    return f();
  }
};

void Engine::OnMemoryWarning(MemoryPressure level) {
  impl_->pressure.store(level);
  api::Log(1, std::string("memory warning: ") + MemoryPressureName(level));
  // A warning is an event (iOS sends one, Android one per level change), not a state: each
  // conversation acts on it once, the idle ones now, a busy one (or this thread's own, from a
  // stream callback) at the start of its next turn.
  const runtime::PressureLevel warned = runtime::FromTrimLevel(static_cast<int>(level));
  if (warned == runtime::PressureLevel::kNone) return;
  const runtime::PressureLevel now = std::max(warned, PsiPressure(*impl_));
  std::lock_guard<std::mutex> lock(impl_->conversations_mutex);
  for (Conversation::Impl* c : impl_->conversations) {
    int pending = c->pending_warning.load();
    while (pending < static_cast<int>(warned) && !c->pending_warning.compare_exchange_weak(pending, static_cast<int>(warned))) {
    }
    if (c->busy_thread.load() == std::this_thread::get_id()) continue;
    std::unique_lock<std::mutex> idle(c->busy, std::try_to_lock);
    if (idle.owns_lock()) c->Govern(now);
  }
}

void Engine::OnBackground() {
  impl_->background.store(true);
  std::lock_guard<std::mutex> lock(impl_->conversations_mutex);
  for (Conversation::Impl* c : impl_->conversations) {
    if (c->state_path.empty()) continue;
    // Asked first, then tried: either this try_lock or the running call's end sees the request. From
    // inside the call (its stream callback) only the call's end can save: half a turn is no state.
    c->save_requested.store(true);
    if (c->busy_thread.load() == std::this_thread::get_id()) continue;
    std::unique_lock<std::mutex> idle(c->busy, std::try_to_lock);
    if (idle.owns_lock()) c->SaveIfRequested();
  }
}

Conversation::Conversation(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Conversation::~Conversation() = default;

Result<std::unique_ptr<Conversation>> Conversation::Create(std::shared_ptr<Engine> engine,
                                                           const ConversationOptions& options) {
  if (!engine) return Status::Error(StatusCode::kInvalidArgument, "no engine");
  RETURN_IF_ERROR(api::CheckSessionOptions(options.session));
  if (options.summary_max_tokens < 1) {
    return Status::Error(StatusCode::kInvalidArgument, "summary_max_tokens must be at least 1");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Session> session, api::CreateRuntimeSession(*engine, options.session));
  ASSIGN_OR_RETURN(DraftSession draft, api::MakeDraftSession(*engine, options.session, *session));
  // Made once nothing can fail before it is registered: its destructor unregisters it.
  auto impl = std::make_unique<Impl>();
  impl->draft = std::move(draft);
  impl->own_threads = session->n_threads();
  if (options.session.progress) session->SetProgress(options.session.progress);
  ASSIGN_OR_RETURN(std::shared_ptr<const LoraStack> lora, api::MakeLoraStack(*engine, options.session.adapters));
  session->SetAdapters(std::move(lora));
  impl->adapters = options.session.adapters;
  impl->chat = std::make_unique<runtime::ChatSession>(std::move(session), SamplingOptions{});
  impl->chat->SetSystem(options.system);
  impl->chat->SetThinking(options.thinking);
  impl->chat->SetSummaries({options.summarize_dropped, options.summary_max_tokens});
  impl->engine = std::move(engine);
  if (!options.state_path.empty()) {
    struct stat st{};
    if (::stat(options.state_path.c_str(), &st) == 0) {
      if (Status s = impl->chat->LoadState(options.state_path); !s.ok()) {
        api::Log(2, "not resuming the conversation: " + s.message() + "; a new one begins");
      }
    }
    impl->state_path = options.state_path;
  }
  {
    Engine::Impl& e = impl->engine->impl();
    std::lock_guard<std::mutex> lock(e.conversations_mutex);
    e.conversations.push_back(impl.get());
  }
  return std::unique_ptr<Conversation>(new Conversation(std::move(impl)));
}

namespace {

// A turn: the governor, the engine's threads and kernels, the request's constraint, then `send`
// (the chat's Send of a text or of a message with parts) with the controls.
template <class SendFn>
Result<Reply> SendTurn(Conversation::Impl& impl, const SendFn& send, const GenerateOptions& options) {
  RETURN_IF_ERROR(api::CheckGenerateOptions(options));
  return impl.Call([&]() -> Result<Reply> {
    impl.Govern(PsiPressure(impl.engine->impl()));
    impl.engine->impl().Apply(impl.chat->session(), impl.own_threads);
    if (impl.draft.session) impl.draft.engine->impl().Apply(*impl.draft.session, impl.own_threads);
    impl.cancel.store(false);
    impl.chat->SetSampling(options.sampling);
    ASSIGN_OR_RETURN(std::unique_ptr<runtime::TokenConstraint> constraint,
                     impl.engine->impl().Constraint(options, impl.chat->session().n_ctx()));
    runtime::GenerationControls controls;
    controls.cancel = &impl.cancel;
    controls.constraint = constraint.get();
    controls.draft_session = impl.draft.session.get();
    controls.assistant = impl.draft.assistant.get();
    ASSIGN_OR_RETURN(runtime::Generation g, send(controls));
    runtime::AddSessionStats(impl.chat->session(), &g.reply.stats);
    g.reply.stats.memory = impl.Memory();
    return std::move(g.reply);
  });
}

}  // namespace

Result<Reply> Conversation::Send(std::string_view user_text, const GenerateOptions& options,
                                 const StreamCallback& on_text) {
  return SendTurn(
      *impl_,
      [&](const runtime::GenerationControls& controls) {
        return impl_->chat->Send(std::string(user_text), options, controls, on_text);
      },
      options);
}

Result<Reply> Conversation::Send(std::span<const ContentPart> parts, const GenerateOptions& options,
                                 const StreamCallback& on_text) {
  if (parts.empty()) return Status::Error(StatusCode::kInvalidArgument, "the message is empty");
  return SendTurn(
      *impl_,
      [&](const runtime::GenerationControls& controls) {
        return impl_->chat->Send(std::vector<ContentPart>(parts.begin(), parts.end()), options, controls, on_text);
      },
      options);
}

void Conversation::Cancel() { impl_->cancel.store(true); }
void Conversation::SetSystem(std::string system) {
  impl_->Call([&] { impl_->chat->SetSystem(system); });
}
void Conversation::SetThinking(bool on) {
  impl_->Call([&] { impl_->chat->SetThinking(on); });
}
void Conversation::SetSummarizeDropped(bool on) {
  impl_->Call([&] {
    runtime::SummaryOptions o = impl_->chat->summaries();
    o.enabled = on;
    impl_->chat->SetSummaries(o);
  });
}
std::string Conversation::summary() const {
  return impl_->Call([&] { return impl_->chat->summary(); });
}
void Conversation::Reset() {
  impl_->Call([&] { impl_->chat->Reset(); });
}

Status Conversation::SetAdapters(std::span<const AdapterUse> adapters) {
  return impl_->Call([&]() -> Status {
    ASSIGN_OR_RETURN(std::shared_ptr<const LoraStack> stack, api::MakeLoraStack(*impl_->engine, adapters));
    // A cache emptied here is refilled from the messages by the next Send (it keeps what matches).
    impl_->chat->session().SetAdapters(std::move(stack));
    impl_->adapters.assign(adapters.begin(), adapters.end());
    return Status::Ok();
  });
}
std::vector<AdapterUse> Conversation::adapters() const {
  return impl_->Call([&] { return impl_->adapters; });
}

std::vector<Message> Conversation::messages() const {
  return impl_->Call([&] {
    std::vector<Message> out;
    for (const runtime::ChatTurn& m : impl_->chat->messages()) out.push_back({m.role, m.content});
    return out;
  });
}

Status Conversation::Save(const std::string& path) const {
  return impl_->Call([&] { return impl_->chat->Save(path); });
}
Status Conversation::Load(const std::string& path) {
  return impl_->Call([&] { return impl_->chat->Load(path); });
}
Status Conversation::SaveState(const std::string& path) const {
  return impl_->Call([&] { return impl_->chat->SaveState(path); });
}
Status Conversation::LoadState(const std::string& path) {
  return impl_->Call([&] { return impl_->chat->LoadState(path); });
}
Status Conversation::SetMessages(std::vector<Message> messages) {
  return impl_->Call([&] {
    Status s = impl_->chat->SetMessages(std::move(messages));
    return s.ok() ? s : Status::Error(StatusCode::kInvalidArgument, s.message());
  });
}
int Conversation::n_past() const { return impl_->chat->session().n_past(); }
int Conversation::n_ctx() const { return impl_->chat->session().n_ctx(); }
MemoryStats Conversation::memory() const { return impl_->Memory(); }
MemoryPlan Conversation::memory_plan() const { return runtime::SessionMemoryPlan(impl_->chat->session()); }

}  // namespace gemlet
