// Why an answer ended, in gemlet_stop_reason's order (the JNI glue passes the C value as an index).
package ai.gemlet;

public enum StopReason {
  END_OF_TURN,
  STOP_STRING,
  MAX_TOKENS,
  CONTEXT_FULL,
  CANCELLED
}
