// The exception a failed gemlet call throws: the C API's status and gemlet_last_error()'s message.
package ai.gemlet;

public class GemletException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public static final int ERROR = 1;
  public static final int INVALID_ARGUMENT = 2;
  public static final int CANCELLED = 3;
  public static final int CONTEXT_FULL = 4;
  public static final int OUT_OF_MEMORY = 5;
  public static final int BUFFER_TOO_SMALL = 6;
  public static final int TOO_LARGE = 7;

  /** The gemlet_status of the call (ERROR, INVALID_ARGUMENT, ...). */
  public final int code;

  // Thrown by the JNI glue (gemlet_jni.cc), which looks this constructor up by its signature.
  public GemletException(int code, String message) {
    super(message);
    this.code = code;
  }
}
