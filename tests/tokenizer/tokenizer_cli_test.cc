// `gemlet tokenize` end to end: the built binary on Chinese + English input, with a GGUF model, a
// tokenizer.json and a tokenizer.model, in its output modes and its error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/test_util.h"

namespace gemlet {
namespace {

using json = nlohmann::json;

const std::string kGemma4Gguf = std::string(GEMLET_TOKDATA_DIR) + "/gemma4/ggml-vocab-gemma-4.gguf";
const std::string kGemma3Json = std::string(GEMLET_TOKDATA_DIR) + "/gemma3/tokenizer.json";

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

CliRun Tokenize(const std::string& args, const std::string& input) {
  test::TempDir dir;
  std::ofstream(dir.File("in.txt"), std::ios::binary) << input;
  const test::CommandResult r = test::RunCommand(test::GemletBinary() + " tokenize " + args + " < " +
                                                 dir.File("in.txt") + " 2> " + dir.File("err.txt"));
  return CliRun{r.exit_code, r.out, test::ReadTextFile(dir.File("err.txt"))};
}

TEST(TokenizeCli, Gemma3TokenizerJsonChineseAndEnglish) {
  // Golden "mixed-001" from gemma3_goldens.jsonl.
  const CliRun r = Tokenize("--tokenizer " + kGemma3Json, "Hello 你好 こんにちは 안녕하세요 مرحبا Привет नमस्ते");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[9259,43758,237389,79433,83732,150423,15745,8362,173040]\n");

  const CliRun special = Tokenize("--tokenizer " + kGemma3Json + " --add-special --pieces", "你好，世界！");
  ASSERT_EQ(special.exit_code, 0) << special.err;
  const json j = json::parse(special.out);
  EXPECT_EQ(j["ids"], json({2, 144626, 236900, 12811, 237354}));
  EXPECT_EQ(j["pieces"], json({"<bos>", "你好", "，", "世界", "！"}));
}

TEST(TokenizeCli, Gemma4ModelModes) {
  const std::string text = "Hello world 我想在apple工作";
  const CliRun plain = Tokenize("-m " + kGemma4Gguf, text);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const json ids = json::parse(plain.out);
  ASSERT_TRUE(ids.is_array());
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], 9259);  // "Hello"
  EXPECT_EQ(ids[1], 1902);  // "▁world"

  // Gemma 4 adds BOS; --add-special follows the model.
  const CliRun bos = Tokenize("-m " + kGemma4Gguf + " --add-special", text);
  ASSERT_EQ(bos.exit_code, 0) << bos.err;
  json with_bos = json::array({2});
  for (const auto& id : ids) with_bos.push_back(id);
  EXPECT_EQ(json::parse(bos.out), with_bos);

  // Control-token text is a token by default, plain text with --no-parse-special.
  const CliRun turn = Tokenize("-m " + kGemma4Gguf, "<|turn>user");
  ASSERT_EQ(turn.exit_code, 0);
  EXPECT_EQ(json::parse(turn.out)[0], 105);
  const CliRun no_turn = Tokenize("-m " + kGemma4Gguf + " --no-parse-special", "<|turn>user");
  ASSERT_EQ(no_turn.exit_code, 0);
  for (const auto& id : json::parse(no_turn.out)) EXPECT_NE(id, 105);

  // --jsonl: one JSON string per line in, one array per line out.
  const CliRun lines = Tokenize("-m " + kGemma4Gguf + " --jsonl", "\"Hello world\"\n\"\\u4f60\\u597d\\n\"\n");
  ASSERT_EQ(lines.exit_code, 0) << lines.err;
  std::istringstream ss(lines.out);
  std::string l1, l2, l3;
  std::getline(ss, l1);
  std::getline(ss, l2);
  EXPECT_FALSE(std::getline(ss, l3));
  EXPECT_EQ(l1, "[9259,1902]");
  EXPECT_EQ(json::parse(l2).back(), 107);  // "\n"
}

// A SentencePiece tokenizer.model gives the same output as the tokenizer.json of the same vocabulary
// (the demo model's), in every mode; a corrupt one is one error line.
TEST(TokenizeCli, SentencePieceModelEqualsTokenizerJson) {
  const std::string demo = GEMLET_DEMO_TOKENIZER_DIR;
  test::TempDir spm_dir, json_dir;
  for (const char* f : {"tokenizer_config.json", "config.json"}) {
    std::filesystem::copy_file(demo + "/" + f, spm_dir.File(f));
    std::filesystem::copy_file(demo + "/" + f, json_dir.File(f));
  }
  std::filesystem::copy_file(demo + "/tokenizer.model", spm_dir.File("tokenizer.model"));
  std::filesystem::copy_file(std::string(GEMLET_TOKDATA_DIR) + "/demo/tokenizer.json", json_dir.File("tokenizer.json"));
  const std::string text = "<start_of_turn>user\n你好，  world   😀 龘\n\n<end_of_turn>\n";
  for (const std::string& flags : {std::string(), std::string(" --add-special --pieces"), std::string(" --no-parse-special")}) {
    const CliRun spm = Tokenize("--tokenizer " + spm_dir.File("tokenizer.model") + flags, text);
    const CliRun hf = Tokenize("--tokenizer " + json_dir.File("tokenizer.json") + flags, text);
    ASSERT_EQ(spm.exit_code, 0) << spm.err;
    ASSERT_EQ(hf.exit_code, 0) << hf.err;
    EXPECT_EQ(spm.out, hf.out) << flags;
  }
  const CliRun turn = Tokenize("--tokenizer " + spm_dir.File("tokenizer.model") + " --add-special", text);
  const json ids = json::parse(turn.out);
  EXPECT_EQ(ids[0], 2);  // <bos>
  EXPECT_EQ(ids[1], 4);  // <start_of_turn>
  const CliRun lines = Tokenize("--tokenizer " + spm_dir.File("tokenizer.model") + " --jsonl", "\"a\\n\\nb\"\n\"\"\n");
  ASSERT_EQ(lines.exit_code, 0) << lines.err;
  EXPECT_EQ(json::parse(lines.out.substr(0, lines.out.find('\n')))[1], 7);  // "\n\n"

  std::ofstream(spm_dir.File("cut.model"), std::ios::binary)
      << test::ReadTextFile(demo + "/tokenizer.model").substr(0, 5000);
  const CliRun cut = Tokenize("--tokenizer " + spm_dir.File("cut.model"), "x");
  EXPECT_EQ(cut.exit_code, 1);
  EXPECT_EQ(cut.err.rfind("gemlet: ", 0), 0u) << cut.err;
  EXPECT_EQ(std::count(cut.err.begin(), cut.err.end(), '\n'), 1) << cut.err;
  EXPECT_NE(cut.err.find("not a valid SentencePiece model"), std::string::npos) << cut.err;
}

// A tokenizer.json alone (no tokenizer_config.json or config.json beside it): BOS comes from its own
// post_processor, as HF tokenizers takes it (TemplateProcessing adds "<bos>", id 2). Without one,
// nothing names the BOS token and the command says which files are missing instead of guessing.
TEST(TokenizeCli, BareTokenizerJsonTakesBosFromItsPostProcessor) {
  test::TempDir bare;
  std::filesystem::copy_file(kGemma3Json, bare.File("tokenizer.json"));
  const CliRun r = Tokenize("--tokenizer " + bare.File("tokenizer.json") + " --add-special", "hi 你好");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json ids = json::parse(r.out);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 2) << r.out;  // <bos>, not <eos> (1)
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1) << r.out;

  json root = json::parse(std::ifstream(kGemma3Json));
  root["post_processor"] = nullptr;
  test::TempDir none;
  std::ofstream(none.File("tokenizer.json")) << root.dump();
  const CliRun missing = Tokenize("--tokenizer " + none.File("tokenizer.json") + " --add-special", "hi");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err.rfind("gemlet: ", 0), 0u) << missing.err;
  EXPECT_NE(missing.err.find("BOS"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("tokenizer_config.json"), std::string::npos) << missing.err;
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
}

TEST(TokenizeCli, Errors) {
  const CliRun none = Tokenize("", "x");
  EXPECT_EQ(none.exit_code, 2);  // a usage error
  EXPECT_EQ(none.err.rfind("gemlet: ", 0), 0u) << none.err;

  const CliRun missing = Tokenize("-m /nonexistent/model.gguf", "x");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err.rfind("gemlet: ", 0), 0u) << missing.err;
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;

  const CliRun bad_line = Tokenize("-m " + kGemma4Gguf + " --jsonl", "\"ok\"\nnot json\n");
  EXPECT_EQ(bad_line.exit_code, 1);
  EXPECT_NE(bad_line.err.find("line 2"), std::string::npos) << bad_line.err;

  const CliRun both = Tokenize("-m a.gguf --tokenizer b.json", "x");
  EXPECT_EQ(both.exit_code, 2);  // a usage error
  EXPECT_EQ(both.err.rfind("gemlet: ", 0), 0u) << both.err;
}

}  // namespace
}  // namespace gemlet
