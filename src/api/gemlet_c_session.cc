// The C API's sessions (gemlet_session: tokens in, logits and generated tokens out), their replies
// (gemlet_reply), and the batch decoder that steps several sessions' requests together.
#include "api/gemlet_c_internal.h"

using namespace gemlet::capi;

namespace {

// Session::Generate and Session::Complete from C: the options read, the reply handed over (also a
// cancelled one, which is GEMLET_CANCELLED as in gemlet_conversation_send).
// `call` runs the generation on the session with the converted options and callback.
template <class Call>
gemlet_status RunGeneration(gemlet_session* session, bool have_prompt, const gemlet_generate_options* options,
                            gemlet_stream_fn callback, void* user_data, gemlet_reply** reply, Call call) {
  return Guard([&] {
    if (reply) *reply = nullptr;
    if (session == nullptr) return NullHandle("session");
    if (!have_prompt) return NullHandle("prompt");
    gemlet_generate_options o = gemlet_generate_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_generate_options");
    gemlet::GenerateOptions g;
    if (!ToGenerateOptions(o, &g)) return GEMLET_INVALID_ARGUMENT;
    gemlet::Result<gemlet::Reply> r = call(*session->session, g, ToStreamCallback(callback, user_data));
    if (!r.ok()) return Report(r.status());
    const bool cancelled = r->stats.stop == gemlet::StopReason::kCancelled;
    if (reply) *reply = NewReply(std::move(r).value());
    return cancelled ? Fail(GEMLET_CANCELLED, "cancelled") : GEMLET_OK;
  });
}

}  // namespace

extern "C" {

gemlet_session_options gemlet_session_options_default(void) { return FromSessionOptions(gemlet::SessionOptions()); }

gemlet_session_extra_options gemlet_session_extra_options_default(void) {
  return FromSessionExtraOptions(gemlet::SessionOptions());
}

gemlet_status gemlet_session_create(gemlet_engine* engine, const gemlet_session_options* options,
                                    gemlet_session** out) {
  return gemlet_session_create2(engine, options, nullptr, out);
}

gemlet_status gemlet_session_create2(gemlet_engine* engine, const gemlet_session_options* options,
                                     const gemlet_session_extra_options* extra, gemlet_session** out) {
  return Guard([&] {
    if (out == nullptr) return NullHandle("out");
    *out = nullptr;
    if (engine == nullptr) return NullHandle("engine");
    gemlet_session_options o = gemlet_session_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_session_options");
    gemlet_session_extra_options x = gemlet_session_extra_options_default();
    if (!ReadOptions(extra, &x)) return BadStruct("gemlet_session_extra_options");
    gemlet::SessionOptions so = ToSessionOptions(o);
    ApplySessionExtraOptions(x, &so);
    auto s = gemlet::Session::Create(engine->engine, so);
    if (!s.ok()) return Report(s.status());
    *out = new gemlet_session{std::move(s).value(), engine->engine};
    return GEMLET_OK;
  });
}

void gemlet_session_free(gemlet_session* session) { delete session; }

gemlet_status gemlet_session_evaluate(gemlet_session* session, const int32_t* tokens, size_t n_tokens, float* logits) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    if (tokens == nullptr && n_tokens > 0) return NullHandle("tokens");
    return Report(session->session->Evaluate(std::span<const int32_t>(tokens, n_tokens), logits, false));
  });
}

gemlet_status gemlet_session_evaluate_all(gemlet_session* session, const int32_t* tokens, size_t n_tokens,
                                          float* logits) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    if (tokens == nullptr && n_tokens > 0) return NullHandle("tokens");
    if (logits == nullptr) return NullHandle("logits");
    return Report(session->session->Evaluate(std::span<const int32_t>(tokens, n_tokens), logits, true));
  });
}

gemlet_status gemlet_session_truncate(gemlet_session* session, int n_keep) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    return Report(session->session->Truncate(n_keep));
  });
}

gemlet_status gemlet_session_save(const gemlet_session* session, const char* path) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    if (path == nullptr) return NullHandle("path");
    return Report(session->session->SaveState(path));
  });
}

gemlet_status gemlet_session_restore(gemlet_session* session, const char* path) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    if (path == nullptr) return NullHandle("path");
    return Report(session->session->LoadState(path));
  });
}

gemlet_status gemlet_session_discard(gemlet_session* session, int begin, int count, int* reevaluated) {
  return Guard([&] {
    if (session == nullptr) return NullHandle("session");
    gemlet::Result<int> r = session->session->Discard(begin, count);
    if (!r.ok()) return Report(r.status());
    if (reevaluated != nullptr) *reevaluated = *r;
    return GEMLET_OK;
  });
}

void gemlet_session_reset(gemlet_session* session) {
  if (session) session->session->Reset();
}
int gemlet_session_n_past(const gemlet_session* session) { return session ? session->session->n_past() : 0; }
int gemlet_session_n_ctx(const gemlet_session* session) { return session ? session->session->n_ctx() : 0; }
int gemlet_session_rollback_room(const gemlet_session* session) {
  return session ? session->session->rollback_room() : 0;
}
void gemlet_session_cancel(gemlet_session* session) {
  if (session) session->session->Cancel();
}

const int32_t* gemlet_session_tokens(const gemlet_session* session, size_t* n_tokens) {
  if (session == nullptr) {
    if (n_tokens) *n_tokens = 0;
    return nullptr;
  }
  const std::vector<int32_t>& t = session->session->tokens();
  if (n_tokens) *n_tokens = t.size();
  return t.data();
}

gemlet_status gemlet_session_engine(const gemlet_session* session, gemlet_engine** out) {
  return Guard([&] {
    if (out == nullptr) return NullHandle("out");
    *out = nullptr;
    if (session == nullptr) return NullHandle("session");
    *out = new gemlet_engine(session->engine);
    return GEMLET_OK;
  });
}

gemlet_memory_stats gemlet_memory_stats_default(void) { return FromMemoryStats({}); }
gemlet_memory_plan gemlet_memory_plan_default(void) {
  static const gemlet::MemoryPlan none;  // its empty text is what the default points to
  return FromMemoryPlan(none);
}

gemlet_status gemlet_session_memory(const gemlet_session* session, gemlet_memory_stats* stats) {
  if (session == nullptr) return NullHandle("session");
  return Guard([&] { return WriteOut(FromMemoryStats(session->session->memory()), stats) ? GEMLET_OK : NullHandle("stats"); });
}

gemlet_status gemlet_session_memory_plan(gemlet_session* session, gemlet_memory_plan* plan) {
  if (session == nullptr) return NullHandle("session");
  return Guard([&] {
    gemlet::MemoryPlan p = session->session->memory_plan();
    session->plan_text = std::move(p.text);  // the text stays with the session until the next call
    gemlet_memory_plan c = FromMemoryPlan(p);
    c.text = session->plan_text.c_str();
    return WriteOut(c, plan) ? GEMLET_OK : NullHandle("plan");
  });
}

// ---- generation ----

gemlet_generate_options gemlet_generate_options_default(void) {
  const gemlet::GenerateOptions d;
  gemlet_generate_options o{};
  o.struct_size = sizeof(o);
  o.max_tokens = d.max_tokens;
  o.temperature = d.sampling.temperature;
  o.top_k = d.sampling.top_k;
  o.top_p = d.sampling.top_p;
  o.min_p = d.sampling.min_p;
  o.repeat_penalty = d.sampling.repeat_penalty;
  o.repeat_last_n = d.sampling.repeat_last_n;
  o.presence_penalty = d.sampling.presence_penalty;
  o.frequency_penalty = d.sampling.frequency_penalty;
  o.seed = d.sampling.seed;
  o.max_draft = d.max_draft;
  return o;
}

gemlet_stats gemlet_stats_default(void) {
  gemlet_stats s{};
  s.struct_size = sizeof(s);
  return s;
}

gemlet_status gemlet_session_generate(gemlet_session* session, const int32_t* prompt, size_t n_prompt,
                                      const gemlet_generate_options* options, gemlet_stream_fn callback,
                                      void* user_data, gemlet_reply** reply) {
  return RunGeneration(session, prompt != nullptr || n_prompt == 0, options, callback, user_data, reply,
                       [&](gemlet::Session& s, const gemlet::GenerateOptions& g, const gemlet::StreamCallback& cb) {
                         return s.Generate(std::span<const int32_t>(prompt, n_prompt), g, cb);
                       });
}

gemlet_status gemlet_session_complete(gemlet_session* session, const int32_t* prompt, size_t n_prompt,
                                      const gemlet_generate_options* options, gemlet_stream_fn callback,
                                      void* user_data, gemlet_reply** reply) {
  return RunGeneration(session, prompt != nullptr || n_prompt == 0, options, callback, user_data, reply,
                       [&](gemlet::Session& s, const gemlet::GenerateOptions& g, const gemlet::StreamCallback& cb) {
                         return s.Complete(std::span<const int32_t>(prompt, n_prompt), g, cb);
                       });
}

gemlet_status gemlet_session_generate_prompt(gemlet_session* session, const gemlet_prompt* prompt,
                                             const gemlet_generate_options* options, gemlet_stream_fn callback,
                                             void* user_data, gemlet_reply** reply) {
  return RunGeneration(session, prompt != nullptr, options, callback, user_data, reply,
                       [&](gemlet::Session& s, const gemlet::GenerateOptions& g, const gemlet::StreamCallback& cb) {
                         return s.Generate(*gemlet::capi::PromptOf(prompt), g, cb);
                       });
}

gemlet_status gemlet_session_complete_prompt(gemlet_session* session, const gemlet_prompt* prompt,
                                             const gemlet_generate_options* options, gemlet_stream_fn callback,
                                             void* user_data, gemlet_reply** reply) {
  return RunGeneration(session, prompt != nullptr, options, callback, user_data, reply,
                       [&](gemlet::Session& s, const gemlet::GenerateOptions& g, const gemlet::StreamCallback& cb) {
                         return s.Complete(*gemlet::capi::PromptOf(prompt), g, cb);
                       });
}

// ---- replies ----

void gemlet_reply_free(gemlet_reply* reply) { delete reply; }
const char* gemlet_reply_text(const gemlet_reply* reply) { return reply ? reply->reply.text.c_str() : ""; }
const char* gemlet_reply_thinking(const gemlet_reply* reply) { return reply ? reply->reply.thinking.c_str() : ""; }

const int32_t* gemlet_reply_tokens(const gemlet_reply* reply, size_t* n_tokens) {
  if (n_tokens) *n_tokens = reply ? reply->reply.tokens.size() : 0;
  return reply ? reply->reply.tokens.data() : nullptr;
}

size_t gemlet_reply_n_tool_calls(const gemlet_reply* reply) { return reply ? reply->tool_calls.size() : 0; }
const gemlet_tool_call* gemlet_reply_tool_call(const gemlet_reply* reply, size_t index) {
  return reply && index < reply->tool_calls.size() ? &reply->tool_calls[index] : nullptr;
}

gemlet_status gemlet_reply_stats(const gemlet_reply* reply, gemlet_stats* stats) {
  if (reply == nullptr) return NullHandle("reply");
  return WriteOut(FromGenerationStats(reply->reply.stats), stats) ? GEMLET_OK : NullHandle("stats");
}

size_t gemlet_reply_n_logprobs(const gemlet_reply* reply) { return reply ? reply->reply.logprobs.size() : 0; }

gemlet_status gemlet_reply_logprob(const gemlet_reply* reply, size_t index, gemlet_token_logprob* chosen,
                                   const gemlet_token_logprob** top, size_t* n_top) {
  if (top) *top = nullptr;
  if (n_top) *n_top = 0;
  if (reply == nullptr) return NullHandle("reply");
  return ReadLogprob(reply->reply.logprobs, reply->top_logprobs, index, chosen, top, n_top);
}

// ---- batch decoder ----

gemlet_batch_options gemlet_batch_options_default(void) {
  const gemlet::BatchOptions d;
  gemlet_batch_options o{};
  o.struct_size = sizeof(o);
  o.max_requests = d.max_requests;
  o.prefill_chunk = d.prefill_chunk;
  return o;
}

gemlet_status gemlet_batch_decoder_create(gemlet_engine* engine, const gemlet_batch_options* options,
                                          gemlet_batch_decoder** out) {
  return Guard([&] {
    if (out == nullptr) return NullHandle("out");
    *out = nullptr;
    if (engine == nullptr) return NullHandle("engine");
    gemlet_batch_options o = gemlet_batch_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_batch_options");
    auto d = gemlet::BatchDecoder::Create(engine->engine, ToBatchOptions(o));
    if (!d.ok()) return Report(d.status());
    *out = new gemlet_batch_decoder{std::move(d).value(), {}};
    return GEMLET_OK;
  });
}

void gemlet_batch_decoder_free(gemlet_batch_decoder* decoder) { delete decoder; }

gemlet_status gemlet_batch_decoder_submit(gemlet_batch_decoder* decoder, gemlet_session* session,
                                          const int32_t* prompt, size_t n_prompt,
                                          const gemlet_generate_options* options, gemlet_stream_fn callback,
                                          void* user_data, int* id) {
  return Guard([&] {
    if (id) *id = 0;
    if (decoder == nullptr) return NullHandle("decoder");
    if (session == nullptr) return NullHandle("session");
    if (prompt == nullptr && n_prompt > 0) return NullHandle("prompt");
    gemlet_generate_options o = gemlet_generate_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_generate_options");
    gemlet::GenerateOptions g;
    if (!ToGenerateOptions(o, &g)) return GEMLET_INVALID_ARGUMENT;
    auto r = decoder->decoder->Submit(*session->session, std::span<const int32_t>(prompt, n_prompt), g,
                                      ToStreamCallback(callback, user_data));
    if (!r.ok()) return Report(r.status());
    if (id) *id = *r;
    return GEMLET_OK;
  });
}

gemlet_status gemlet_batch_decoder_submit_prompt(gemlet_batch_decoder* decoder, gemlet_session* session,
                                                 const gemlet_prompt* prompt, const gemlet_generate_options* options,
                                                 gemlet_stream_fn callback, void* user_data, int* id) {
  return Guard([&] {
    if (id) *id = 0;
    if (decoder == nullptr) return NullHandle("decoder");
    if (session == nullptr) return NullHandle("session");
    if (prompt == nullptr) return NullHandle("prompt");
    gemlet_generate_options o = gemlet_generate_options_default();
    if (!ReadOptions(options, &o)) return BadStruct("gemlet_generate_options");
    gemlet::GenerateOptions g;
    if (!ToGenerateOptions(o, &g)) return GEMLET_INVALID_ARGUMENT;
    auto r = decoder->decoder->Submit(*session->session, *PromptOf(prompt), g, ToStreamCallback(callback, user_data));
    if (!r.ok()) return Report(r.status());
    if (id) *id = *r;
    return GEMLET_OK;
  });
}

gemlet_status gemlet_batch_decoder_step(gemlet_batch_decoder* decoder, size_t* n_finished) {
  return Guard([&] {
    if (n_finished) *n_finished = 0;
    if (decoder == nullptr) return NullHandle("decoder");
    decoder->finished = decoder->decoder->Step();
    if (n_finished) *n_finished = decoder->finished.size();
    return GEMLET_OK;
  });
}

gemlet_status gemlet_batch_decoder_finished(const gemlet_batch_decoder* decoder, size_t index, int* id,
                                            gemlet_reply** reply) {
  return Guard([&] {
    if (id) *id = 0;
    if (reply) *reply = nullptr;
    if (decoder == nullptr) return NullHandle("decoder");
    if (index >= decoder->finished.size()) {
      return Fail(GEMLET_INVALID_ARGUMENT, "finished request " + std::to_string(index) + " of " +
                                               std::to_string(decoder->finished.size()));
    }
    const gemlet::BatchDecoder::Finished& f = decoder->finished[index];
    if (id) *id = f.id;
    if (!f.reply.ok()) return Report(f.reply.status());
    if (reply) *reply = NewReply(f.reply.value());
    return GEMLET_OK;
  });
}

void gemlet_batch_decoder_cancel(gemlet_batch_decoder* decoder, int id) {
  if (decoder) decoder->decoder->Cancel(id);
}
int gemlet_batch_decoder_running(const gemlet_batch_decoder* decoder) {
  return decoder ? decoder->decoder->running() : 0;
}
int gemlet_batch_decoder_last_step_tokens(const gemlet_batch_decoder* decoder) {
  return decoder ? decoder->decoder->last_step_tokens() : 0;
}

}  // extern "C"
