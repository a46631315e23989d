// ChatSession: a multi-turn conversation over one Session. Each turn re-renders the conversation
// with the model's chat format and evaluates only the tokens that differ from what the KV cache
// already holds, so earlier turns are not processed again.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/chat_format.h"
#include "runtime/generate.h"
#include "runtime/session.h"
#include "sampling/sampler.h"

namespace gemlet::runtime {

struct ChatTurnStats {
  int tokens_evaluated = 0;  // prompt tokens actually run through the model this turn
  int tokens_reused = 0;     // prompt tokens whose K/V were already cached
  // The oldest messages dropped to make room for this turn (whole user/assistant pairs), their
  // tokens, and how many kept tokens had to be evaluated again for it (0: the cache was shifted).
  int messages_dropped = 0;
  int tokens_dropped = 0;
  int tokens_reevaluated = 0;
};

class ChatSession {
 public:
  ChatSession(std::unique_ptr<Session> session, const SamplingParams& sampling);

  // Sends a user message and streams the model's answer. The answer (without its thought channel)
  // joins the conversation; on error or cancellation the conversation stays usable. When the
  // conversation and room for the answer (options.max_tokens, at most half the context) no longer
  // fit, the oldest user/assistant pairs are dropped (the system message stays) and the cache is
  // shifted over them without evaluating the kept text again (Session::Discard).
  Result<GenerateResult> Send(const std::string& user_text, const GenerateOptions& options, const TextSink& sink);

  void SetSystem(const std::string& system);  // empty: no system message
  void SetThinking(bool on) { thinking_ = on; }
  // Sampling for the next turns; the penalty window is refilled from the history each turn.
  void SetSampling(const SamplingParams& params) { sampler_ = Sampler(params, session_->engine().config().n_vocab); }
  bool thinking() const { return thinking_; }
  void Reset();  // forget the conversation (keeps the system message)

  const std::vector<ChatMessage>& messages() const { return messages_; }
  Status Save(const std::string& path) const;  // JSON: {"system": ..., "messages": [...]}
  Status Load(const std::string& path);        // replaces the conversation; evaluated on the next Send
  Status SetMessages(std::vector<ChatMessage> messages);  // the same, from messages in hand
  // The whole state, KV cache included (Session::SaveState): resumed with nothing evaluated again.
  Status SaveState(const std::string& path) const;
  Status LoadState(const std::string& path);

  // The tokens the whole conversation renders to (with the generation prompt).
  Result<std::vector<int32_t>> RenderTokens(bool add_generation_prompt) const;

  Session& session() { return *session_; }
  const ChatTurnStats& last_turn() const { return last_turn_; }

 private:
  // Renders system + messages (no generation prompt) to tokens.
  Result<std::vector<int32_t>> Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  std::string MessagesJson() const;
  Status SetFromJson(const std::string& text, const std::string& what);
  // Drops the oldest pairs of messages_ (the last message, the new user turn, always stays) until
  // the rendered conversation plus `room` tokens fits in the context; shifts the cache over them.
  Status MakeRoom(int room);

  std::unique_ptr<Session> session_;
  Sampler sampler_;
  std::string system_;
  std::vector<ChatMessage> messages_;  // user / assistant turns
  bool thinking_ = false;
  ChatTurnStats last_turn_;
};

}  // namespace gemlet::runtime
