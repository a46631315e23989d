"""The Python binding's last parity additions on the demo model (python_binding_test.py holds the
rest): log-probabilities in generation replies, checked against the logits the session itself
gives; the session options gemlet_session_options cannot hold (rollback_tokens, draft_model,
progress); and the tokenizer without a model, checked against the engine's.

Run by ctest (python_binding_rest_test) with GEMLET_LIBRARY, GEMLET_DEMO_MODEL and bindings/python
on PYTHONPATH.
"""

import math
import os
import subprocess
import tempfile
import unittest

import gemlet

MODEL = os.environ["GEMLET_DEMO_MODEL"]
POEM = "请背诵《静夜思》。"


def greedy(**kw):
    return dict(temperature=0, **kw)


def log_softmax(logits):
    top = max(logits)
    log_z = top + math.log(sum(math.exp(x - top) for x in logits))
    return [x - log_z for x in logits]


class RestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = gemlet.Engine.load(MODEL, n_threads=2)
        cls.prompt = cls.engine.tokenize_chat([("user", "Who are you?")])

    @classmethod
    def tearDownClass(cls):
        cls.engine.close()

    @unittest.skipUnless(os.environ.get("GEMLET_CLI"), "the gemlet CLI makes the test adapter")
    def test_lora_adapters(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "a.gguf")
            subprocess.run([os.environ["GEMLET_CLI"], "lora", "synth", MODEL, "-o", path, "--rank", "8", "--seed", "3"],
                           check=True, capture_output=True)
            adapter = self.engine.load_adapter(path)
            self.assertEqual(adapter.rank, 8)
            self.assertEqual(len(adapter.sha256), 64)
            self.assertGreater(adapter.nbytes, 0)
            with self.assertRaises(gemlet.GemletError):
                self.engine.load_adapter(MODEL)  # a model, not an adapter
            with gemlet.Session(self.engine, n_ctx=256) as plain, gemlet.Session(self.engine, n_ctx=256) as tuned:
                tuned.set_adapters([(adapter, 4.0)])
                self.assertEqual(tuned.n_adapters, 1)
                base = list(plain.evaluate(self.prompt))
                moved = list(tuned.evaluate(self.prompt))
                self.assertGreater(max(abs(a - b) for a, b in zip(base, moved)), 1e-3)
                tuned.set_adapters([])  # the base again: the cache is emptied, the logits are the base's
                self.assertEqual(tuned.n_past, 0)
                self.assertEqual(list(tuned.evaluate(self.prompt)), base)
            adapter.close()

    def test_logprobs_are_the_models(self):
        with self.engine.session(n_ctx=512) as s:
            logits = list(s.evaluate(self.prompt))
            want = log_softmax(logits)
            s.reset()
            reply = s.generate(self.prompt, top_logprobs=3, **greedy(max_tokens=8))
            self.assertEqual(len(reply.logprobs), len(reply.tokens))
            self.assertEqual([lp.token for lp in reply.logprobs], reply.tokens)
            first = reply.logprobs[0]
            # The first token's log-probability is the prompt's last logits, normalized.
            self.assertAlmostEqual(first.logprob, want[first.token], places=3)
            ranked = sorted(range(len(want)), key=lambda t: -want[t])[:3]
            self.assertEqual([t.token for t in first.top], ranked)
            for lp in reply.logprobs:
                self.assertEqual(len(lp.top), 3)
                self.assertEqual(lp.top[0].token, lp.token)  # greedy takes the most likely
                self.assertLessEqual(lp.logprob, 0.0)
                self.assertGreaterEqual(lp.top[0].logprob, lp.top[2].logprob)
            # logprobs=True alone: the chosen tokens', no alternatives; by default none. (A fresh
            # cache: complete() would evaluate the prompt's last token alone, which rounds otherwise.)
            s.reset()
            again = s.generate(self.prompt, logprobs=True, **greedy(max_tokens=8))
            self.assertEqual([(lp.token, lp.logprob) for lp in again.logprobs],
                             [(lp.token, lp.logprob) for lp in reply.logprobs])
            self.assertTrue(all(lp.top == [] for lp in again.logprobs))
            self.assertEqual(s.complete(self.prompt, **greedy(max_tokens=4)).logprobs, [])
            with self.assertRaises(gemlet.GemletError) as cm:
                s.generate(self.prompt, top_logprobs=21)
            self.assertEqual(cm.exception.code, gemlet.Status.INVALID_ARGUMENT)

    def test_conversation_replies_carry_logprobs(self):
        # A conversation's turn is the chat prompt generated in a fresh session: the same tokens and
        # log-probabilities (stream() passes the options through send()).
        with self.engine.session(n_ctx=512) as s:
            want = s.generate(self.prompt, top_logprobs=2, **greedy(max_tokens=8))
        with self.engine.conversation(n_ctx=512) as chat:
            got = chat.send("Who are you?", top_logprobs=2, **greedy(max_tokens=8))
            self.assertEqual(len(got.logprobs), got.stats.generated_tokens)
            self.assertEqual([(lp.token, lp.logprob) for lp in got.logprobs],
                             [(lp.token, lp.logprob) for lp in want.logprobs])
            self.assertEqual([[t.token for t in lp.top] for lp in got.logprobs],
                             [[t.token for t in lp.top] for lp in want.logprobs])
            self.assertEqual(chat.send("And then?", **greedy(max_tokens=4)).logprobs, [])  # not asked for
            with self.assertRaises(gemlet.GemletError) as cm:
                chat.send("hi", top_logprobs=21)
            self.assertEqual(cm.exception.code, gemlet.Status.INVALID_ARGUMENT)

    def test_batch_replies_carry_logprobs(self):
        with self.engine.session(n_ctx=512) as s:
            want = s.complete(self.prompt, top_logprobs=2, **greedy(max_tokens=6))
        with self.engine.session(n_ctx=512) as s, gemlet.BatchDecoder(self.engine) as batch:
            rid = batch.submit(s, self.prompt, top_logprobs=2, **greedy(max_tokens=6))
            done = {}
            while rid not in done:
                done.update(batch.step())
            got = done[rid]
            self.assertEqual(got.tokens, want.tokens)
            self.assertEqual([lp.token for lp in got.logprobs], want.tokens)
            for a, b in zip(got.logprobs, want.logprobs):
                self.assertAlmostEqual(a.logprob, b.logprob, places=3)
                self.assertEqual([t.token for t in a.top], [t.token for t in b.top])

    def test_rollback_tokens(self):
        with self.engine.session(n_ctx=256) as default, self.engine.session(n_ctx=256, rollback_tokens=64) as more:
            self.assertGreaterEqual(more.rollback_room, 64)
            self.assertGreater(more.rollback_room, default.rollback_room)
        with self.assertRaises(gemlet.GemletError) as cm:
            self.engine.session(rollback_tokens=-1)
        self.assertEqual(cm.exception.code, gemlet.Status.INVALID_ARGUMENT)

    def test_a_draft_model_changes_no_token(self):
        prompt = self.engine.tokenize_chat([("user", POEM)])
        with self.engine.session(n_ctx=512) as s:
            want = s.generate(prompt, **greedy(max_tokens=40))
        draft = gemlet.Engine.load(MODEL, n_threads=2)
        with self.engine.session(n_ctx=512, draft_model=draft) as s:
            draft.close()  # the session keeps its own reference
            got = s.generate(prompt, max_draft=4, **greedy(max_tokens=40))
        self.assertEqual(got.tokens, want.tokens)
        self.assertEqual(got.text, want.text)
        with gemlet.Engine.load(MODEL, n_threads=2) as draft:
            with self.engine.conversation(n_ctx=512) as plain, \
                    self.engine.conversation(n_ctx=512, draft_model=draft) as drafted:
                self.assertEqual(drafted.send(POEM, max_tokens=40, temperature=0).text,
                                 plain.send(POEM, max_tokens=40, temperature=0).text)

    def test_prompt_progress(self):
        prompt = self.engine.tokenize_chat([("user", "Tell me about the moon, the sea and the stars at night.")])
        calls = []
        with self.engine.session(n_ctx=256, max_batch=8, progress=lambda done, total: calls.append((done, total))) as s:
            s.evaluate(prompt, logits=False)
            self.assertGreater(len(calls), 2)
            self.assertEqual(calls[-1], (len(prompt), len(prompt)))
            self.assertEqual([t for _, t in calls], [len(prompt)] * len(calls))
        # False cancels the evaluation; an exception cancels it and is raised by the call.
        with self.engine.session(n_ctx=256, max_batch=8, progress=lambda done, total: False) as s:
            with self.assertRaises(gemlet.GemletError) as cm:
                s.evaluate(prompt)
            self.assertEqual(cm.exception.code, gemlet.Status.CANCELLED)
            self.assertLess(s.n_past, len(prompt))

        def boom(done, total):
            raise KeyError("from progress")
        with self.engine.session(n_ctx=256, max_batch=8, progress=boom) as s:
            with self.assertRaises(KeyError):
                s.generate(prompt, **greedy(max_tokens=4))
            self.assertLess(s.n_past, len(prompt))
        seen = []
        with self.engine.conversation(n_ctx=256, max_batch=8, progress=lambda d, t: seen.append(d)) as chat:
            chat.send("Hello there, how are you today?", max_tokens=2, temperature=0)
            self.assertGreater(len(seen), 1)

    def test_tokenizer_without_a_model(self):
        with gemlet.Tokenizer.open(MODEL) as tok:
            self.assertEqual(tok.vocab_size, self.engine.n_vocab)
            text = "😀 床前明月光 hello <start_of_turn>"
            for add_special, parse_special in ((False, False), (True, False), (True, True)):
                ids = tok.encode(text, add_special=add_special, parse_special=parse_special)
                self.assertEqual(ids, self.engine.tokenize(text, add_special=add_special, parse_special=parse_special))
            ids = tok.encode(text)
            self.assertEqual(tok.decode(ids), self.engine.detokenize(ids))
            self.assertEqual(tok.decode(tok.encode("床前明月光")), "床前明月光")
            self.assertEqual(tok.decode([]), "")
            self.assertNotEqual(tok.piece(ids[0]), "")
            self.assertEqual(tok.piece(10 ** 6), "")
            long_text = "word " * 500
            self.assertEqual(tok.encode(long_text), self.engine.tokenize(long_text, add_special=False))
        with self.assertRaises(ValueError):
            tok.encode("closed")
        with self.assertRaises(gemlet.GemletError) as cm:
            gemlet.Tokenizer("/nonexistent/tokenizer.json")
        self.assertIn("/nonexistent/tokenizer.json", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
