// `gemlet tokenize` end to end: the built binary on Chinese + English input, with a GGUF model and
// with a tokenizer.json, in its output modes and its error paths.
#include <gtest/gtest.h>

#include <algorithm>
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

TEST(TokenizeCli, Errors) {
  const CliRun none = Tokenize("", "x");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(none.err.rfind("gemlet: ", 0), 0u) << none.err;

  const CliRun missing = Tokenize("-m /nonexistent/model.gguf", "x");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err.rfind("gemlet: ", 0), 0u) << missing.err;
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;

  const CliRun bad_line = Tokenize("-m " + kGemma4Gguf + " --jsonl", "\"ok\"\nnot json\n");
  EXPECT_EQ(bad_line.exit_code, 1);
  EXPECT_NE(bad_line.err.find("line 2"), std::string::npos) << bad_line.err;

  const CliRun both = Tokenize("-m a.gguf --tokenizer b.json", "x");
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_EQ(both.err.rfind("gemlet: ", 0), 0u) << both.err;
}

}  // namespace
}  // namespace gemlet
