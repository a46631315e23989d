// The streaming callback of Conversation.generate: one call per piece of the answer.
package ai.gemlet;

/**
 * Receives the answer as it is generated, on the thread that called generate(). Each piece is
 * whole characters (never half of a surrogate pair). Return false to stop the answer.
 */
@FunctionalInterface
public interface TokenCallback {
  boolean onText(String text);

  /**
   * Every piece with its kind (Gemlet.CHUNK_TEXT, CHUNK_THINKING, CHUNK_TOOL_CALL); the default
   * passes the answer's text to onText and lets thinking and tool calls go by.
   */
  default boolean onChunk(int kind, String text) {
    return kind != Gemlet.CHUNK_TEXT || onText(text);
  }
}
