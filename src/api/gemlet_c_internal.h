// What the C API's files (gemlet_c*.cc) share: the handles behind gemlet.h's opaque types, the
// error helpers, and the one converter per type between gemlet.h's structs and the C++ API's
// (defined in gemlet_c_convert.cc, and nowhere else). Only the public C++ API is used below.
#pragma once

#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "gemlet/gemlet.h"
#include "gemlet/gemlet.hpp"

struct gemlet_engine {
  explicit gemlet_engine(std::shared_ptr<gemlet::Engine> e) : engine(std::move(e)) {}
  std::shared_ptr<gemlet::Engine> engine;
  // gemlet_engine_stop_prepare_weights's flag: the C++ API takes a caller's atomic, which C cannot
  // share, so the handle owns it.
  mutable std::atomic<bool> stop_prepare{false};
};
struct gemlet_session {
  std::unique_ptr<gemlet::Session> session;
  std::shared_ptr<gemlet::Engine> engine;  // for gemlet_session_engine
  std::string task_output = {};  // what gemlet_task_run's *output points to
  std::string task_glossary_missing = {};  // gemlet_task_glossary_missing's answer, one term a line
  std::string plan_text = {};    // what gemlet_session_memory_plan's text points to
};
struct gemlet_conversation {
  std::unique_ptr<gemlet::Conversation> conversation;
  std::string last_reply = {};
  // The snapshot gemlet_conversation_n_messages takes, which gemlet_conversation_message(_at) read;
  // tool_calls[i] holds the C views of messages[i]'s calls.
  std::vector<gemlet::Message> messages = {};
  std::vector<std::vector<gemlet_tool_call>> tool_calls = {};
  std::string plan_text = {};
  // The last send's Reply::logprobs and the C copies of each entry's alternatives, which
  // gemlet_conversation_last_logprob hands out pointers into (as gemlet_reply's below).
  std::vector<gemlet::TokenLogprobs> last_logprobs = {};
  std::vector<std::vector<gemlet_token_logprob>> last_top_logprobs = {};
};
struct gemlet_reply {
  gemlet::Reply reply;
  std::vector<gemlet_tool_call> tool_calls;  // C views of reply.tool_calls
  // C copies of each reply.logprobs[i].top (gemlet_reply_logprob hands out pointers into them).
  std::vector<std::vector<gemlet_token_logprob>> top_logprobs = {};
};
struct gemlet_media {
  std::shared_ptr<const gemlet::EncodedMedia> media;
};
struct gemlet_adapter {
  std::shared_ptr<const gemlet::Adapter> adapter;
};
struct gemlet_audio_pieces {
  std::vector<gemlet::AudioPiece> pieces;
};
struct gemlet_tokenizer {
  std::unique_ptr<gemlet::TextTokenizer> tokenizer;
};
struct gemlet_batch_decoder {
  std::unique_ptr<gemlet::BatchDecoder> decoder;
  std::vector<gemlet::BatchDecoder::Finished> finished;  // the last step's, for gemlet_batch_decoder_finished
};

namespace gemlet::capi {

// ---- errors: a status code and a per-thread message ----
const char* LastError();  // the calling thread's
gemlet_status Fail(gemlet_status code, std::string message);
gemlet_status Report(const Status& s);
gemlet_status NullHandle(const char* what);
gemlet_status BadStruct(const char* what);

// Runs fn, turning anything thrown (allocation failure, a bug) into a status: no exception may
// unwind into C, Swift or the JVM.
template <class Fn>
gemlet_status Guard(Fn fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Fail(GEMLET_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return Fail(GEMLET_ERROR, std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail(GEMLET_ERROR, "internal error");
  }
}

// An options struct from the caller over the defaults: only the fields its struct_size covers, so
// a struct from an older, smaller header keeps defaults for the fields added since.
template <class T>
bool ReadOptions(const T* in, T* out) {
  if (in == nullptr) return true;
  if (in->struct_size < sizeof(size_t) || in->struct_size > sizeof(T)) return false;
  std::memcpy(static_cast<void*>(out), in, in->struct_size);
  out->struct_size = sizeof(T);
  return true;
}

// A result struct to the caller: only what the caller's struct holds (an older, smaller header
// keeps its size). False when `out` is NULL or its struct_size was never set.
template <class T>
bool WriteOut(const T& full, T* out) {
  if (out == nullptr || out->struct_size < sizeof(size_t)) return false;
  const size_t n = out->struct_size < sizeof(T) ? out->struct_size : sizeof(T);
  std::memcpy(static_cast<void*>(out), &full, n);
  out->struct_size = n;
  return true;
}

// A copy the caller frees with gemlet_string_free.
char* CopyOut(const std::string& s);
// A NUL-terminated string that lives as long as the process, for names the C API hands out as
// static (kernel names): the set of such names is small and fixed.
const char* Intern(const std::string& s);
// A count of ids into a caller's buffer (gemlet_tokenize's contract): GEMLET_BUFFER_TOO_SMALL with
// the count when they do not fit.
gemlet_status CopyTokens(const std::vector<int32_t>& ids, int32_t* tokens, size_t capacity, size_t* n_tokens);
// A C stream callback as the C++ API's (empty for NULL): each piece NUL-terminated for C.
StreamCallback ToStreamCallback(gemlet_stream_fn fn, void* user_data);
// A new gemlet_reply holding `reply`.
gemlet_reply* NewReply(Reply reply);

// ---- the converters: one per type and direction, in gemlet_c_convert.cc ----
EngineOptions ToEngineOptions(const gemlet_engine_options& o);
KernelOptions ToKernelOptions(const gemlet_kernel_options& o);
gemlet_kernel_options FromKernelOptions(const KernelOptions& k);
KvCacheType ToKvCacheType(gemlet_kv_type t);
gemlet_kv_type FromKvCacheType(KvCacheType t);
SessionOptions ToSessionOptions(const gemlet_session_options& o);
gemlet_session_options FromSessionOptions(const SessionOptions& s);
// The fields gemlet_session_extra_options holds, over those ToSessionOptions set.
void ApplySessionExtraOptions(const gemlet_session_extra_options& o, SessionOptions* s);
gemlet_session_extra_options FromSessionExtraOptions(const SessionOptions& s);
// false when the arrays it points to are inconsistent (a NULL string, a NULL array with a count).
bool ToGenerateOptions(const gemlet_generate_options& o, GenerateOptions* g);
gemlet_stats FromGenerationStats(const GenerationStats& s);
gemlet_model_info FromModelInfo(const ModelInfo& m);  // pointers into m
gemlet_memory_usage FromMemoryUsage(const MemoryUsage& u);
gemlet_memory_stats FromMemoryStats(const MemoryStats& m);
gemlet_memory_plan FromMemoryPlan(const MemoryPlan& p);  // text points into p
gemlet_session_cost FromSessionCost(const SessionCost& c);
gemlet_process_memory FromProcessMemory(const ProcessMemory& p);
gemlet_thermal_status FromThermalStatus(const ThermalStatus& t);
gemlet_tool_call FromToolCall(const ToolCall& t);  // pointers into t
gemlet_token_logprob FromTokenLogprob(const TokenLogprob& t);
// Each entry's alternatives as C arrays, the storage the logprob accessors point into.
std::vector<std::vector<gemlet_token_logprob>> FromTopLogprobs(const std::vector<TokenLogprobs>& logprobs);
// gemlet_reply_logprob and gemlet_conversation_last_logprob: entry `index` of logprobs (top the
// C copies FromTopLogprobs made of them); `what` names the owner in the out-of-range message.
gemlet_status ReadLogprob(const std::vector<TokenLogprobs>& logprobs,
                          const std::vector<std::vector<gemlet_token_logprob>>& top_copies, size_t index,
                          gemlet_token_logprob* chosen, const gemlet_token_logprob** top, size_t* n_top);
// `calls` are FromToolCall's views of m.tool_calls; the result points into m and calls.
gemlet_message FromMessage(const Message& m, const std::vector<gemlet_tool_call>& calls);
// n messages of the caller's struct_size (that of messages[0]); false (with the last error set)
// when one is malformed.
bool ToMessages(const gemlet_message* messages, size_t n, std::vector<Message>* out);
ChatOptions ToChatOptions(const gemlet_chat_options& o);
// n content parts of the caller's struct_size; false (with the last error set) when malformed.
bool ToContentParts(const gemlet_content_part* parts, size_t n, std::vector<ContentPart>* out);
// The Prompt behind a handle (gemlet_c_media.cc owns the type).
const Prompt* PromptOf(const gemlet_prompt* prompt);
BatchOptions ToBatchOptions(const gemlet_batch_options& o);

}  // namespace gemlet::capi
