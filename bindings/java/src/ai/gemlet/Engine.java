// A loaded model (gemlet_engine): what an app opens once and shares between its conversations.
package ai.gemlet;

import java.util.Objects;

/** Immutable weights, shared by its conversations and usable from any thread. */
public final class Engine implements AutoCloseable {
  private long handle;

  private Engine(long handle) {
    this.handle = handle;
  }

  /** Loads a GGUF file; nThreads 0 uses every hardware thread. Throws GemletException. */
  public static Engine load(String path, int nThreads) {
    return new Engine(Gemlet.engineLoad(Objects.requireNonNull(path, "path"), nThreads));
  }

  public Conversation newConversation(String system, int nCtx) {
    return new Conversation(Gemlet.conversationCreate(handle(), system, nCtx));
  }

  public Session newSession(int nCtx) {
    return new Session(Gemlet.sessionCreate(handle(), nCtx));
  }

  /** A session with rollback room, a draft model or prompt progress (SessionOptions). */
  public Session newSession(SessionOptions options) {
    Objects.requireNonNull(options, "options");
    long[] holder = new long[1];
    long session = Gemlet.sessionCreate2(handle(), options.nCtx, options.maxBatch, options.setRollback,
                                         options.rollbackTokens, draftHandle(options), options.progress, holder);
    return new Session(session, holder[0]);
  }

  /** A conversation over such a session; system null: no system message. */
  public Conversation newConversation(String system, SessionOptions options) {
    Objects.requireNonNull(options, "options");
    long[] holder = new long[1];
    long conversation = Gemlet.conversationCreate2(handle(), system, options.nCtx, options.maxBatch,
                                                   options.setRollback, options.rollbackTokens,
                                                   draftHandle(options), options.progress, holder);
    return new Conversation(conversation, holder[0]);
  }

  private static long draftHandle(SessionOptions options) {
    return options.draftModel == null ? 0 : options.draftModel.handle();
  }

  /** {architecture, name, chat format, file type}. */
  public String[] infoText() {
    return Gemlet.engineInfoText(handle());
  }

  /** {n_vocab, n_ctx_train, n_layers, d_model}. */
  public long[] infoNumbers() {
    return Gemlet.engineInfoNumbers(handle());
  }

  /**
   * The session options that fit budgetBytes: {nCtx, Gemlet.KV_*}; note[0] (if note is not null)
   * says what was changed. Throws GemletException (INVALID_ARGUMENT) when even the floor does not fit.
   */
  public int[] fitToBudget(long budgetBytes, int nCtx, int kvType, String[] note) {
    return Gemlet.fitToBudget(handle(), budgetBytes, nCtx, kvType, note);
  }

  /** The model's chat format applied to {role, content} messages, as text with its markup (no BOS). */
  public String applyChatTemplate(String[][] messages, boolean addGenerationPrompt) {
    return Gemlet.applyChatTemplate(handle(), flatten(messages), addGenerationPrompt);
  }

  /** The same prompt as tokens, BOS first, ready for Session.generate(..., complete = true, ...). */
  public int[] tokenizeChat(String[][] messages, boolean addGenerationPrompt, boolean thinking) {
    return Gemlet.tokenizeChat(handle(), flatten(messages), addGenerationPrompt, thinking);
  }

  static String[] flatten(String[][] messages) {
    String[] flat = new String[messages.length * 2];
    for (int i = 0; i < messages.length; i++) {
      flat[2 * i] = Objects.requireNonNull(messages[i][0], "role");
      flat[2 * i + 1] = Objects.requireNonNull(messages[i][1], "content");
    }
    return flat;
  }

  public int nVocab() {
    return Gemlet.engineNVocab(handle());
  }

  public String architecture() {
    return Gemlet.engineArchitecture(handle());
  }

  public int[] tokenize(String text, boolean addSpecial) {
    return Gemlet.tokenize(handle(), Objects.requireNonNull(text, "text"), addSpecial);
  }

  public String detokenize(int[] tokens) {
    return Gemlet.detokenize(handle(), Objects.requireNonNull(tokens, "tokens"));
  }

  // Platform signals, from the app's callbacks.

  /** PowerManager.OnThermalStatusChangedListener, mapped to Gemlet.THERMAL_*. */
  public void setThermalState(int state) {
    Gemlet.engineSetThermalState(handle(), state);
  }

  /** ComponentCallbacks2.onTrimMemory's level, as it comes. */
  public void onTrimMemory(int level) {
    Gemlet.engineMemoryWarning(handle(), level);
  }

  public void onBackground() {
    Gemlet.engineOnBackground(handle());
  }

  public void onForeground() {
    Gemlet.engineOnForeground(handle());
  }

  /** Conversations keep the weights alive: close in any order. */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      Gemlet.engineFree(handle);
      handle = 0;
    }
  }

  synchronized long handle() {
    if (handle == 0) throw new IllegalStateException("the engine is closed");
    return handle;
  }
}
