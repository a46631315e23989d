// A chat with the model (gemlet_conversation): messages in, streamed answers out, cancel from any thread.
package ai.gemlet;

import java.util.Objects;

/**
 * One generate() at a time (a second thread waits); cancel() from any thread, e.g. a Stop button
 * while a background thread generates.
 */
public final class Conversation implements AutoCloseable {
  // Guards the handle's lifetime apart from `this`, which generate() holds: cancel() must not wait
  // for the answer it is stopping, nor reach a handle close() freed.
  private final Object life = new Object();
  private long handle;
  private long progress;  // the prompt progress callback's native holder (0: none), freed after the conversation
  private StopReason lastStop = StopReason.END_OF_TURN;
  private int[] lastDraft = new int[3];

  Conversation(long handle) {
    this(handle, 0);
  }

  Conversation(long handle, long progress) {
    this.handle = handle;
    this.progress = progress;
  }

  /**
   * Sends a user message and streams the answer to callback (null: none); returns the answer, or as
   * much as was generated when the callback returned false or cancel() stopped it (lastStopReason()
   * then says CANCELLED). temperature 0 is greedy; maxTokens <= 0 runs until the context is full.
   */
  public synchronized String generate(String userText, int maxTokens, float temperature, TokenCallback callback) {
    return generate(userText, maxTokens, temperature, 0, callback);
  }

  /**
   * The same with speculative decoding: up to maxDraft tokens drafted per step (by the conversation's
   * draft model, SessionOptions.draftModel, else by prompt lookup) and verified at once; the answer is
   * the one without drafts, and lastDraftStats() says how they fared.
   */
  public synchronized String generate(String userText, int maxTokens, float temperature, int maxDraft,
                                      TokenCallback callback) {
    Objects.requireNonNull(userText, "userText");
    int[] stats = new int[4];
    String reply = Gemlet.conversationSend(handle(), userText, maxTokens, temperature, maxDraft, callback, stats);
    if (progress != 0) Gemlet.progressRethrow(progress);
    lastStop = StopReason.values()[stats[0]];
    lastDraft = new int[] {stats[1], stats[2], stats[3]};
    return reply;
  }

  /** The last generate()'s {verification steps, tokens drafted, tokens accepted}. */
  public synchronized int[] lastDraftStats() {
    return lastDraft.clone();
  }

  public synchronized StopReason lastStopReason() {
    return lastStop;
  }

  /** Thread-safe: stops the generate() running on another thread, in the prompt's evaluation too. */
  public void cancel() {
    synchronized (life) {
      if (handle != 0) Gemlet.conversationCancel(handle);
    }
  }

  /** The user and assistant turns so far: {role, content} pairs. */
  public synchronized String[][] messages() {
    String[] flat = Gemlet.conversationMessages(handle());
    String[][] out = new String[flat.length / 2][];
    for (int i = 0; i < out.length; i++) out[i] = new String[] {flat[2 * i], flat[2 * i + 1]};
    return out;
  }

  /** Replaces the turns ({role, content} pairs, user and assistant), evaluated on the next generate(). */
  public synchronized void setMessages(String[][] messages) {
    Gemlet.conversationSetMessages(handle(), Engine.flatten(messages));
  }

  /** Forgets the messages, keeps the system message. */
  public synchronized void reset() {
    Gemlet.conversationReset(handle());
  }

  @Override
  public void close() {
    cancel();
    synchronized (this) {  // a generate() on another thread returns first
      synchronized (life) {
        if (handle != 0) {
          Gemlet.conversationFree(handle);
          handle = 0;
          if (progress != 0) Gemlet.progressFree(progress);  // the conversation no longer calls it
          progress = 0;
        }
      }
    }
  }

  private long handle() {
    synchronized (life) {
      if (handle == 0) throw new IllegalStateException("the conversation is closed");
      return handle;
    }
  }
}
