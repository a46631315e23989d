// End to end: the built `gemlet inspect` on good and corrupt files (exit codes, stdout, stderr).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gguf_test_util.h"

namespace gemlet {
namespace {

const std::string kGemlet = std::string(GEMLET_BINARY_DIR) + "/apps/gemlet/gemlet";
const std::string kGemma1 = std::string(GEMLET_TESTDATA_DIR) + "/gguf/gemma1_2b_like_mqa.gguf";
const std::string kQ4K = std::string(GEMLET_TESTDATA_DIR) + "/quant/Q4_K.gguf";

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliRun Inspect(const std::string& args) {
  const std::string out = testing::TempPath("stdout.txt");
  const std::string err = testing::TempPath("stderr.txt");
  const std::string cmd = "'" + kGemlet + "' inspect " + args + " >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(out);
  r.err = Slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

TEST(GemletInspect, PrintsHeaderMetadataAndSummary) {
  const CliRun r = Inspect("'" + kGemma1 + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("GGUF v3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alignment 32, data section at byte 14624"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("metadata: 28 keys"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("general.architecture"), std::string::npos);
  EXPECT_NE(r.out.find("\"gemma\""), std::string::npos);
  EXPECT_NE(r.out.find("arr[str,512]"), std::string::npos) << "token arrays show their count";
  EXPECT_NE(r.out.find("... (512 str)"), std::string::npos) << "long arrays are abbreviated";
  EXPECT_EQ(r.out.find("<t100>"), std::string::npos) << "long arrays are abbreviated";
  EXPECT_NE(r.out.find("38 tensors, 2.38 MiB: F32 2.38 MiB (38); 623744 parameters"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("blk.0.attn_q.weight"), std::string::npos) << "the table needs --tensors";
}

TEST(GemletInspect, ListsTensorsOnRequest) {
  const CliRun r = Inspect("--tensors '" + kQ4K + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tensors: 5"), std::string::npos) << r.out;
  // name, type, shape, bytes, file offset: the fallback tensor shows its real type.
  EXPECT_NE(r.out.find("blk.0.ffn_up.weight    Q5_0    [1152, 8]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("6336"), std::string::npos);
  EXPECT_NE(r.out.find("10880"), std::string::npos);
  EXPECT_NE(r.out.find("5 tensors, 16.03 KiB: Q4_K 9.84 KiB (4), Q5_0 6.19 KiB (1); 27136 parameters"),
            std::string::npos)
      << r.out;
}

TEST(GemletInspect, JsonIsMachineReadable) {
  const CliRun r = Inspect("--json --tensors '" + kQ4K + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["alignment"], 32);
  EXPECT_EQ(j["data_offset"], 800);
  EXPECT_EQ(j["metadata"]["general.architecture"], "llama");
  EXPECT_EQ(j["metadata"]["llama.attention.layer_norm_rms_epsilon"], 1e-6);
  EXPECT_EQ(j["metadata_types"]["general.file_type"], "u32");
  ASSERT_EQ(j["tensors"].size(), 5u);
  EXPECT_EQ(j["tensors"][4]["name"], "blk.0.ffn_up.weight");
  EXPECT_EQ(j["tensors"][4]["type"], "Q5_0");
  EXPECT_EQ(j["tensors"][4]["shape"], nlohmann::json({1152, 8}));
  EXPECT_EQ(j["tensors"][4]["bytes"], 6336);
  EXPECT_EQ(j["tensors"][4]["file_offset"], 10880);
  EXPECT_EQ(j["summary"]["parameters"], 27136);
  EXPECT_EQ(j["summary"]["by_type"]["Q4_K"]["tensors"], 4);

  const CliRun g = Inspect("--json '" + kGemma1 + "'");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const nlohmann::json jg = nlohmann::json::parse(g.out);
  EXPECT_EQ(jg["metadata"]["tokenizer.ggml.tokens"]["count"], 512);
  EXPECT_EQ(jg["metadata"]["tokenizer.ggml.tokens"]["first"][2], "<bos>");
  EXPECT_EQ(jg["metadata"]["gemma.block_count"], 4);
  EXPECT_FALSE(jg.contains("tensors"));
  EXPECT_EQ(jg["summary"]["tensors"], 38);
}

// A bad file: one line "gemlet: <error>" on stderr, nothing on stdout, exit 1.
void ExpectOneLineError(const CliRun& r, const std::string& want) {
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("gemlet: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
}

TEST(GemletInspect, ACorruptFileIsOneClearError) {
  std::vector<uint8_t> bytes = testing::ReadBytes(kGemma1);
  ASSERT_GT(bytes.size(), 100000u);
  const std::string path = testing::TempPath("truncated.gguf");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), 100000);
  ExpectOneLineError(Inspect("'" + path + "'"), "is not a valid GGUF file: tensor 'token_embd.weight' (262144 bytes at data offset 0) runs past");
  ExpectOneLineError(Inspect("--json '" + path + "'"), "runs past the end of the file");

  bytes[0] = 'X';
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ExpectOneLineError(Inspect("'" + path + "'"), "bad magic");
  std::remove(path.c_str());

  ExpectOneLineError(Inspect("/nonexistent/x.gguf"), "cannot open '/nonexistent/x.gguf'");
}

TEST(GemletInspect, UsageErrorsAndHelp) {
  const CliRun none = Inspect("");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("file"), std::string::npos) << none.err;
  const CliRun help = Inspect("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--tensors"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--json"), std::string::npos);
  EXPECT_NE(Inspect("--bogus '" + kGemma1 + "'").exit_code, 0);
}

}  // namespace
}  // namespace gemlet
