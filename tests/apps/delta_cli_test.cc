// End to end: `gemlet diff` and `gemlet patch` on models made by `gemlet synth`, what they print,
// the rebuilt file byte for byte, and one clear line for every bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "common/test_util.h"

namespace gemlet {
namespace {

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class DeltaCli : public ::testing::Test {
 protected:
  // tiny-gemma3 with 2 and 3 layers: the same seed gives the same first two layers.
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    for (int layers : {2, 3}) {
      const test::CommandResult r = test::RunCommand(test::GemletBinary() + " synth --preset tiny-gemma3 --type Q4_0 --seed 5 --layers " +
                                                     std::to_string(layers) + " -o " + Model(layers) + " 2>&1");
      ASSERT_EQ(r.exit_code, 0) << r.out;
    }
    const test::CommandResult d =
        test::RunCommand(test::GemletBinary() + " diff " + Model(2) + " " + Model(3) + " -o " + dir_->File("p") + " 2>&1");
    ASSERT_EQ(d.exit_code, 0) << d.out;
    diff_out_ = new std::string(d.out);
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete diff_out_;
  }
  static std::string Model(int layers) { return dir_->File(layers == 2 ? "l2.gguf" : "l3.gguf"); }
  static test::TempDir* dir_;
  static std::string* diff_out_;
};
test::TempDir* DeltaCli::dir_ = nullptr;
std::string* DeltaCli::diff_out_ = nullptr;

TEST_F(DeltaCli, DiffSaysWhatChangedAndThePatchSize) {
  const std::string& out = *diff_out_;
  // A layer of 13 tensors added; what synth writes outside the layers depends on the depth.
  EXPECT_NE(out.find("wrote " + dir_->File("p") + ": "), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(: [0-2] of 41 tensors changed, 13 added, 0 removed; metadata changed\n)")))
      << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(patch ([0-9.]+) MiB = ([0-9.]+)% of NEW's ([0-9.]+) MiB)"))) << out;
  const double percent = std::stod(m[2]);
  const double expected = 100.0 * std::filesystem::file_size(dir_->File("p")) / std::filesystem::file_size(Model(3));
  EXPECT_NEAR(percent, expected, 0.01);
  EXPECT_LT(percent, 60);  // one layer of three, plus the header
  EXPECT_TRUE(std::regex_search(out, std::regex("NEW sha256 [0-9a-f]{64}\n"))) << out;
}

TEST_F(DeltaCli, PatchRebuildsNewAndPrintsItsDigest) {
  test::TempDir w;
  const test::CommandResult r =
      test::RunCommand(test::GemletBinary() + " patch " + Model(2) + " " + dir_->File("p") + " -o " + w.File("out.gguf"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(ReadBytes(w.File("out.gguf")), ReadBytes(Model(3)));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(*diff_out_, m, std::regex("NEW sha256 ([0-9a-f]{64})")));
  EXPECT_NE(r.out.find("wrote " + w.File("out.gguf") + ": "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sha256 " + m[1].str() + " (verified)"), std::string::npos) << r.out;
  // The rebuilt file is a model the other commands read.
  const test::CommandResult inspect = test::RunCommand(test::GemletBinary() + " inspect " + w.File("out.gguf") + " 2>&1");
  EXPECT_EQ(inspect.exit_code, 0) << inspect.out;

  const test::CommandResult info =
      test::RunCommand(test::GemletBinary() + " patch --info " + Model(2) + " " + dir_->File("p") + " 2>&1");
  EXPECT_EQ(info.exit_code, 0) << info.out;
  EXPECT_NE(info.out.find("to   " + m[1].str()), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("applies to " + Model(2) + "\n"), std::string::npos) << info.out;
}

TEST_F(DeltaCli, BadInputIsOneClearLine) {
  test::TempDir w;
  std::string corrupt = ReadBytes(dir_->File("p"));
  corrupt[corrupt.size() - 100] ^= 4;
  std::ofstream(w.File("corrupt"), std::ios::binary) << corrupt;
  std::ofstream(w.File("short"), std::ios::binary) << corrupt.substr(0, corrupt.size() / 2);
  const std::string p = dir_->File("p");
  test::ExpectOneClearErrorLine({
      {"diff " + Model(2), "new is required"},
      {"diff " + Model(2) + " " + Model(3), "--output is required"},
      {"diff " + Model(2) + " " + w.File("missing.gguf") + " -o " + w.File("x"), "missing.gguf"},
      {"diff " + Model(2) + " " + p + " -o " + w.File("x"), "p"},
      {"patch " + Model(2) + " " + p, "--output is required"},
      {"patch " + Model(3) + " " + p + " -o " + w.File("x"), "is not the file the patch was made from"},
      {"patch " + Model(2) + " " + w.File("corrupt") + " -o " + w.File("x"), "is corrupt: chunk"},
      {"patch " + Model(2) + " " + w.File("short") + " -o " + w.File("x"), "is truncated"},
      {"patch " + Model(2) + " " + Model(3) + " -o " + w.File("x"), "not a gemlet patch"},
      {"patch --info " + Model(3) + " " + p, "is not the file the patch was made from"},
  });
  EXPECT_FALSE(std::filesystem::exists(w.File("x")));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(w.path()), std::filesystem::directory_iterator()), 2);
}

}  // namespace
}  // namespace gemlet
