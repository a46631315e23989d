// A tokenizer without a model (gemlet_tokenizer): count and split text before, or without, loading weights.
package ai.gemlet;

import java.util.Objects;

/** From a GGUF's tokenizer metadata, a tokenizer.json or a tokenizer.model; usable from any thread. */
public final class Tokenizer implements AutoCloseable {
  private long handle;

  private Tokenizer(long handle) {
    this.handle = handle;
  }

  /** Throws GemletException for a file that is missing or holds no tokenizer. */
  public static Tokenizer open(String path) {
    return new Tokenizer(Gemlet.tokenizerOpen(Objects.requireNonNull(path, "path")));
  }

  /** addSpecial: BOS (and EOS) as the model's tokenizer adds them; parseSpecial: "<start_of_turn>" is its token. */
  public int[] encode(String text, boolean addSpecial, boolean parseSpecial) {
    return Gemlet.tokenizerEncode(handle(), Objects.requireNonNull(text, "text"), addSpecial, parseSpecial);
  }

  public String decode(int[] tokens) {
    return Gemlet.tokenizerDecode(handle(), Objects.requireNonNull(tokens, "tokens"));
  }

  /** The vocabulary's piece ("▁the", "<0x0A>"); "" out of range. */
  public String piece(int token) {
    return Gemlet.tokenizerPiece(handle(), token);
  }

  public int vocabSize() {
    return Gemlet.tokenizerVocabSize(handle());
  }

  // Closing while another thread encodes would free what it reads: close after the last use.
  @Override
  public synchronized void close() {
    if (handle != 0) {
      Gemlet.tokenizerFree(handle);
      handle = 0;
    }
  }

  private synchronized long handle() {
    if (handle == 0) throw new IllegalStateException("the tokenizer is closed");
    return handle;
  }
}
