// JNI glue, continued: a reply's logprobs, the chat format (apply / tokenize), the tokenizer without
// a model, and the batch decoder, over the C API (gemlet.h).
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ai_gemlet_Gemlet.h"
#include "gemlet/gemlet.h"
#include "gemlet_jni_internal.h"

namespace gemlet_jni {

bool StoreLogprobs(JNIEnv* env, const gemlet_reply* reply, int k, jobjectArray tokens, jobjectArray logprobs) {
  const size_t n = gemlet_reply_n_logprobs(reply);
  std::vector<jfloat> chosen(n);
  std::vector<jfloat> top_values(n * static_cast<size_t>(k), NAN);
  std::vector<jint> top_ids(n * static_cast<size_t>(k), -1);
  for (size_t i = 0; i < n; ++i) {
    gemlet_token_logprob c{};
    const gemlet_token_logprob* top = nullptr;
    size_t n_top = 0;
    if (Throw(env, gemlet_reply_logprob(reply, i, &c, &top, &n_top))) return false;
    chosen[i] = c.logprob;
    for (size_t j = 0; j < n_top && j < static_cast<size_t>(k); ++j) {
      top_values[i * k + j] = top[j].logprob;
      top_ids[i * k + j] = top[j].token;
    }
  }
  jfloatArray a = env->NewFloatArray(static_cast<jsize>(chosen.size()));
  jfloatArray b = env->NewFloatArray(static_cast<jsize>(top_values.size()));
  jintArray c = env->NewIntArray(static_cast<jsize>(top_ids.size()));
  if (a == nullptr || b == nullptr || c == nullptr) return false;  // OutOfMemoryError is pending
  env->SetFloatArrayRegion(a, 0, static_cast<jsize>(chosen.size()), chosen.data());
  env->SetFloatArrayRegion(b, 0, static_cast<jsize>(top_values.size()), top_values.data());
  env->SetIntArrayRegion(c, 0, static_cast<jsize>(top_ids.size()), top_ids.data());
  env->SetObjectArrayElement(logprobs, 0, a);
  env->SetObjectArrayElement(logprobs, 1, b);
  env->SetObjectArrayElement(tokens, 1, c);
  return true;
}

namespace {

// {role, content, role, content, ...} from Java as gemlet_message views; `text` owns the strings.
std::vector<gemlet_message> Messages(JNIEnv* env, jobjectArray flat, std::vector<std::string>* text) {
  const jsize n = env->GetArrayLength(flat);
  text->assign(static_cast<size_t>(n), std::string());
  for (jsize i = 0; i < n; ++i) {
    auto s = static_cast<jstring>(env->GetObjectArrayElement(flat, i));
    (*text)[static_cast<size_t>(i)] = ToUtf8(env, s);
    env->DeleteLocalRef(s);
  }
  std::vector<gemlet_message> messages(static_cast<size_t>(n / 2), gemlet_message_default());
  for (size_t i = 0; i < messages.size(); ++i) {
    messages[i].role = (*text)[2 * i].c_str();
    messages[i].content = (*text)[2 * i + 1].c_str();
  }
  return messages;
}

jintArray IntArray(JNIEnv* env, const std::vector<int32_t>& ids) {
  jintArray out = env->NewIntArray(static_cast<jsize>(ids.size()));
  if (out != nullptr && !ids.empty()) {
    env->SetIntArrayRegion(out, 0, static_cast<jsize>(ids.size()), reinterpret_cast<const jint*>(ids.data()));
  }
  return out;
}

// A batch decoder and, per running request, its Java callback and the exception the callback
// threw. The callbacks run inside gemlet_batch_decoder_step on the stepping thread, whose env
// `env` holds for the step; an exception is taken (cleared) at once, so that the other requests'
// callbacks in the same step can still call into Java, and handed to that request's result.
struct Batch;
struct Request {
  Batch* batch;
  jobject callback = nullptr;  // global reference; NULL: none
  jthrowable error = nullptr;  // global reference
};
struct Batch {
  gemlet_batch_decoder* decoder = nullptr;
  JNIEnv* env = nullptr;
  std::map<int, std::unique_ptr<Request>> requests;
};

void Forget(JNIEnv* env, Batch* b, int id) {
  auto it = b->requests.find(id);
  if (it == b->requests.end()) return;
  if (it->second->callback) env->DeleteGlobalRef(it->second->callback);
  if (it->second->error) env->DeleteGlobalRef(it->second->error);
  b->requests.erase(it);
}

bool OnBatchChunk(gemlet_chunk_kind kind, const char* text, size_t len, void* user_data) {
  auto* r = static_cast<Request*>(user_data);
  JNIEnv* env = r->batch->env;
  if (r->error != nullptr || r->callback == nullptr) return r->error == nullptr;
  jstring piece = ToJava(env, text, len);
  jboolean go = JNI_FALSE;
  if (piece != nullptr) {
    go = env->CallBooleanMethod(r->callback, g_on_chunk, static_cast<jint>(kind), piece);
    env->DeleteLocalRef(piece);
  }
  if (env->ExceptionCheck()) {  // the callback threw (or no memory for the piece): stop this request
    jthrowable t = env->ExceptionOccurred();
    env->ExceptionClear();
    r->error = static_cast<jthrowable>(env->NewGlobalRef(t));
    env->DeleteLocalRef(t);
    return false;
  }
  return go == JNI_TRUE;
}

}  // namespace
}  // namespace gemlet_jni

using namespace gemlet_jni;

extern "C" {

// ---- the chat format ----

JNIEXPORT jstring JNICALL Java_ai_gemlet_Gemlet_applyChatTemplate(JNIEnv* env, jclass, jlong engine,
                                                                   jobjectArray flat, jboolean add_generation_prompt) {
  std::vector<std::string> text;
  const std::vector<gemlet_message> m = Messages(env, flat, &text);
  char* out = nullptr;
  if (Throw(env, gemlet_engine_apply_chat_template(Handle<gemlet_engine>(engine), m.data(), m.size(),
                                                   add_generation_prompt, &out))) {
    return nullptr;
  }
  jstring result = ToJava(env, out);
  gemlet_string_free(out);
  return result;
}

JNIEXPORT jintArray JNICALL Java_ai_gemlet_Gemlet_tokenizeChat(JNIEnv* env, jclass, jlong engine, jobjectArray flat,
                                                               jboolean add_generation_prompt, jboolean thinking) {
  std::vector<std::string> text;
  const std::vector<gemlet_message> m = Messages(env, flat, &text);
  gemlet_chat_options o = gemlet_chat_options_default();
  o.add_generation_prompt = add_generation_prompt;
  o.thinking = thinking;
  auto* e = Handle<gemlet_engine>(engine);
  size_t n = 0;
  // First the count (a GEMLET_BUFFER_TOO_SMALL that reports it), then the ids.
  gemlet_status status = gemlet_engine_tokenize_chat(e, m.data(), m.size(), &o, nullptr, 0, &n);
  std::vector<int32_t> ids(n);
  if (status == GEMLET_BUFFER_TOO_SMALL) status = gemlet_engine_tokenize_chat(e, m.data(), m.size(), &o, ids.data(), n, &n);
  if (Throw(env, status)) return nullptr;
  ids.resize(n);
  return IntArray(env, ids);
}

// ---- the tokenizer without a model ----

JNIEXPORT jlong JNICALL Java_ai_gemlet_Gemlet_tokenizerOpen(JNIEnv* env, jclass, jstring path) {
  const std::string p = ToUtf8(env, path);
  gemlet_tokenizer* t = nullptr;
  if (Throw(env, gemlet_tokenizer_open(p.c_str(), &t))) return 0;
  return ToLong(t);
}

JNIEXPORT void JNICALL Java_ai_gemlet_Gemlet_tokenizerFree(JNIEnv*, jclass, jlong tokenizer) {
  gemlet_tokenizer_free(Handle<gemlet_tokenizer>(tokenizer));
}

JNIEXPORT jintArray JNICALL Java_ai_gemlet_Gemlet_tokenizerEncode(JNIEnv* env, jclass, jlong tokenizer, jstring text,
                                                                  jboolean add_special, jboolean parse_special) {
  const std::string t = ToUtf8(env, text);
  auto* tok = Handle<gemlet_tokenizer>(tokenizer);
  size_t n = 0;
  gemlet_status status = gemlet_tokenizer_encode(tok, t.data(), t.size(), add_special, parse_special, nullptr, 0, &n);
  std::vector<int32_t> ids(n);
  if (status == GEMLET_BUFFER_TOO_SMALL) {
    status = gemlet_tokenizer_encode(tok, t.data(), t.size(), add_special, parse_special, ids.data(), n, &n);
  }
  if (Throw(env, status)) return nullptr;
  ids.resize(n);
  return IntArray(env, ids);
}

JNIEXPORT jstring JNICALL Java_ai_gemlet_Gemlet_tokenizerDecode(JNIEnv* env, jclass, jlong tokenizer, jintArray tokens) {
  const jsize n = env->GetArrayLength(tokens);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  if (n > 0) env->GetIntArrayRegion(tokens, 0, n, reinterpret_cast<jint*>(ids.data()));
  char* text = nullptr;
  if (Throw(env, gemlet_tokenizer_decode(Handle<gemlet_tokenizer>(tokenizer), ids.data(), ids.size(), &text))) {
    return nullptr;
  }
  jstring out = ToJava(env, text);
  gemlet_string_free(text);
  return out;
}

JNIEXPORT jstring JNICALL Java_ai_gemlet_Gemlet_tokenizerPiece(JNIEnv* env, jclass, jlong tokenizer, jint token) {
  char* piece = nullptr;
  if (Throw(env, gemlet_tokenizer_piece(Handle<gemlet_tokenizer>(tokenizer), token, &piece))) return nullptr;
  jstring out = ToJava(env, piece);
  gemlet_string_free(piece);
  return out;
}

JNIEXPORT jint JNICALL Java_ai_gemlet_Gemlet_tokenizerVocabSize(JNIEnv*, jclass, jlong tokenizer) {
  return gemlet_tokenizer_vocab_size(Handle<gemlet_tokenizer>(tokenizer));
}

// ---- the batch decoder ----

JNIEXPORT jlong JNICALL Java_ai_gemlet_Gemlet_batchCreate(JNIEnv* env, jclass, jlong engine, jint max_requests,
                                                          jint prefill_chunk) {
  gemlet_batch_options o = gemlet_batch_options_default();
  if (max_requests > 0) o.max_requests = max_requests;
  if (prefill_chunk > 0) o.prefill_chunk = prefill_chunk;
  auto b = std::make_unique<Batch>();
  if (Throw(env, gemlet_batch_decoder_create(Handle<gemlet_engine>(engine), &o, &b->decoder))) return 0;
  return ToLong(b.release());
}

JNIEXPORT void JNICALL Java_ai_gemlet_Gemlet_batchFree(JNIEnv* env, jclass, jlong batch) {
  auto* b = Handle<Batch>(batch);
  if (b == nullptr) return;
  gemlet_batch_decoder_free(b->decoder);
  while (!b->requests.empty()) Forget(env, b, b->requests.begin()->first);
  delete b;
}

JNIEXPORT jint JNICALL Java_ai_gemlet_Gemlet_batchSubmit(JNIEnv* env, jclass, jlong batch, jlong session,
                                                         jintArray prompt, jint max_tokens, jfloat temperature,
                                                         jobject callback) {
  auto* b = Handle<Batch>(batch);
  const jsize n = env->GetArrayLength(prompt);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  if (n > 0) env->GetIntArrayRegion(prompt, 0, n, reinterpret_cast<jint*>(ids.data()));
  gemlet_generate_options g = gemlet_generate_options_default();
  g.max_tokens = max_tokens;
  g.temperature = temperature;
  auto r = std::make_unique<Request>();
  r->batch = b;
  int id = 0;
  if (Throw(env, gemlet_batch_decoder_submit(b->decoder, Handle<gemlet_session>(session), ids.data(), ids.size(), &g,
                                             OnBatchChunk, r.get(), &id))) {
    return 0;
  }
  // The callback outlives this call (it runs in later steps): a global reference keeps it.
  if (callback != nullptr) r->callback = env->NewGlobalRef(callback);
  b->requests[id] = std::move(r);
  return id;
}

JNIEXPORT jint JNICALL Java_ai_gemlet_Gemlet_batchStep(JNIEnv* env, jclass, jlong batch) {
  auto* b = Handle<Batch>(batch);
  b->env = env;
  size_t n = 0;
  if (Throw(env, gemlet_batch_decoder_step(b->decoder, &n))) return 0;
  return static_cast<jint>(n);
}

// Finished request `index` of the last step: idAndStop receives {id, stop reason}, tokens[0] the
// ids; returns the text. A failed request, or one whose callback threw, throws that (id written).
JNIEXPORT jstring JNICALL Java_ai_gemlet_Gemlet_batchFinished(JNIEnv* env, jclass, jlong batch, jint index,
                                                              jintArray id_and_stop, jobjectArray tokens) {
  auto* b = Handle<Batch>(batch);
  int id = 0;
  gemlet_reply* reply = nullptr;
  const gemlet_status status = gemlet_batch_decoder_finished(b->decoder, static_cast<size_t>(index), &id, &reply);
  const jint id_out = id;
  env->SetIntArrayRegion(id_and_stop, 0, 1, &id_out);
  jthrowable error = nullptr;
  if (auto it = b->requests.find(id); it != b->requests.end() && it->second->error != nullptr) {
    error = static_cast<jthrowable>(env->NewLocalRef(it->second->error));
  }
  Forget(env, b, id);
  if (error != nullptr) {
    gemlet_reply_free(reply);
    env->Throw(error);
    return nullptr;
  }
  if (Throw(env, status)) return nullptr;
  gemlet_stats stats = gemlet_stats_default();
  gemlet_reply_stats(reply, &stats);
  const jint stop = static_cast<jint>(stats.stop);
  env->SetIntArrayRegion(id_and_stop, 1, 1, &stop);
  size_t n = 0;
  const int32_t* out = gemlet_reply_tokens(reply, &n);
  jintArray ids = IntArray(env, std::vector<int32_t>(out, out + n));
  if (ids != nullptr) env->SetObjectArrayElement(tokens, 0, ids);
  jstring text = ToJava(env, gemlet_reply_text(reply));
  gemlet_reply_free(reply);
  return text;
}

JNIEXPORT void JNICALL Java_ai_gemlet_Gemlet_batchCancel(JNIEnv*, jclass, jlong batch, jint id) {
  gemlet_batch_decoder_cancel(Handle<Batch>(batch)->decoder, id);
}

JNIEXPORT jint JNICALL Java_ai_gemlet_Gemlet_batchRunning(JNIEnv*, jclass, jlong batch) {
  return gemlet_batch_decoder_running(Handle<Batch>(batch)->decoder);
}

}  // extern "C"
