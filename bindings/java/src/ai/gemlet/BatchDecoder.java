// Several sessions' requests stepped together (gemlet_batch_decoder): one forward per step, for servers.
package ai.gemlet;

import java.util.Objects;

/**
 * One thread submits and steps; cancel() may come from any thread. Each request behaves as
 * Session.generate(..., complete = true, ...) on its own session, which runs nothing else meanwhile.
 */
public final class BatchDecoder implements AutoCloseable {
  /** A request that finished in a step: its answer, or the error that ended it. */
  public static final class Finished {
    public final int id;
    public final String text;       // null on error
    public final int[] tokens;
    public final StopReason stop;   // null on error
    /** A GemletException (the request failed) or what its callback threw; null when it succeeded. */
    public final RuntimeException error;

    Finished(int id, String text, int[] tokens, StopReason stop, RuntimeException error) {
      this.id = id;
      this.text = text;
      this.tokens = tokens;
      this.stop = stop;
      this.error = error;
    }
  }

  private final Object life = new Object();  // cancel() must not wait for step(), nor reach a freed decoder
  private long handle;

  /** maxRequests and prefillChunk 0: the defaults (8, 256). */
  public BatchDecoder(Engine engine, int maxRequests, int prefillChunk) {
    handle = Gemlet.batchCreate(engine.handle(), maxRequests, prefillChunk);
  }

  /**
   * Starts a request on session; callback (null: none) gets its pieces on the thread calling step(),
   * and its false, or an exception, ends the request (the exception in its Finished.error).
   * Returns its id; GemletException (INVALID_ARGUMENT) when maxRequests are running.
   */
  public synchronized int submit(Session session, int[] prompt, int maxTokens, float temperature,
                                 TokenCallback callback) {
    Objects.requireNonNull(prompt, "prompt");
    return Gemlet.batchSubmit(handle(), session.handle(), prompt, maxTokens, temperature, callback);
  }

  /** One step of every running request; the requests that finished in it. */
  public synchronized Finished[] step() {
    long h = handle();
    int n = Gemlet.batchStep(h);
    Finished[] done = new Finished[n];
    for (int i = 0; i < n; i++) {
      int[] idAndStop = new int[2];
      int[][] tokens = new int[1][];
      try {
        String text = Gemlet.batchFinished(h, i, idAndStop, tokens);
        done[i] = new Finished(idAndStop[0], text, tokens[0], StopReason.values()[idAndStop[1]], null);
      } catch (RuntimeException e) {
        done[i] = new Finished(idAndStop[0], null, new int[0], null, e);
      }
    }
    return done;
  }

  /** Thread-safe: the request ends at the next step with StopReason.CANCELLED. */
  public void cancel(int id) {
    synchronized (life) {
      if (handle != 0) Gemlet.batchCancel(handle, id);
    }
  }

  public synchronized int running() {
    return Gemlet.batchRunning(handle());
  }

  @Override
  public synchronized void close() {
    synchronized (life) {
      if (handle != 0) {
        Gemlet.batchFree(handle);
        handle = 0;
      }
    }
  }

  private long handle() {
    synchronized (life) {
      if (handle == 0) throw new IllegalStateException("the batch decoder is closed");
      return handle;
    }
  }
}
