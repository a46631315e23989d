// Images and audio through the CLI, on the hf-mm Gemma 4 E2B-like checkpoint converted by `gemlet
// convert --mmproj-out`: `gemlet logits` with the image and the clip (from the files, and from HF's
// own pixels and features) against transformers' logits, every row; describe / transcribe /
// translate --image / run --audio answering; and one clear line for each bad input. Then the same
// logits on Gemma 3n's golden with an image and a clip (tests/data/hf-mm/gemma3n_image_audio).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/long_clip.h"
#include "common/test_util.h"

namespace gemlet {
namespace {

const std::string kDir = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/gemma4_e2b_image_audio";

// HF's expanded prompt of a golden, as --tokens takes it.
std::string GoldenIds(const std::string& dir) {
  std::ifstream in(dir + "/input_ids.json");
  const nlohmann::json j = nlohmann::json::parse(in);  // kept: the loop below reads into it
  std::string ids;
  for (int id : j["input_ids"]) {
    if (!ids.empty()) ids += ',';
    ids += std::to_string(id);  // (not "," + to_string: GCC 12 misreads that as an overlapping copy)
  }
  return ids;
}

// The largest difference from the golden's logits of `gemlet logits ARGS MEDIA`, every row.
double CliLogitsDiff(const std::string& dir, const std::string& args, const std::string& media, const std::string& out) {
  const std::string command = test::GemletBinary() + " logits " + args + " --kernels ref -t 2 --tokens " + GoldenIds(dir) +
                              " " + media + " --out " + out + " 2>&1";
  const auto r = test::RunCommand(command);
  EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.out;
  const std::vector<float> got = test::ReadF32File(out);
  const std::vector<float> want = test::ReadF32File(dir + "/logits.f32");
  EXPECT_EQ(got.size(), want.size());
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double{got[i]} - want[i]));
  return worst;
}

class MediaCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    const auto r = test::RunCommand(test::GemletBinary() + " convert " + kDir + " -o " + Model() + " --mmproj-out " +
                                    Mmproj() + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Model() { return dir_->File("e2b.gguf"); }
  static std::string Mmproj() { return dir_->File("e2b-mmproj.gguf"); }
  static std::string Ids() { return GoldenIds(kDir); }
  // The largest difference from HF's logits of `gemlet logits ... MEDIA` over every row.
  static double LogitsDiff(const std::string& media) {
    return CliLogitsDiff(kDir, "-m " + Model() + " --mmproj " + Mmproj() + " --hf-eager-audio-mask", media,
                         dir_->File("logits.f32"));
  }
  static test::TempDir* dir_;
};
test::TempDir* MediaCli::dir_ = nullptr;

TEST_F(MediaCli, LogitsWithTheImageAndTheClipMatchHf) {
  const double files = LogitsDiff("--image " + kDir + "/image.png --audio " + kDir + "/audio.wav");
  const double hf_inputs = LogitsDiff("--pixel-values " + kDir + "/pixel_values.f32 --pixel-positions " + kDir +
                                      "/image_position_ids.i32 --audio-features " + kDir + "/input_features.f32 --audio-mask " +
                                      kDir + "/input_features_mask.u8");
  std::printf("gemlet logits, all 115 rows: from the files %.2e, from HF's pixels and features %.2e\n", files, hf_inputs);
  EXPECT_LT(hf_inputs, 1e-4);
  EXPECT_LT(files, 1e-3);
}

TEST_F(MediaCli, TasksAndRunAnswerWithMedia) {
  // -n 3 cuts the answers off, which breaks the tasks' contract: --lenient prints them anyway.
  const std::string m = " -m " + Model() + " --mmproj " + Mmproj() + " --no-cache -t 2 -n 3 ";
  const std::string lenient = m + "--lenient ";
  for (const std::string& args : {"describe" + lenient + kDir + "/image.png", "transcribe" + lenient + kDir + "/audio.wav --to zh",
                                   "translate --to en" + lenient + "--image " + kDir + "/image.png",
                                   "run" + m + "--audio " + kDir + "/audio.wav -p hi"}) {
    const auto r = test::RunCommand(test::GemletBinary() + " " + args + " 2>/dev/null </dev/null");
    EXPECT_EQ(r.exit_code, 0) << args;
    EXPECT_FALSE(r.out.empty()) << args;
  }
}

// A clip over the model's 30 s: transcribed in pieces cut at its pauses; over --max-audio-seconds, refused.
TEST_F(MediaCli, TranscribeTakesALongClip) {
  const std::string clip = dir_->File("long.wav");
  {
    std::ofstream out(clip, std::ios::binary);
    out << test::LongClipWav(70.0);
  }
  const std::string m = " -m " + Model() + " --mmproj " + Mmproj() + " --no-cache -t 2 -n 3 --stats --lenient ";
  const auto r = test::RunCommand(test::GemletBinary() + " transcribe" + m + clip + " 2>&1 </dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(", 3 parts,"), std::string::npos) << r.out;
  test::ExpectOneClearErrorLine({{"transcribe" + m + clip + " --max-audio-seconds 60", "70.0 s"}});
}

TEST_F(MediaCli, BadMediaIsOneClearLine) {
  const std::string m = " -m " + Model() + " --mmproj " + Mmproj() + " --no-cache ";
  test::ExpectOneClearErrorLine({
      {"describe -m " + Model() + " " + kDir + "/image.png", "--mmproj"},
      {"transcribe" + m + kDir + "/image.png", "not audio gemlet can read"},
      {"describe" + m + kDir + "/audio.wav", "not an image gemlet can read"},
      {"run" + m + "--image " + Model() + " -p hi", "not an image"},
      {"run -m " + Model() + " --image " + kDir + "/image.png -p hi", "--mmproj"},
      {"logits -m " + Model() + " --mmproj " + Mmproj() + " --image " + kDir + "/image.png --image " + kDir + "/image.png --tokens " + Ids() + " --out " +
           dir_->File("x.f32"),
       "2 image(s) given"},
      {"logits -m " + Model() + " --mmproj " + Mmproj() + " --audio-features " + kDir + "/input_features_mask.u8 --tokens " +
           Ids() + " --out " + dir_->File("x.f32"),
       "not a whole number of 4-byte values"},
      {"logits -m " + Model() + " --mmproj " + Mmproj() + " --audio-features " + kDir + "/pixel_values.f32 --tokens " +
           Ids() + " --out " + dir_->File("x.f32"),
       "has 237 soft tokens, but its run of placeholders at position 68 has 43"},
      {"run -m " + Model() + " --mmproj " + Model() + " -p hi", "mmproj"},
  });
}

// Gemma 3n (the repository's own golden, from transformers 5.17): `gemlet convert --mmproj-out`, then
// `gemlet logits` with the image and the clip on their placeholder runs (each run followed by its end
// marker, which the tower embeds), every row against HF's: from the files within 10x the 1e-2,
// from HF's pixels and features within 1e-2; without the image, far off.
TEST(MediaCliGemma3n, LogitsWithTheImageAndTheClipMatchHf) {
  const std::string dir = std::string(GEMLET_SOURCE_DIR) + "/tests/data/hf-mm/gemma3n_image_audio";
  const test::TempDir tmp;
  const std::string model = tmp.File("3n.gguf"), mmproj = tmp.File("3n-mmproj.gguf");
  const auto r = test::RunCommand(test::GemletBinary() + " convert " + dir + " -o " + model + " --mmproj-out " + mmproj +
                                  " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string args = "-m " + model + " --mmproj " + mmproj, out = tmp.File("logits.f32");
  const double files = CliLogitsDiff(dir, args, "--image " + dir + "/image.png --audio " + dir + "/audio.wav", out);
  const double hf_inputs = CliLogitsDiff(dir, args, "--pixel-values " + dir + "/pixel_values.f32 --audio-features " + dir +
                                                        "/input_features.f32 --audio-mask " + dir + "/input_features_mask.u8",
                                         out);
  const double no_image = CliLogitsDiff(dir, args, "--audio " + dir + "/audio.wav", out);
  std::printf("gemlet logits (Gemma 3n), all 48 rows: from the files %.2e, from HF's pixels and features %.2e, "
              "without the image %.2f\n", files, hf_inputs, no_image);
  EXPECT_LT(hf_inputs, 1e-2);
  EXPECT_LT(files, 1e-1);
  EXPECT_GT(no_image, 1.0);
}

}  // namespace
}  // namespace gemlet
