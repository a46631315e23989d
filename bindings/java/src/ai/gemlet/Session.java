// Tokens in, tokens out (gemlet_session): generation on the app's own prompts, one KV cache.
package ai.gemlet;

import java.util.Arrays;
import java.util.Objects;

/** One generate() at a time (a second thread waits); cancel() from any thread. */
public final class Session implements AutoCloseable {
  private final Object life = new Object();  // as Conversation's: cancel() must not wait for generate()
  private long handle;
  private long progress;  // the prompt progress callback's native holder (0: none), freed after the session
  private int[] lastDraft = new int[3];
  private int[] lastTokens = new int[0];
  private StopReason lastStop = StopReason.END_OF_TURN;
  private float[] lastLogprobs = new float[0];
  private int[][] lastTopTokens = new int[0][];
  private float[][] lastTopLogprobs = new float[0][];

  Session(long handle) {
    this(handle, 0);
  }

  Session(long handle, long progress) {
    this.handle = handle;
    this.progress = progress;
  }

  /**
   * Evaluates prompt (token ids after those cached) and generates up to maxTokens, streaming to
   * callback (null: none); returns the text. complete: keep the longest prefix of prompt the cache
   * holds (prefix reuse) instead of continuing after it. lastTokens() and lastStopReason() say more.
   */
  public synchronized String generate(int[] prompt, int maxTokens, float temperature, boolean complete,
                                      TokenCallback callback) {
    return generate(prompt, maxTokens, temperature, complete, -1, callback);
  }

  /**
   * The same, with log-probabilities when topLogprobs >= 0 (0 to 20 alternatives per token):
   * lastLogprobs(), lastTopTokens() and lastTopLogprobs() then give them.
   */
  public synchronized String generate(int[] prompt, int maxTokens, float temperature, boolean complete,
                                      int topLogprobs, TokenCallback callback) {
    return generate(prompt, maxTokens, temperature, complete, topLogprobs, 0, callback);
  }

  /**
   * The same, drafting maxDraft tokens per step (0: off) with SessionOptions.draftModel, else by
   * prompt lookup; the tokens are those without it, and lastDraftStats() says how the drafts fared.
   */
  public synchronized String generate(int[] prompt, int maxTokens, float temperature, boolean complete,
                                      int topLogprobs, int maxDraft, TokenCallback callback) {
    Objects.requireNonNull(prompt, "prompt");
    int[] stop = new int[4];
    int[][] tokens = new int[2][];
    float[][] logprobs = new float[2][];
    String text = Gemlet.sessionGenerate(handle(), prompt, maxTokens, temperature, complete, topLogprobs, maxDraft,
                                         callback, stop, tokens, logprobs);
    if (progress != 0) Gemlet.progressRethrow(progress);
    lastStop = StopReason.values()[stop[0]];
    lastDraft = new int[] {stop[1], stop[2], stop[3]};
    lastTokens = tokens[0];
    int n = logprobs[0] == null ? 0 : logprobs[0].length;
    int k = Math.max(topLogprobs, 0);
    lastLogprobs = logprobs[0] == null ? new float[0] : logprobs[0];
    lastTopTokens = new int[n][];
    lastTopLogprobs = new float[n][];
    for (int i = 0; i < n; i++) {
      int have = 0;
      while (have < k && tokens[1][i * k + have] >= 0) have++;
      lastTopTokens[i] = Arrays.copyOfRange(tokens[1], i * k, i * k + have);
      lastTopLogprobs[i] = Arrays.copyOfRange(logprobs[1], i * k, i * k + have);
    }
    return text;
  }

  /** The last generate()'s log-probability (natural log) of each generated token; empty without them. */
  public synchronized float[] lastLogprobs() {
    return lastLogprobs.clone();
  }

  /** Per generated token, the most likely tokens, most likely first. */
  public synchronized int[][] lastTopTokens() {
    return lastTopTokens.clone();
  }

  /** Their log-probabilities, as lastTopTokens(). */
  public synchronized float[][] lastTopLogprobs() {
    return lastTopLogprobs.clone();
  }

  /** The last generate()'s {verification steps, tokens drafted, tokens accepted}. */
  public synchronized int[] lastDraftStats() {
    return lastDraft.clone();
  }

  /** Tokens the cache can take back without evaluating again (SessionOptions.rollbackTokens). */
  public synchronized int rollbackRoom() {
    return Gemlet.sessionRollbackRoom(handle());
  }

  public synchronized int[] lastTokens() {
    return lastTokens.clone();
  }

  public synchronized StopReason lastStopReason() {
    return lastStop;
  }

  /** The memory plan: {file, weights resident, weights on demand, KV cache, activations} bytes. */
  public synchronized long[] memoryPlan() {
    return Gemlet.sessionMemoryPlan(handle());
  }

  /** The memory plan as a readable table. */
  public synchronized String memoryPlanText() {
    return Gemlet.sessionMemoryPlanText(handle());
  }

  /** What the session holds: {KV reserved, KV committed, activations} bytes. */
  public synchronized long[] memoryStats() {
    return Gemlet.sessionMemoryStats(handle());
  }

  public synchronized int nPast() {
    return Gemlet.sessionNPast(handle());
  }

  public void cancel() {
    synchronized (life) {
      if (handle != 0) Gemlet.sessionCancel(handle);
    }
  }

  @Override
  public void close() {
    cancel();
    synchronized (this) {
      synchronized (life) {
        if (handle != 0) {
          Gemlet.sessionFree(handle);
          handle = 0;
          if (progress != 0) Gemlet.progressFree(progress);  // the session no longer calls it
          progress = 0;
        }
      }
    }
  }

  long handle() {
    synchronized (life) {
      if (handle == 0) throw new IllegalStateException("the session is closed");
      return handle;
    }
  }
}
