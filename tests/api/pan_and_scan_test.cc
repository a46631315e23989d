// Gemma 3's pan-and-scan through the public API against transformers 5.17 (tests/data/hf-mm/
// gemma3_pan_and_scan, made by tools/mm_reference/pan_and_scan_goldens.py from hf-mm's gemma3_image:
// Gemma3Processor with do_pan_and_scan, its 97x61 image cut into two crops): every row's logits of the
// processor's prompt, from HF's pixels and end to end from image.png, and how far they move when the
// crops are blanked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/hf_mm_models.h"
#include "common/test_util.h"
#include "gemlet/gemlet.hpp"

namespace gemlet {
namespace {

const std::string kGolden = std::string(GEMLET_SOURCE_DIR) + "/tests/data/hf-mm/gemma3_pan_and_scan";
const std::string kImage = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/gemma3_image/image.png";

using test::MaxAbsDiff;
using test::ReadRawFile;

struct Golden {
  std::vector<int32_t> ids;
  std::vector<int> image_positions;  // the first placeholder of the whole image, then of each crop
  int soft_tokens = 0;
  size_t pixels_per_image = 0;
};

Golden ReadGolden() {
  Golden g;
  const nlohmann::json ids = test::ReadJson(kGolden + "/input_ids.json");
  const nlohmann::json meta = test::ReadJson(kGolden + "/meta.json");
  g.ids = ids["input_ids"].get<std::vector<int32_t>>();
  const std::vector<std::string> tokens = ids["tokens"].get<std::vector<std::string>>();
  for (size_t i = 1; i < tokens.size(); ++i) {
    if (tokens[i] == "<image_soft_token>" && tokens[i - 1] == "<start_of_image>") g.image_positions.push_back(static_cast<int>(i));
  }
  g.soft_tokens = meta["mm_tokens_per_image"].get<int>();
  const std::vector<int> shape = meta["pixel_values_shape"].get<std::vector<int>>();
  g.pixels_per_image = static_cast<size_t>(shape[1]) * shape[2] * shape[3];
  return g;
}

std::shared_ptr<Engine> Load(const std::string& kernels) {
  const test::HfMmModel& c = test::ConvertHfMm("gemma3_image");
  EngineOptions o;
  o.mmproj_path = c.mmproj;
  o.n_threads = 2;
  o.kernels.kernels = kernels;
  o.thermal.enabled = false;
  auto engine = Engine::Load(c.model, o);
  EXPECT_TRUE(engine.ok()) << engine.message();
  return engine.ok() ? engine.value() : nullptr;
}

// Every row's logits of the golden's prompt, the images on their placeholders.
std::vector<float> PromptLogits(const std::shared_ptr<Engine>& engine, const Golden& g,
                                const std::vector<std::shared_ptr<const EncodedMedia>>& images) {
  SessionOptions so;
  so.n_ctx = 256;
  so.kv_cache_type = KvCacheType::kF32;  // HF's goldens are float32 throughout
  auto session = Session::Create(engine, so);
  EXPECT_TRUE(session.ok()) << session.message();
  Prompt prompt{g.ids, {}};
  for (size_t i = 0; i < images.size(); ++i) prompt.media.push_back({g.image_positions[i], images[i]});
  std::vector<float> logits(g.ids.size() * static_cast<size_t>(engine->info().n_vocab));
  const Status s = session.value()->Evaluate(prompt, logits.data(), /*all_logits=*/true);
  EXPECT_TRUE(s.ok()) << s.message();
  return logits;
}

ImageOptions PanAndScan() {
  // The golden's preprocessor_config.json: crops of at least 20 pixels (the model sees 64x64).
  ImageOptions o;
  o.pan_and_scan.enabled = true;
  o.pan_and_scan.min_crop_size = 20;
  o.pan_and_scan.max_crops = 4;
  o.pan_and_scan.min_ratio = 1.2;
  return o;
}

TEST(PanAndScan, LogitsMatchHf) {
  const Golden g = ReadGolden();
  ASSERT_EQ(g.image_positions.size(), 3u);  // the whole image and two crops
  const std::vector<float> golden = ReadRawFile<float>(kGolden + "/logits.f32");
  const std::vector<float> golden_without_crops = ReadRawFile<float>(kGolden + "/logits_without_crops.f32");
  const std::vector<float> pixels = ReadRawFile<float>(kGolden + "/pixel_values.f32");
  ASSERT_EQ(pixels.size(), g.image_positions.size() * g.pixels_per_image);
  for (const std::string kernels : {"ref", "auto"}) {
    SCOPED_TRACE(kernels);
    auto engine = Load(kernels);
    ASSERT_NE(engine, nullptr);
    const int n_vocab = engine->info().n_vocab;
    ASSERT_EQ(golden.size(), g.ids.size() * static_cast<size_t>(n_vocab));
    const auto rows_argmax_equal = [&](const std::vector<float>& logits) {
      for (size_t r = 0; r < g.ids.size(); ++r) {
        EXPECT_EQ(test::ArgMax(&logits[r * n_vocab], n_vocab), test::ArgMax(&golden[r * n_vocab], n_vocab)) << "row " << r;
      }
    };

    // HF's pixels, each image through the tower alone.
    std::vector<std::shared_ptr<const EncodedMedia>> hf;
    for (size_t i = 0; i < g.image_positions.size(); ++i) {
      auto m = engine->EncodeImagePixels(std::span<const float>(pixels).subspan(i * g.pixels_per_image, g.pixels_per_image));
      ASSERT_TRUE(m.ok()) << m.message();
      ASSERT_EQ(m.value()->n_tokens, g.soft_tokens);
      hf.push_back(m.value());
    }
    const std::vector<float> logits = PromptLogits(engine, g, hf);
    const double diff = MaxAbsDiff(logits, golden);
    std::printf("[gemma3_pan_and_scan, %s] logits of %zu rows with HF's pixels: max |diff| %.2e\n", kernels.c_str(),
                g.ids.size(), diff);
    EXPECT_LT(diff, 1e-3);
    rows_argmax_equal(logits);

    // End to end: image.png decoded, cut and preprocessed by gemlet (ImageOptions::pan_and_scan).
    auto from_file = engine->EncodeImageFile(kImage, PanAndScan());
    ASSERT_TRUE(from_file.ok()) << from_file.message();
    const std::shared_ptr<const EncodedMedia>& whole = from_file.value();
    ASSERT_EQ(whole->crops.size(), 2u);
    std::vector<std::shared_ptr<const EncodedMedia>> ours = {whole};
    ours.insert(ours.end(), whole->crops.begin(), whole->crops.end());
    const std::vector<float> file_logits = PromptLogits(engine, g, ours);
    const double file_diff = MaxAbsDiff(file_logits, golden);
    std::printf("[gemma3_pan_and_scan, %s] from image.png: max |diff| %.2e\n", kernels.c_str(), file_diff);
    EXPECT_LT(file_diff, 1e-2);
    rows_argmax_equal(file_logits);

    // The crops count: blanked (their pixels zero, as the golden's logits_without_crops) the logits
    // are HF's blanked ones and far from the golden.
    const std::vector<float> zeros(g.pixels_per_image, 0.0f);
    auto blank = engine->EncodeImagePixels(zeros);
    ASSERT_TRUE(blank.ok()) << blank.message();
    const std::vector<float> blanked = PromptLogits(engine, g, {hf[0], blank.value(), blank.value()});
    const double to_blanked_hf = MaxAbsDiff(blanked, golden_without_crops);
    const double moved = MaxAbsDiff(blanked, golden);
    std::printf("[gemma3_pan_and_scan, %s] crops blanked: max |diff| %.2e to HF's blanked, %.3f to HF's (HF's own: %.3f)\n",
                kernels.c_str(), to_blanked_hf, moved, MaxAbsDiff(golden_without_crops, golden));
    EXPECT_LT(to_blanked_hf, 1e-3);
    EXPECT_GT(moved, 100 * 1e-2);
  }
}

// The engine's prompt: the whole image and each crop in its own markup, the processor's words
// around them, a span for each (the words' ids are the vocabulary's; media_prompt_test checks them
// against the processor's).
TEST(PanAndScan, PromptHoldsTheImageThenItsCrops) {
  auto engine = Load("auto");
  ASSERT_NE(engine, nullptr);
  const Golden g = ReadGolden();
  auto image = engine->EncodeImageFile(kImage, PanAndScan());
  ASSERT_TRUE(image.ok()) << image.message();
  const std::vector<ContentPart> parts = {{"", image.value()}};
  auto prompt = engine->TokenizePrompt(parts);
  ASSERT_TRUE(prompt.ok()) << prompt.message();
  const std::vector<MediaSpan>& spans = prompt.value().media;
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].media, image.value());
  EXPECT_EQ(spans[1].media, image.value()->crops[0]);
  EXPECT_EQ(spans[2].media, image.value()->crops[1]);
  const int32_t boi = g.ids[g.image_positions[0] - 1], soft = g.ids[g.image_positions[0]];
  const int32_t eoi = g.ids[g.image_positions[0] + g.soft_tokens];
  for (const MediaSpan& s : spans) {
    EXPECT_EQ(prompt.value().tokens[s.position - 1], boi);
    EXPECT_EQ(std::count(prompt.value().tokens.begin() + s.position,
                         prompt.value().tokens.begin() + s.position + g.soft_tokens, soft), g.soft_tokens);
    EXPECT_EQ(prompt.value().tokens[s.position + g.soft_tokens], eoi);
  }
  EXPECT_GT(spans[1].position - spans[0].position, g.soft_tokens + 2);  // the words between

  // Without pan-and-scan, or when the image is not long enough to cut, no crops.
  auto plain = engine->EncodeImageFile(kImage);
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_TRUE(plain.value()->crops.empty());
  EXPECT_EQ(plain.value()->embeddings, image.value()->embeddings);
  ImageOptions square = PanAndScan();
  square.pan_and_scan.min_ratio = 2.0;  // 97 / 61 = 1.59
  auto uncut = engine->EncodeImageFile(kImage, square);
  ASSERT_TRUE(uncut.ok()) << uncut.message();
  EXPECT_TRUE(uncut.value()->crops.empty());

  ImageOptions bad = PanAndScan();
  bad.pan_and_scan.min_crop_size = 0;
  EXPECT_FALSE(engine->EncodeImageFile(kImage, bad).ok());
}

}  // namespace
}  // namespace gemlet
