// The session options beyond the context size (gemlet_session_options + gemlet_session_extra_options),
// for Engine.newSession(SessionOptions) and Engine.newConversation(String, SessionOptions).
package ai.gemlet;

/** Setters chain: {@code new SessionOptions().nCtx(512).rollbackTokens(64)}. Unset: the library's defaults. */
public final class SessionOptions {
  int nCtx = 0;
  int maxBatch = 0;
  // A flag, not a sentinel value: any int goes to the library, which reports a bad one itself.
  boolean setRollback = false;
  int rollbackTokens = 0;
  Engine draftModel = null;
  PromptProgress progress = null;

  /** The context size; 0: the model's training context, at most 4096. */
  public SessionOptions nCtx(int nCtx) {
    this.nCtx = nCtx;
    return this;
  }

  /** Prompt tokens per forward chunk (and so per progress call); 0: the library's (512). */
  public SessionOptions maxBatch(int maxBatch) {
    this.maxBatch = maxBatch;
    return this;
  }

  /** Tokens the cache can take back without evaluating again (the library's default: 16). */
  public SessionOptions rollbackTokens(int rollbackTokens) {
    this.setRollback = true;
    this.rollbackTokens = rollbackTokens;
    return this;
  }

  /**
   * Speculative decoding with a smaller model of the same vocabulary, used by generate()'s maxDraft;
   * the tokens are those decoding without it gives. The session keeps its own reference, so the
   * draft engine may be closed once the session is made. null: prompt lookup.
   */
  public SessionOptions draftModel(Engine draftModel) {
    this.draftModel = draftModel;
    return this;
  }

  /** Called as a long prompt is evaluated; null: none. */
  public SessionOptions progress(PromptProgress progress) {
    this.progress = progress;
    return this;
  }
}
