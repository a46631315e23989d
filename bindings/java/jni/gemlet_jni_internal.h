// What the JNI glue's files (gemlet_jni*.cc) share: string conversion both ways (UTF-16, not JNI's
// modified UTF-8), GemletException from the last error, handles as longs, the stream callback.
#pragma once

#include <jni.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gemlet/gemlet.h"

namespace gemlet_jni {

extern jclass g_exception_class;  // ai.gemlet.GemletException
extern jmethodID g_exception_init;
extern jmethodID g_on_chunk;  // TokenCallback.onChunk(int, String)

std::string ToUtf8(JNIEnv* env, jstring s);
jstring ToJava(JNIEnv* env, const char* text, size_t len);
jstring ToJava(JNIEnv* env, const char* text);
// Throws GemletException with the calling thread's gemlet_last_error(); true when it did.
bool Throw(JNIEnv* env, gemlet_status status);
jlong ToLong(void* p);
jobjectArray StringArray(JNIEnv* env, const std::vector<std::string>& items);
jlongArray LongArray(JNIEnv* env, const std::vector<jlong>& items);

template <class T>
T* Handle(jlong h) {
  return reinterpret_cast<T*>(static_cast<intptr_t>(h));
}

// What the stream callback needs: it runs on the thread that called send, so env is valid there.
struct Stream {
  JNIEnv* env;
  jobject callback;
  bool threw = false;
};
// A gemlet_stream_fn over a Stream: the callback's false or exception stops the answer.
bool OnChunk(gemlet_chunk_kind kind, const char* text, size_t len, void* user_data);
// A reply's logprobs for Java, k alternatives per token in flat arrays: logprobs[0] the chosen
// tokens' (n), logprobs[1] the alternatives' (n * k, NaN where a token has fewer), tokens[1] their
// ids (-1 there). False with a Java exception pending.
bool StoreLogprobs(JNIEnv* env, const gemlet_reply* reply, int k, jobjectArray tokens, jobjectArray logprobs);

}  // namespace gemlet_jni
