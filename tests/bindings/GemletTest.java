// The Java binding (bindings/java) on the demo model: load, the Chinese answer streamed through a
// TokenCallback in whole characters, a stop by the callback's false, cancel from another thread,
// errors as GemletException; exits non-zero on any failure (ctest: java_binding_test).
import ai.gemlet.BatchDecoder;
import ai.gemlet.Conversation;
import ai.gemlet.Engine;
import ai.gemlet.Gemlet;
import ai.gemlet.GemletException;
import ai.gemlet.Session;
import ai.gemlet.SessionOptions;
import ai.gemlet.StopReason;
import ai.gemlet.Tokenizer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

public final class GemletTest {
  private static int failures = 0;

  private static void check(boolean ok, String what) {
    if (!ok) {
      failures++;
      System.err.println("FAILED: " + what);
    }
  }

  // Whole characters: no lone surrogate (a split emoji) and no U+FFFD (a split UTF-8 sequence).
  private static boolean wholeCharacters(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\uFFFD') return false;
      if (Character.isHighSurrogate(c)) {
        if (i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1))) return false;
        i++;
      } else if (Character.isLowSurrogate(c)) {
        return false;
      }
    }
    return true;
  }

  public static void main(String[] args) throws Exception {
    final String model = args[0];
    check(Gemlet.version().equals("0.1.0"), "version " + Gemlet.version());

    try {
      Engine.load("/nonexistent/model.gguf", 1);
      check(false, "a missing model loads");
    } catch (GemletException e) {
      check(e.code == GemletException.ERROR, "missing model code " + e.code);
      check(e.getMessage().contains("/nonexistent/model.gguf"), "missing model message: " + e.getMessage());
    }

    try (Engine engine = Engine.load(model, 2)) {
      check(engine.nVocab() == 8192, "n_vocab " + engine.nVocab());
      check(engine.architecture().equals("gemma3"), "architecture " + engine.architecture());

      // A character outside the BMP each way: JNI's modified UTF-8 would mangle it.
      final String text = "😀 床前明月光 hello";
      int[] ids = engine.tokenize(text, false);
      check(ids.length > 3, "token count " + ids.length);
      check(engine.detokenize(ids).equals(text), "round trip: " + engine.detokenize(ids));
      check(engine.tokenize(text, true)[0] == 2, "<bos> first");
      check(engine.tokenize("", false).length == 0 && engine.detokenize(new int[0]).isEmpty(), "empty text");

      try (Conversation chat = engine.newConversation(null, 512)) {
        List<String> pieces = new ArrayList<>();
        String reply = chat.generate("请背诵《静夜思》。", 40, 0.0f, piece -> pieces.add(piece));
        check(reply.contains("床前明月光"), "the poem: " + reply);
        check(String.join("", pieces).equals(reply), "pieces join to the reply");
        for (String p : pieces) check(!p.isEmpty() && wholeCharacters(p), "whole characters: " + p);
        check(chat.lastStopReason() == StopReason.END_OF_TURN, "stop " + chat.lastStopReason());

        // The callback's false stops the answer; the conversation goes on.
        List<String> two = new ArrayList<>();
        String partial = chat.generate("Who are you?", 100, 0.0f, piece -> {
          two.add(piece);
          return two.size() < 2;
        });
        check(two.size() == 2, "callback calls after false: " + two.size());
        check(partial.equals(String.join("", two)), "partial reply: " + partial);
        check(chat.lastStopReason() == StopReason.CANCELLED, "stop after false " + chat.lastStopReason());

        // An exception in the callback stops the answer and reaches the caller.
        try {
          chat.generate("Who are you?", 50, 0.0f, piece -> {
            throw new IllegalStateException("from the callback");
          });
          check(false, "the callback's exception was lost");
        } catch (IllegalStateException e) {
          check(e.getMessage().equals("from the callback"), "callback exception " + e);
        }
        check(!chat.generate("Who are you?", 8, 0.0f, null).isEmpty(), "an answer after the exception");

        // Cancel from another thread (a Stop button). The callback holds the answer at its first
        // piece until the cancel has been made, so the tiny model cannot finish first.
        CountDownLatch firstPiece = new CountDownLatch(1);
        CountDownLatch cancelled = new CountDownLatch(1);
        List<String> seen = new ArrayList<>();
        Thread stopper = new Thread(() -> {
          try {
            firstPiece.await(10, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          chat.cancel();
          cancelled.countDown();
        });
        stopper.start();
        String stopped = chat.generate("Who are you?", 200, 0.0f, piece -> {
          seen.add(piece);
          firstPiece.countDown();
          try {
            cancelled.await(10, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          return true;
        });
        stopper.join();
        check(chat.lastStopReason() == StopReason.CANCELLED, "stop after cancel " + chat.lastStopReason());
        check(seen.size() <= 2, "pieces after cancel: " + seen.size());
        check(stopped.equals(String.join("", seen)), "cancelled reply: " + stopped);

        chat.reset();
        check(chat.generate("请背诵《静夜思》。", 40, 0.0f, null).equals(reply), "the same answer after reset");
      }

      // What the C API added for parity with the C++ one.
      check(Gemlet.abiVersion() == Gemlet.ABI_VERSION, "ABI " + Gemlet.abiVersion());
      check(engine.infoText()[0].equals("gemma3"), "info architecture " + engine.infoText()[0]);
      check(engine.infoNumbers()[0] == 8192 && engine.infoNumbers()[2] > 0, "info numbers");
      String[] note = new String[1];
      int[] fit = engine.fitToBudget(1L << 40, 512, Gemlet.KV_F16, note);
      check(fit[0] == 512 && fit[1] == Gemlet.KV_F16 && note[0].isEmpty(), "a budget that fits: " + fit[0] + " " + note[0]);
      try {
        engine.fitToBudget(1L << 20, 512, Gemlet.KV_F16, null);
        check(false, "1 MiB fits");
      } catch (GemletException e) {
        check(e.code == GemletException.INVALID_ARGUMENT, "budget code " + e.code);
      }
      try (Session session = engine.newSession(512)) {
        int[] prompt = engine.tokenize("Who are you?", true);
        List<String> pieces = new ArrayList<>();
        String generated = session.generate(prompt, 12, 0.0f, false, piece -> pieces.add(piece));
        check(String.join("", pieces).equals(generated), "session pieces join to the text");
        check(session.lastTokens().length > 0 && session.nPast() > prompt.length, "session tokens");
        String again = session.generate(prompt, 12, 0.0f, true, null);
        check(again.equals(generated), "complete from the cached prompt: " + again);
        check(session.memoryPlan()[3] == session.memoryStats()[0], "plan's KV bytes are the session's");
        check(session.memoryPlanText().contains("memory plan"), "plan text " + session.memoryPlanText());
      }
      try (Conversation chat = engine.newConversation(null, 512)) {
        chat.setMessages(new String[][] {{"user", "Hi"}, {"assistant", "Hello."}});
        String[][] turns = chat.messages();
        check(turns.length == 2 && turns[1][0].equals("assistant") && turns[1][1].equals("Hello."), "messages in and out");
        try {
          chat.setMessages(new String[][] {{"system", "no"}});
          check(false, "a system turn set");
        } catch (GemletException e) {
          check(e.code == GemletException.INVALID_ARGUMENT, "set messages code " + e.code);
        }
      }

      // Log-probabilities: greedy takes the most likely token, whose value is the chosen one's.
      try (Session session = engine.newSession(512)) {
        int[] prompt = engine.tokenizeChat(new String[][] {{"user", "Who are you?"}}, true, false);
        session.generate(prompt, 8, 0.0f, false, 3, null);
        int[] chosen = session.lastTokens();
        float[] lp = session.lastLogprobs();
        int[][] topIds = session.lastTopTokens();
        float[][] topLp = session.lastTopLogprobs();
        check(chosen.length > 0 && lp.length == chosen.length && topIds.length == chosen.length, "one logprob per token");
        for (int i = 0; i < chosen.length; i++) {
          check(topIds[i].length == 3 && topIds[i][0] == chosen[i], "top tokens of " + i);
          check(topLp[i][0] == lp[i] && lp[i] <= 0 && topLp[i][1] >= topLp[i][2], "top logprobs of " + i);
        }
        session.generate(prompt, 4, 0.0f, true, null);
        check(session.lastLogprobs().length == 0, "no logprobs unless asked");
      }

      // The chat format, and the tokenizer without a model (the same vocabulary as the engine's).
      String[][] chatMessages = {{"user", "Hi"}, {"assistant", "Hello."}};
      String chatText = engine.applyChatTemplate(chatMessages, true);
      check(chatText.contains("Hi") && chatText.contains("Hello."), "chat template: " + chatText);
      try (Tokenizer tok = Tokenizer.open(model)) {
        check(tok.vocabSize() == engine.nVocab(), "tokenizer vocabulary " + tok.vocabSize());
        final String mixed = "😀 床前明月光 hello";
        check(java.util.Arrays.equals(tok.encode(mixed, true, false), engine.tokenize(mixed, true)), "tokenizer ids");
        check(tok.decode(tok.encode(mixed, false, false)).equals(mixed), "tokenizer round trip");
        check(!tok.piece(tok.encode("hello", false, false)[0]).isEmpty() && tok.piece(1 << 30).isEmpty(), "pieces");
        check(java.util.Arrays.equals(engine.tokenizeChat(chatMessages, true, false), tok.encode(chatText, true, true)),
              "tokenizeChat is the template's text tokenized");
      }
      try {
        Tokenizer.open("/nonexistent/tokenizer.json");
        check(false, "a missing tokenizer opens");
      } catch (GemletException e) {
        check(e.getMessage().contains("/nonexistent/tokenizer.json"), "missing tokenizer message: " + e.getMessage());
      }

      // The batch decoder: each request's answer is Session.generate's (complete) on its own.
      int[][] prompts = {engine.tokenizeChat(new String[][] {{"user", "Who are you?"}}, true, false),
                         engine.tokenizeChat(new String[][] {{"user", "请背诵《静夜思》。"}}, true, false)};
      String[] want = new String[2];
      for (int i = 0; i < 2; i++) {
        try (Session s = engine.newSession(512)) {
          want[i] = s.generate(prompts[i], 10, 0.0f, true, null);
        }
      }
      Session[] sessions = {engine.newSession(512), engine.newSession(512), engine.newSession(512), engine.newSession(512)};
      try (BatchDecoder batch = new BatchDecoder(engine, 4, 0)) {
        List<String> streamed = new ArrayList<>();
        int a = batch.submit(sessions[0], prompts[0], 10, 0.0f, piece -> streamed.add(piece));
        int b = batch.submit(sessions[1], prompts[1], 10, 0.0f, null);
        int longOne = batch.submit(sessions[2], prompts[0], 400, 0.0f, null);
        int thrower = batch.submit(sessions[3], prompts[1], 10, 0.0f, piece -> {
          throw new IllegalStateException("from a batch callback");
        });
        java.util.Map<Integer, BatchDecoder.Finished> done = new java.util.HashMap<>();
        for (int step = 0; done.size() < 4 && step < 1000; step++) {
          if (step == 3) batch.cancel(longOne);
          for (BatchDecoder.Finished f : batch.step()) done.put(f.id, f);
        }
        check(done.size() == 4, "finished requests " + done.size());
        check(want[0].equals(done.get(a).text) && String.join("", streamed).equals(want[0]), "batch answer a");
        check(want[1].equals(done.get(b).text) && done.get(b).error == null, "batch answer b");
        check(done.get(longOne).stop == StopReason.CANCELLED, "batch cancel " + done.get(longOne).stop);
        RuntimeException e = done.get(thrower).error;
        check(e instanceof IllegalStateException && e.getMessage().equals("from a batch callback"), "batch callback exception " + e);
        check(batch.running() == 0, "batch running " + batch.running());
      } finally {
        for (Session s : sessions) s.close();
      }

      // Session extras (SessionOptions): a draft model changes no greedy token; rollback room follows
      // rollbackTokens; prompt progress is reported chunk by chunk, and its false or exception cancels.
      int[] poem = engine.tokenizeChat(new String[][] {{"user", "请背诵《静夜思》。"}}, true, false);
      String plainText;
      int[] plainTokens;
      try (Session plain = engine.newSession(512)) {
        plainText = plain.generate(poem, 40, 0.0f, false, null);
        plainTokens = plain.lastTokens();
      }
      Session drafted;
      try (Engine draft = Engine.load(model, 2)) {  // the session keeps its own reference to it
        drafted = engine.newSession(new SessionOptions().nCtx(512).draftModel(draft));
      }
      try (Session s = drafted) {
        String draftedText = s.generate(poem, 40, 0.0f, false, -1, 4, null);
        check(java.util.Arrays.equals(s.lastTokens(), plainTokens), "draft tokens differ from plain");
        check(draftedText.equals(plainText), "draft text " + draftedText);
        int[] d = s.lastDraftStats();
        check(d[0] > 0 && d[1] > 0 && d[2] > 0, "draft stats " + java.util.Arrays.toString(d));
      }
      // A conversation with a draft model drafts too (maxDraft), and its answer is the plain one.
      String plainAnswer;
      try (Conversation plain = engine.newConversation(null, 512)) {
        plainAnswer = plain.generate("请背诵《静夜思》。", 40, 0.0f, null);
      }
      Conversation draftedChat;
      try (Engine draft = Engine.load(model, 2)) {
        draftedChat = engine.newConversation(null, new SessionOptions().nCtx(512).draftModel(draft));
      }
      try (Conversation c = draftedChat) {
        String answer = c.generate("请背诵《静夜思》。", 40, 0.0f, 4, null);
        check(answer.equals(plainAnswer), "drafted conversation answer " + answer);
        int[] d = c.lastDraftStats();
        check(d[0] > 0 && d[1] > 0 && d[2] > 0, "conversation draft stats " + java.util.Arrays.toString(d));
      }
      try (Session small = engine.newSession(new SessionOptions().nCtx(256).rollbackTokens(4));
           Session big = engine.newSession(new SessionOptions().nCtx(256).rollbackTokens(64));
           Session none = engine.newSession(new SessionOptions().nCtx(256).rollbackTokens(0))) {
        check(small.rollbackRoom() >= 4 && big.rollbackRoom() >= 64, "rollback room " + small.rollbackRoom()
              + " " + big.rollbackRoom());
        check(small.rollbackRoom() < big.rollbackRoom(), "rollback room does not follow rollbackTokens");
        check(none.rollbackRoom() <= small.rollbackRoom(), "rollback room 0: " + none.rollbackRoom());
      }
      try {
        engine.newSession(new SessionOptions().rollbackTokens(-1)).close();
        check(false, "rollbackTokens -1 accepted");
      } catch (GemletException e) {
        check(e.code == GemletException.INVALID_ARGUMENT && e.getMessage().contains("rollback_tokens"),
              "rollbackTokens -1: " + e.code + " " + e.getMessage());
      }
      int[] moon = engine.tokenizeChat(
          new String[][] {{"user", "Tell me about the moon, the sea and the stars at night."}}, true, false);
      List<int[]> calls = new ArrayList<>();
      try (Session s = engine.newSession(new SessionOptions().nCtx(256).maxBatch(8).progress((done, total) -> {
             calls.add(new int[] {done, total});
             return true;
           }))) {
        s.generate(moon, 2, 0.0f, false, null);
        // Every evaluation reports, the decode steps' one-token ones too (1 of 1): the prompt's are
        // those of its total.
        calls.removeIf(c -> c[1] != moon.length);
        check(calls.size() > 2, "progress calls " + calls.size());
        boolean increasing = true;
        for (int i = 1; i < calls.size(); i++) increasing &= calls.get(i)[0] > calls.get(i - 1)[0];
        check(increasing, "progress done counts do not increase");
        int[] last = calls.get(calls.size() - 1);
        check(last[0] == moon.length && last[1] == moon.length, "last progress " + last[0] + "/" + last[1]);
      }
      calls.clear();
      try (Conversation c = engine.newConversation(null, new SessionOptions().nCtx(256).maxBatch(8)
               .progress((done, total) -> calls.add(new int[] {done, total}) && done < 16))) {
        c.generate("Tell me about the moon, the sea and the stars at night.", 8, 0.0f, null);
        check(c.lastStopReason() == StopReason.CANCELLED, "progress false: " + c.lastStopReason());
        check(!calls.isEmpty() && calls.get(calls.size() - 1)[0] >= 16, "progress calls before the stop");
      }
      try (Session s = engine.newSession(new SessionOptions().nCtx(256).maxBatch(8).progress((done, total) -> {
             throw new IllegalStateException("from progress");
           }))) {
        try {
          s.generate(moon, 2, 0.0f, false, null);
          check(false, "the progress exception was lost");
        } catch (IllegalStateException e) {
          check(e.getMessage().equals("from progress"), "progress exception " + e);
        }
        check(s.nPast() < moon.length, "the prompt went on after the exception: " + s.nPast());
      }

      // Platform signals.
      engine.setThermalState(Gemlet.THERMAL_SERIOUS);
      engine.onTrimMemory(10);  // TRIM_MEMORY_RUNNING_LOW
      engine.onBackground();
      engine.onForeground();
      try {
        engine.setThermalState(9);
        check(false, "thermal state 9 accepted");
      } catch (GemletException e) {
        check(e.code == GemletException.INVALID_ARGUMENT, "thermal state code " + e.code);
      }
      Conversation closed = engine.newConversation("You are terse.", 256);
      closed.close();
      closed.close();
      closed.cancel();  // harmless after close
      try {
        closed.generate("hi", 4, 0.0f, null);
        check(false, "generate after close");
      } catch (IllegalStateException expected) {
        // the handle is gone
      }
    }

    if (failures > 0) {
      System.err.println(failures + " check(s) failed");
      System.exit(1);
    }
    System.out.println("GemletTest: all checks passed");
  }
}
