// Gemma 3 tokenizer against the HF goldens, through the GGUF our converter writes (SentencePiece by
// scores, as llama.cpp stores Gemma 3) and through tokenizer.json's ranked merges.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace gemlet {
namespace {

const std::string kGemma3Dir = std::string(GEMLET_TOKDATA_DIR) + "/gemma3";

struct Golden {
  std::string name;
  std::string text;
  std::vector<int32_t> ids;
  std::vector<int32_t> ids_with_special;
  std::string decoded;
  std::string decoded_with_special;
};

std::vector<Golden> LoadGoldens() {
  std::vector<Golden> goldens;
  std::ifstream in(test::TestdataDir() + "/tokenizer/gemma3_goldens.jsonl");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    goldens.push_back(Golden{j["id"], j["text"], j["ids"].get<std::vector<int32_t>>(),
                             j["ids_with_special"].get<std::vector<int32_t>>(), j["decoded"],
                             j["decoded_with_special"]});
  }
  return goldens;
}

std::string Show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Every field of every golden; reports each mismatch and counts the fully passing cases.
void CheckGoldens(const Tokenizer& tok, const std::string& label) {
  const std::vector<Golden> goldens = LoadGoldens();
  ASSERT_EQ(goldens.size(), 308u);
  int passed = 0;
  for (const Golden& g : goldens) {
    const std::vector<int32_t> ids = tok.Encode(g.text);
    const std::vector<int32_t> ids_special = tok.Encode(g.text, {.add_bos = tok.vocab().add_bos()});
    const std::string decoded = tok.Decode(ids);
    const std::string decoded_special = tok.Decode(ids_special);
    EXPECT_EQ(ids, g.ids) << label << " " << g.name << "\n got  " << Show(ids) << "\n want " << Show(g.ids);
    EXPECT_EQ(ids_special, g.ids_with_special) << label << " " << g.name;
    EXPECT_EQ(decoded, g.decoded) << label << " " << g.name;
    EXPECT_EQ(decoded_special, g.decoded_with_special) << label << " " << g.name;
    // Decoding the golden ids themselves must match too (independent of our encoder).
    EXPECT_EQ(tok.Decode(g.ids), g.decoded) << label << " " << g.name;
    passed += ids == g.ids && ids_special == g.ids_with_special && decoded == g.decoded &&
              decoded_special == g.decoded_with_special;
  }
  std::printf("%s: %d/%zu goldens pass\n", label.c_str(), passed, goldens.size());
  EXPECT_EQ(passed, static_cast<int>(goldens.size()));
}

TEST(Gemma3Tokenizer, ConvertedGgufMatchesGoldensAndLlamaCppLayout) {
  // AddHfTokenizerMetadata is ReadHfTokenizer + WriteTokenizerMetadata; the parts are called here so
  // that the metadata also builds an in-memory vocabulary for the round trip below (one JSON parse).
  auto meta = ReadHfTokenizer(kGemma3Dir, "gemma3");
  ASSERT_TRUE(meta.ok()) << meta.message();
  test::TempDir dir;
  const std::string path = dir.File("gemma3-tokenizer.gguf");
  {
    GgufWriter writer;
    WriteTokenizerMetadata(*meta, writer);
    const Status wst = writer.Write(path);
    ASSERT_TRUE(wst.ok()) << wst.message();
  }
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  const GgufFile& f = **file;

  // The layout llama.cpp's _set_vocab_sentencepiece + Gemma3Model.set_vocab gives.
  EXPECT_EQ(*f.GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*f.GetString("tokenizer.ggml.pre"), "default");
  EXPECT_FALSE(f.Has("tokenizer.ggml.merges"));
  const auto* tokens = f.GetStringArray("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), 262208u);  // config.json vocab_size, padded
  const std::vector<int32_t> types = *f.GetI32Array("tokenizer.ggml.token_type");
  const std::vector<float> scores = *f.GetF32Array("tokenizer.ggml.scores");
  EXPECT_EQ((*tokens)[106], "<end_of_turn>");
  EXPECT_EQ(types[106], 3);                // control
  EXPECT_EQ(types[4], 3);                  // <mask> looks special
  EXPECT_EQ(types[23], 3);                 // <unused17> looks special
  EXPECT_EQ((*tokens)[107], "\n");
  EXPECT_EQ(types[107], 4);                // user-defined
  EXPECT_EQ((*tokens)[138], "  ");         // "▁▁" pre-normalised to spaces
  EXPECT_EQ(types[138], 4);
  EXPECT_EQ((*tokens)[168], "<table>");
  EXPECT_EQ(types[168], 4);
  EXPECT_EQ((*tokens)[248], "<0x0A>");
  EXPECT_EQ(types[248], 6);                // byte
  EXPECT_EQ((*tokens)[262144], "<image_soft_token>");
  EXPECT_EQ(types[262144], 3);
  EXPECT_EQ((*tokens)[262145], "[PAD262145]");
  EXPECT_EQ(types[262145], 5);             // unused
  EXPECT_EQ(scores[262145], -10000.0f);
  EXPECT_EQ(scores[106], -1000.0f);
  EXPECT_EQ(*f.GetU32("tokenizer.ggml.bos_token_id"), 2u);
  EXPECT_EQ(*f.GetU32("tokenizer.ggml.eos_token_id"), 106u);  // the instruction-tuned config
  EXPECT_EQ(*f.GetU32("tokenizer.ggml.unknown_token_id"), 3u);
  EXPECT_EQ(*f.GetU32("tokenizer.ggml.padding_token_id"), 0u);
  EXPECT_TRUE(*f.GetBool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(*f.GetBool("tokenizer.ggml.add_eos_token"));
  EXPECT_FALSE(*f.GetBool("tokenizer.ggml.add_space_prefix"));
  const std::string tmpl = *f.GetString("tokenizer.chat_template");
  EXPECT_EQ(tmpl.rfind("{{ bos_token }}", 0), 0u);

  auto tok = Tokenizer::FromGguf(f);
  ASSERT_TRUE(tok.ok()) << tok.message();
  EXPECT_EQ(tok->vocab().model(), VocabModel::kSpm);
  EXPECT_FALSE(tok->vocab().has_merges());
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->eos_id(), 106);
  EXPECT_EQ(tok->eot_id(), 106);
  EXPECT_EQ(tok->start_of_turn_id(), 105);
  EXPECT_EQ(tok->pad_id(), 0);
  EXPECT_EQ(tok->unk_id(), 3);
  EXPECT_TRUE(tok->IsControl(106));
  EXPECT_FALSE(tok->IsControl(107));
  CheckGoldens(*tok, "gguf (scores)");

  // User input cannot inject turn markers; user-defined tokens such as "\n" still apply.
  const std::string chat = "<start_of_turn>user\nHi<end_of_turn>\n";
  const std::vector<int32_t> special = tok->Encode(chat);
  EXPECT_EQ(special.front(), 105);
  const std::vector<int32_t> plain = tok->Encode(chat, {.parse_special = false});
  for (int32_t id : plain) EXPECT_FALSE(tok->IsControl(id)) << id;
  EXPECT_EQ(tok->Decode(plain), chat);
  EXPECT_NE(std::find(plain.begin(), plain.end(), 107), plain.end());
  EXPECT_EQ(tok->Decode(special, {.skip_special = true}), "user\nHi\n");

  // Round trip: the vocabulary built in memory from the same metadata encodes identically.
  auto mem = VocabFromMetadata(*meta);
  ASSERT_TRUE(mem.ok()) << mem.message();
  const Tokenizer mem_tok(std::move(*mem));
  for (const Golden& g : LoadGoldens()) {
    EXPECT_EQ(mem_tok.Encode(g.text), tok->Encode(g.text)) << g.name;
    EXPECT_EQ(mem_tok.Encode(g.text, {.parse_special = false}), tok->Encode(g.text, {.parse_special = false})) << g.name;
  }
}

TEST(Gemma3Tokenizer, HfMergesMatchGoldens) {
  auto meta = ReadHfTokenizer(kGemma3Dir, "", /*keep_merges=*/true);
  ASSERT_TRUE(meta.ok()) << meta.message();
  EXPECT_EQ(meta->model, "llama");  // config.json says gemma3
  EXPECT_EQ(meta->merges.size(), 514906u);
  auto vocab = VocabFromMetadata(*meta);
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  ASSERT_TRUE(vocab->has_merges());
  const Tokenizer tok(std::move(*vocab));
  CheckGoldens(tok, "tokenizer.json (merges)");
}

}  // namespace
}  // namespace gemlet
