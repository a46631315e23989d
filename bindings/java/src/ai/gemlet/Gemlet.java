// The native methods of the Java binding (bindings/java/jni/gemlet_jni.cc) and the constants of gemlet.h.
package ai.gemlet;

/**
 * Loads libgemlet_jni (which brings libgemlet) and declares its native methods; apps use Engine
 * and Conversation. Handles are the C API's pointers held as longs.
 */
public final class Gemlet {
  /** The gemlet.h ABI these classes were written for (GEMLET_ABI_VERSION). */
  public static final int ABI_VERSION = 1;

  static {
    System.loadLibrary("gemlet_jni");
    // A libgemlet of another ABI (swapped under the app) would misread the glue's structs: refuse it.
    if (abiVersion() != ABI_VERSION) {
      throw new UnsatisfiedLinkError("libgemlet ABI " + abiVersion() + ", ai.gemlet needs " + ABI_VERSION);
    }
  }

  private Gemlet() {}

  public static final int CHUNK_TEXT = 0;
  public static final int CHUNK_THINKING = 1;
  public static final int CHUNK_TOOL_CALL = 2;

  // Thermal states (iOS ProcessInfo.ThermalState; Android's THERMAL_STATUS_NONE/LIGHT are NOMINAL,
  // MODERATE is FAIR, SEVERE is SERIOUS, CRITICAL and above are CRITICAL).
  public static final int THERMAL_NOMINAL = 0;
  public static final int THERMAL_FAIR = 1;
  public static final int THERMAL_SERIOUS = 2;
  public static final int THERMAL_CRITICAL = 3;

  /** The library's version, "0.1.0". */
  public static native String version();
  /** The library's ABI (gemlet_abi_version). */
  public static native int abiVersion();

  // KV cache types (gemlet_kv_type).
  public static final int KV_F16 = 0;
  public static final int KV_F32 = 1;
  public static final int KV_Q8_0 = 2;
  public static final int KV_Q4_0 = 3;

  // {architecture, name, chat format, file type} and {n_vocab, n_ctx_train, n_layers, d_model}.
  static native String[] engineInfoText(long engine);
  static native long[] engineInfoNumbers(long engine);
  // {n_ctx, kv type}; note[0] receives what was changed. Throws when even the floor does not fit.
  static native int[] fitToBudget(long engine, long budget, int nCtx, int kvType, String[] note);
  static native long sessionCreate(long engine, int nCtx);
  static native void sessionFree(long session);
  static native void sessionCancel(long session);
  static native int sessionNPast(long session);
  // Returns the text; stop[0] the gemlet_stop_reason, tokens[0] the generated ids. topLogprobs >= 0:
  // logprobs[0] the chosen tokens' log-probabilities, logprobs[1] and tokens[1] their topLogprobs
  // alternatives each, flat (NaN and -1 where a token has fewer).
  static native String sessionGenerate(long session, int[] prompt, int maxTokens, float temperature, boolean complete,
                                       int topLogprobs, int maxDraft, TokenCallback callback, int[] stop,
                                       int[][] tokens, float[][] logprobs);
  // The session extras (gemlet_jni_extra.cc): creation with a SessionOptions, whose progress
  // callback needs a native holder (progress[0]) that lives as long as the session or conversation.
  static native long sessionCreate2(long engine, int nCtx, int maxBatch, boolean setRollback, int rollbackTokens,
                                    long draftEngine, PromptProgress progress, long[] holder);
  static native long conversationCreate2(long engine, String system, int nCtx, int maxBatch, boolean setRollback,
                                         int rollbackTokens, long draftEngine, PromptProgress progress,
                                         long[] holder);
  static native void progressFree(long holder);
  // Throws what the progress callback threw during the last call (it cancelled that call); no-op else.
  static native void progressRethrow(long holder);
  static native int sessionRollbackRoom(long session);
  // Messages cross as {role, content, role, content, ...}.
  static native String applyChatTemplate(long engine, String[] rolesAndContents, boolean addGenerationPrompt);
  static native int[] tokenizeChat(long engine, String[] rolesAndContents, boolean addGenerationPrompt,
                                   boolean thinking);
  static native long tokenizerOpen(String path);
  static native void tokenizerFree(long tokenizer);
  static native int[] tokenizerEncode(long tokenizer, String text, boolean addSpecial, boolean parseSpecial);
  static native String tokenizerDecode(long tokenizer, int[] tokens);
  static native String tokenizerPiece(long tokenizer, int token);
  static native int tokenizerVocabSize(long tokenizer);
  // The batch decoder; 0 for maxRequests or prefillChunk: the default.
  static native long batchCreate(long engine, int maxRequests, int prefillChunk);
  static native void batchFree(long batch);
  static native int batchSubmit(long batch, long session, int[] prompt, int maxTokens, float temperature,
                                TokenCallback callback);
  // How many requests finished; batchFinished(i) reads each: idAndStop {id, stop reason},
  // tokens[0] the ids, the text returned (or the request's error thrown, its id written first).
  static native int batchStep(long batch);
  static native String batchFinished(long batch, int index, int[] idAndStop, int[][] tokens);
  static native void batchCancel(long batch, int id);
  static native int batchRunning(long batch);
  static native long[] sessionMemoryPlan(long session);
  static native String sessionMemoryPlanText(long session);
  static native long[] sessionMemoryStats(long session);
  // The turns as {role, content, role, content, ...}, and back.
  static native String[] conversationMessages(long conversation);
  static native void conversationSetMessages(long conversation, String[] rolesAndContents);

  static native long engineLoad(String path, int nThreads);
  static native void engineFree(long engine);
  static native int engineNVocab(long engine);
  static native String engineArchitecture(long engine);
  static native int[] tokenize(long engine, String text, boolean addSpecial);
  static native String detokenize(long engine, int[] tokens);
  static native void engineSetThermalState(long engine, int state);
  static native void engineMemoryWarning(long engine, int level);
  static native void engineOnBackground(long engine);
  static native void engineOnForeground(long engine);

  static native long conversationCreate(long engine, String system, int nCtx);
  static native void conversationFree(long conversation);
  // Returns the answer (as far as it got); stats receives {gemlet_stop_reason, verification steps,
  // tokens drafted, tokens accepted}. maxDraft: speculative decoding's drafts per step (0: off).
  static native String conversationSend(long conversation, String text, int maxTokens, float temperature,
                                        int maxDraft, TokenCallback callback, int[] stats);
  static native void conversationCancel(long conversation);
  static native void conversationReset(long conversation);
}
