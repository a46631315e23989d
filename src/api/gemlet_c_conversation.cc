// The C API's conversations (gemlet_conversation: messages, the model's chat format, streamed
// answers), chat messages, and the task presets that run on a session.
#include "api/gemlet_c_internal.h"
#include "gemlet/tasks.hpp"

using namespace gemlet::capi;

namespace {

// A turn through `send` (text, or parts), with the C options, callback and stats.
template <class Send>
gemlet_status SendTurn(gemlet_conversation* conversation, const gemlet_generate_options* options,
                       gemlet_stream_fn callback, void* user_data, gemlet_stats* stats, Send send) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    gemlet_generate_options o = gemlet_generate_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_generate_options");
    gemlet::GenerateOptions g;
    if (!ToGenerateOptions(o, &g)) return GEMLET_INVALID_ARGUMENT;
    conversation->last_reply.clear();
    conversation->last_logprobs.clear();
    conversation->last_top_logprobs.clear();
    auto reply = send(*conversation->conversation, g, ToStreamCallback(callback, user_data));
    if (!reply.ok()) return Report(reply.status());
    conversation->last_reply = reply->text;
    conversation->last_top_logprobs = FromTopLogprobs(reply->logprobs);
    conversation->last_logprobs = std::move(reply->logprobs);
    if (stats) WriteOut(FromGenerationStats(reply->stats), stats);
    if (reply->stats.stop == gemlet::StopReason::kCancelled) return Fail(GEMLET_CANCELLED, "cancelled");
    return GEMLET_OK;
  });
}

}  // namespace

extern "C" {

gemlet_conversation_options gemlet_conversation_options_default(void) {
  gemlet_conversation_options o{};
  o.struct_size = sizeof(o);
  o.session = gemlet_session_options_default();
  return o;
}

gemlet_status gemlet_conversation_create(gemlet_engine* engine, const gemlet_conversation_options* options,
                                         gemlet_conversation** out) {
  return gemlet_conversation_create2(engine, options, nullptr, out);
}

gemlet_status gemlet_conversation_create2(gemlet_engine* engine, const gemlet_conversation_options* options,
                                          const gemlet_session_extra_options* extra, gemlet_conversation** out) {
  return Guard([&] {
    if (out == nullptr) return NullHandle("out");
    *out = nullptr;
    if (engine == nullptr) return NullHandle("engine");
    gemlet_conversation_options o = gemlet_conversation_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_conversation_options");
    gemlet_session_options so = gemlet_session_options_default();
    if (!ReadOptions(&o.session, &so)) return BadStruct("gemlet_conversation_options.session");
    gemlet_session_extra_options x = gemlet_session_extra_options_default();
    if (!ReadOptions(extra, &x)) return BadStruct("gemlet_session_extra_options");
    gemlet::ConversationOptions co;
    co.session = ToSessionOptions(so);
    ApplySessionExtraOptions(x, &co.session);
    if (o.system) co.system = o.system;
    co.thinking = o.thinking;
    co.summarize_dropped = o.summarize_dropped;
    if (o.summary_max_tokens > 0) co.summary_max_tokens = o.summary_max_tokens;
    else if (o.summary_max_tokens < 0) return Fail(GEMLET_INVALID_ARGUMENT, "summary_max_tokens must not be negative");
    if (o.state_path) co.state_path = o.state_path;
    auto c = gemlet::Conversation::Create(engine->engine, co);
    if (!c.ok()) return Report(c.status());
    *out = new gemlet_conversation{std::move(c).value()};
    return GEMLET_OK;
  });
}

void gemlet_conversation_free(gemlet_conversation* conversation) { delete conversation; }

gemlet_status gemlet_conversation_send(gemlet_conversation* conversation, const char* user_text,
                                       const gemlet_generate_options* options, gemlet_stream_fn callback,
                                       void* user_data, gemlet_stats* stats) {
  if (user_text == nullptr && conversation != nullptr) return NullHandle("user_text");
  return SendTurn(conversation, options, callback, user_data, stats,
                  [&](gemlet::Conversation& c, const gemlet::GenerateOptions& g, const gemlet::StreamCallback& cb) {
                    return c.Send(user_text, g, cb);
                  });
}

gemlet_status gemlet_conversation_send_parts(gemlet_conversation* conversation, const gemlet_content_part* parts,
                                             size_t n_parts, const gemlet_generate_options* options,
                                             gemlet_stream_fn callback, void* user_data, gemlet_stats* stats) {
  std::vector<gemlet::ContentPart> cpp;
  if (conversation != nullptr && !gemlet::capi::ToContentParts(parts, n_parts, &cpp)) return GEMLET_INVALID_ARGUMENT;
  return SendTurn(conversation, options, callback, user_data, stats,
                  [&](gemlet::Conversation& c, const gemlet::GenerateOptions& g, const gemlet::StreamCallback& cb) {
                    return c.Send(cpp, g, cb);
                  });
}

const char* gemlet_conversation_last_reply(const gemlet_conversation* conversation) {
  return conversation ? conversation->last_reply.c_str() : "";
}

size_t gemlet_conversation_last_n_logprobs(const gemlet_conversation* conversation) {
  return conversation ? conversation->last_logprobs.size() : 0;
}

gemlet_status gemlet_conversation_last_logprob(const gemlet_conversation* conversation, size_t index,
                                               gemlet_token_logprob* chosen, const gemlet_token_logprob** top,
                                               size_t* n_top) {
  if (top) *top = nullptr;
  if (n_top) *n_top = 0;
  if (conversation == nullptr) return NullHandle("conversation");
  return ReadLogprob(conversation->last_logprobs, conversation->last_top_logprobs, index, chosen, top, n_top);
}

void gemlet_conversation_cancel(gemlet_conversation* conversation) {
  if (conversation) conversation->conversation->Cancel();
}

gemlet_status gemlet_conversation_set_system(gemlet_conversation* conversation, const char* system) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    conversation->conversation->SetSystem(system ? system : "");
    return GEMLET_OK;
  });
}

gemlet_status gemlet_conversation_set_thinking(gemlet_conversation* conversation, bool thinking) {
  if (conversation == nullptr) return NullHandle("conversation");
  conversation->conversation->SetThinking(thinking);
  return GEMLET_OK;
}

size_t gemlet_conversation_n_messages(gemlet_conversation* conversation) {
  if (conversation == nullptr) return 0;
  try {
    conversation->messages = conversation->conversation->messages();
    conversation->tool_calls.clear();
    for (const gemlet::Message& m : conversation->messages) {
      std::vector<gemlet_tool_call> calls;
      for (const gemlet::ToolCall& t : m.tool_calls) calls.push_back(FromToolCall(t));
      conversation->tool_calls.push_back(std::move(calls));
    }
  } catch (...) {  // out of memory: no snapshot
    conversation->messages.clear();
    conversation->tool_calls.clear();
  }
  return conversation->messages.size();
}

gemlet_status gemlet_conversation_message(const gemlet_conversation* conversation, size_t index, const char** role,
                                          const char** content) {
  if (conversation == nullptr) return NullHandle("conversation");
  if (role == nullptr || content == nullptr) return NullHandle(role == nullptr ? "role" : "content");
  if (index >= conversation->messages.size()) {
    return Fail(GEMLET_INVALID_ARGUMENT, "message " + std::to_string(index) + " of " +
                                             std::to_string(conversation->messages.size()) +
                                             " (call gemlet_conversation_n_messages first)");
  }
  *role = conversation->messages[index].role.c_str();
  *content = conversation->messages[index].content.c_str();
  return GEMLET_OK;
}

void gemlet_conversation_reset(gemlet_conversation* conversation) {
  if (conversation) conversation->conversation->Reset();
}

int gemlet_conversation_n_past(const gemlet_conversation* conversation) {
  return conversation ? conversation->conversation->n_past() : 0;
}

gemlet_status gemlet_conversation_save(const gemlet_conversation* conversation, const char* path) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    if (path == nullptr) return NullHandle("path");
    return Report(conversation->conversation->Save(path));
  });
}

gemlet_status gemlet_conversation_load(gemlet_conversation* conversation, const char* path) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    if (path == nullptr) return NullHandle("path");
    return Report(conversation->conversation->Load(path));
  });
}

gemlet_status gemlet_conversation_save_state(const gemlet_conversation* conversation, const char* path) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    if (path == nullptr) return NullHandle("path");
    return Report(conversation->conversation->SaveState(path));
  });
}

gemlet_status gemlet_conversation_restore_state(gemlet_conversation* conversation, const char* path) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    if (path == nullptr) return NullHandle("path");
    return Report(conversation->conversation->LoadState(path));
  });
}

gemlet_message gemlet_message_default(void) {
  gemlet_message m{};
  m.struct_size = sizeof(m);
  return m;
}

gemlet_chat_options gemlet_chat_options_default(void) {
  gemlet_chat_options o{};
  o.struct_size = sizeof(o);
  o.add_generation_prompt = gemlet::ChatOptions().add_generation_prompt;
  return o;
}

gemlet_status gemlet_conversation_message_at(const gemlet_conversation* conversation, size_t index,
                                             gemlet_message* message) {
  if (conversation == nullptr) return NullHandle("conversation");
  if (index >= conversation->messages.size()) {
    return Fail(GEMLET_INVALID_ARGUMENT, "message " + std::to_string(index) + " of " +
                                             std::to_string(conversation->messages.size()) +
                                             " (call gemlet_conversation_n_messages first)");
  }
  const gemlet_message m = FromMessage(conversation->messages[index], conversation->tool_calls[index]);
  return WriteOut(m, message) ? GEMLET_OK : NullHandle("message");
}

gemlet_status gemlet_conversation_set_messages(gemlet_conversation* conversation, const gemlet_message* messages,
                                               size_t n_messages) {
  return Guard([&] {
    if (conversation == nullptr) return NullHandle("conversation");
    std::vector<gemlet::Message> chat;
    if (!ToMessages(messages, n_messages, &chat)) return GEMLET_INVALID_ARGUMENT;
    return Report(conversation->conversation->SetMessages(std::move(chat)));
  });
}

gemlet_status gemlet_conversation_set_summarize_dropped(gemlet_conversation* conversation, bool on) {
  if (conversation == nullptr) return NullHandle("conversation");
  conversation->conversation->SetSummarizeDropped(on);
  return GEMLET_OK;
}

gemlet_status gemlet_conversation_summary(const gemlet_conversation* conversation, char** summary) {
  return Guard([&] {
    if (summary == nullptr) return NullHandle("summary");
    *summary = nullptr;
    if (conversation == nullptr) return NullHandle("conversation");
    *summary = CopyOut(conversation->conversation->summary());
    return GEMLET_OK;
  });
}

int gemlet_conversation_n_ctx(const gemlet_conversation* conversation) {
  return conversation ? conversation->conversation->n_ctx() : 0;
}

gemlet_status gemlet_conversation_memory(const gemlet_conversation* conversation, gemlet_memory_stats* stats) {
  if (conversation == nullptr) return NullHandle("conversation");
  return Guard([&] {
    return WriteOut(FromMemoryStats(conversation->conversation->memory()), stats) ? GEMLET_OK : NullHandle("stats");
  });
}

gemlet_status gemlet_conversation_memory_plan(gemlet_conversation* conversation, gemlet_memory_plan* plan) {
  if (conversation == nullptr) return NullHandle("conversation");
  return Guard([&] {
    gemlet::MemoryPlan p = conversation->conversation->memory_plan();
    conversation->plan_text = std::move(p.text);  // the text stays with the conversation until the next call
    gemlet_memory_plan c = FromMemoryPlan(p);
    c.text = conversation->plan_text.c_str();
    return WriteOut(c, plan) ? GEMLET_OK : NullHandle("plan");
  });
}

gemlet_task_options gemlet_task_options_default(void) {
  gemlet_task_options o{};
  o.struct_size = sizeof(o);
  return o;
}

gemlet_status gemlet_task_run(gemlet_session* session, const char* input, const gemlet_task_options* options,
                              const gemlet_generate_options* generate, const char** output, gemlet_stats* stats) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    if (input == nullptr) return NullHandle("input");
    if (output == nullptr) return NullHandle("output");
    *output = "";
    session->task_glossary_missing.clear();
    gemlet_task_options t = gemlet_task_options_default();
    if (!ReadOptions(options, &t)) return BadStruct("gemlet_task_options");
    if (t.task == nullptr) return NullHandle("options->task");
    gemlet_generate_options o = gemlet_generate_options_default();
    if (!ReadOptions(generate, &o)) return BadStruct("gemlet_generate_options");
    gemlet::TaskOptions to;
    if (!ToGenerateOptions(o, &to.generate)) return GEMLET_INVALID_ARGUMENT;
    to.task = t.task;
    to.style = t.style ? t.style : "";
    to.to = t.to ? t.to : "";
    to.schema = t.schema ? t.schema : "";
    to.glossary = t.glossary ? t.glossary : "";
    to.thinking = t.thinking;
    if (t.media == nullptr && t.n_media > 0) return NullHandle("options->media");
    for (size_t i = 0; i < t.n_media; ++i) {
      if (t.media[i] == nullptr) return NullHandle("options->media[i]");
      to.media.push_back(t.media[i]->media);
    }
    auto reply = gemlet::RunTask(*session->session, input, to);
    if (!reply.ok()) return Report(reply.status());
    session->task_output = std::move(reply->output);
    *output = session->task_output.c_str();
    for (const std::string& term : reply->glossary_missing) session->task_glossary_missing += term + "\n";
    if (stats) WriteOut(FromGenerationStats(reply->stats), stats);
    return GEMLET_OK;
  });
}

const char* gemlet_task_glossary_missing(const gemlet_session* session) {
  return session == nullptr ? "" : session->task_glossary_missing.c_str();
}

const char* gemlet_detect_language(const char* text) {
  if (text == nullptr) return "unknown";
  // Static strings for C: the tags, kept for the life of the process.
  static const std::vector<std::string> tags = [] {
    std::vector<std::string> out = {"mixed", "unknown"};
    for (const gemlet::LanguageName& l : gemlet::DetectableLanguages()) out.push_back(l.tag);
    return out;
  }();
  const std::string tag = gemlet::DetectLanguageTag(text);
  for (const std::string& known : tags) {
    if (known == tag) return known.c_str();
  }
  return "unknown";
}

}  // extern "C"
