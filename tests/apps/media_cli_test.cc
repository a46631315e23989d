// Images and audio through the CLI, on the hf-mm Gemma 4 E2B-like checkpoint converted by `gemlet
// convert --mmproj-out`: `gemlet logits` with the image and the clip (from the files, and from HF's
// own pixels and features) against transformers' logits, every row; describe / transcribe /
// translate --image / run --audio answering; and one clear line for each bad input.
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
  static std::string Ids() {
    std::ifstream in(kDir + "/input_ids.json");
    const nlohmann::json j = nlohmann::json::parse(in);  // kept: the loop below reads into it
    std::string ids;
    for (int id : j["input_ids"]) {
      if (!ids.empty()) ids += ',';
      ids += std::to_string(id);  // (not "," + to_string: GCC 12 misreads that as an overlapping copy)
    }
    return ids;
  }
  // The largest difference from HF's logits of `gemlet logits ... MEDIA` over every row.
  static double LogitsDiff(const std::string& media) {
    const std::string out = dir_->File("logits.f32");
    const std::string command = test::GemletBinary() + " logits -m " + Model() + " --mmproj " + Mmproj() +
                                " --hf-eager-audio-mask --kernels ref -t 2 --tokens " + Ids() + " " + media + " --out " +
                                out + " 2>&1";
    const auto r = test::RunCommand(command);
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.out;
    const std::vector<float> got = test::ReadF32File(out);
    const std::vector<float> want = test::ReadF32File(kDir + "/logits.f32");
    EXPECT_EQ(got.size(), want.size());
    double worst = 0;
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) worst = std::max(worst, std::fabs(double{got[i]} - want[i]));
    return worst;
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

}  // namespace
}  // namespace gemlet
