// The native methods of the Java binding (bindings/java/jni/gemlet_jni.cc) and the constants of gemlet.h.
package ai.gemlet;

/**
 * Loads libgemlet_jni (which brings libgemlet) and declares its native methods; apps use Engine
 * and Conversation. Handles are the C API's pointers held as longs.
 */
public final class Gemlet {
  static {
    System.loadLibrary("gemlet_jni");
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
  // Returns the answer (as far as it got); stop[0] receives the gemlet_stop_reason.
  static native String conversationSend(long conversation, String text, int maxTokens, float temperature,
                                        TokenCallback callback, int[] stop);
  static native void conversationCancel(long conversation);
  static native void conversationReset(long conversation);
}
