// Gemma3Vocab(): the real Gemma 3 vocabulary for the grammar tests, read from the shared tokenizer.json.
#include <mutex>

#include "sampling/grammar_test_util.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace gemlet::test {

const TestVocab& Gemma3Vocab() {
  static const TestVocab v = [] {
    TestVocab t;
    auto meta = ReadHfTokenizer(std::string(GEMLET_TOKDATA_DIR) + "/gemma3", "gemma3");
    EXPECT_TRUE(meta.ok()) << meta.message();
    if (!meta.ok()) return t;
    auto vocab = VocabFromMetadata(*meta);
    EXPECT_TRUE(vocab.ok()) << vocab.message();
    if (!vocab.ok()) return t;
    const Tokenizer tok(std::move(*vocab));
    // What the detokenizer writes for each token: a byte-fallback token is its byte, a piece its text
    // with U+2581 as a space. Control, unknown and unused tokens never belong in the output.
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      t.bytes.push_back(tok.TokenBytes(id));
      t.special.push_back(tok.IsSpecial(id));
    }
    t.end_tokens = {tok.eos_id(), tok.eot_id()};
    auto made = TokenVocabulary::Create(t.bytes, t.special, t.end_tokens);
    EXPECT_TRUE(made.ok()) << made.message();
    if (made.ok()) t.vocab = *made;
    return t;
  }();
  return v;
}

}  // namespace gemlet::test
