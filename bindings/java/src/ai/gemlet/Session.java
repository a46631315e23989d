// Tokens in, tokens out (gemlet_session): generation on the app's own prompts, one KV cache.
package ai.gemlet;

import java.util.Objects;

/** One generate() at a time (a second thread waits); cancel() from any thread. */
public final class Session implements AutoCloseable {
  private final Object life = new Object();  // as Conversation's: cancel() must not wait for generate()
  private long handle;
  private int[] lastTokens = new int[0];
  private StopReason lastStop = StopReason.END_OF_TURN;

  Session(long handle) {
    this.handle = handle;
  }

  /**
   * Evaluates prompt (token ids after those cached) and generates up to maxTokens, streaming to
   * callback (null: none); returns the text. complete: keep the longest prefix of prompt the cache
   * holds (prefix reuse) instead of continuing after it. lastTokens() and lastStopReason() say more.
   */
  public synchronized String generate(int[] prompt, int maxTokens, float temperature, boolean complete,
                                      TokenCallback callback) {
    Objects.requireNonNull(prompt, "prompt");
    int[] stop = new int[1];
    int[][] tokens = new int[1][];
    String text = Gemlet.sessionGenerate(handle(), prompt, maxTokens, temperature, complete, callback, stop, tokens);
    lastStop = StopReason.values()[stop[0]];
    lastTokens = tokens[0];
    return text;
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
        }
      }
    }
  }

  private long handle() {
    synchronized (life) {
      if (handle == 0) throw new IllegalStateException("the session is closed");
      return handle;
    }
  }
}
