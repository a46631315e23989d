// The prompt progress callback of SessionOptions.progress: how far a long prompt's evaluation is.
package ai.gemlet;

/**
 * Called after each chunk of a prompt (SessionOptions.maxBatch tokens) on the thread that called
 * generate(), with the prompt tokens evaluated so far and their total (each generated token's own
 * evaluation reports too, as 1 of 1). Return false to cancel the
 * call (its stop reason is then CANCELLED); an exception cancels it too and is thrown from it.
 */
@FunctionalInterface
public interface PromptProgress {
  boolean onProgress(int done, int total);
}
