// Gemma 3 / Gemma 4 preprocessing against transformers' own outputs (shared/testdata/hf-mm: each
// folder's image.png -> pixel_values.f32, image_position_ids.i32), HF's pan-and-scan and resize
// geometry on cases worked out by hand from its rules, and the config reader.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "media/image_preprocess.h"
#include "test_images.h"

namespace gemlet::media {
namespace {

std::string Folder(const std::string& name) { return test::TestdataDir() + "/hf-mm/" + name; }

std::vector<int32_t> ReadI32File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<int32_t> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

struct Diff {
  float max_abs = 0;
  size_t differing = 0;
};
Diff Compare(const std::vector<float>& got, const std::vector<float>& want) {
  Diff d;
  d.max_abs = test::MaxAbsDiff(got, want);
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) d.differing += got[i] != want[i];
  return d;
}

TEST(Gemma3Preprocess, MatchesHfPixelValues) {
  const std::string dir = Folder("gemma3_image");
  auto params = Gemma3ImageParamsFromHfJson(test::ReadTextFile(dir + "/image_processor_config.json"));
  ASSERT_TRUE(params.ok()) << params.message();
  auto image = LoadImageFile(dir + "/image.png");
  ASSERT_TRUE(image.ok()) << image.message();
  auto pixels = PreprocessGemma3(*image, *params);
  ASSERT_TRUE(pixels.ok()) << pixels.message();
  ASSERT_EQ(pixels->size(), 1u);  // no pan-and-scan in this config
  const int s = params->height;
  std::vector<float> want;
  ASSERT_TRUE(test::ReadF32Exactly(dir + "/pixel_values.f32", size_t{3} * s * s, &want));
  const Diff d = Compare((*pixels)[0].values, want);
  std::printf("gemma3_image pixel_values: %dx%d -> %dx%d, max |diff| %.3g, %zu of %zu values differ\n",
              image->width, image->height, s, s, d.max_abs, d.differing, want.size());
  // One uint8 step on HF's [-1, 1] scale is 2/255; the aim (and the result) is exact.
  EXPECT_LE(d.max_abs, 2.0f / 255.0f);
  EXPECT_EQ(d.differing, 0u);
}

// HF's Gemma3ImageProcessor with do_pan_and_scan on gemma3_image's 97x61 image (the golden of
// tools/mm_reference/pan_and_scan_goldens.py, tests/data/hf-mm/gemma3_pan_and_scan): the whole
// image and its two crops (49 and 48 columns), each resized to 64x64.
TEST(Gemma3Preprocess, PanAndScanMatchesHfPixelValues) {
  const std::string golden = std::string(GEMLET_SOURCE_DIR) + "/tests/data/hf-mm/gemma3_pan_and_scan";
  auto params = Gemma3ImageParamsFromHfJson(test::ReadTextFile(golden + "/preprocessor_config.json"));
  ASSERT_TRUE(params.ok()) << params.message();
  ASSERT_TRUE(params->pan_and_scan.enabled);
  auto image = LoadImageFile(Folder("gemma3_image") + "/image.png");
  ASSERT_TRUE(image.ok()) << image.message();
  auto pixels = PreprocessGemma3(*image, *params);
  ASSERT_TRUE(pixels.ok()) << pixels.message();
  const nlohmann::json meta = test::ReadJson(golden + "/meta.json");
  const std::vector<int> shape = meta["pixel_values_shape"].get<std::vector<int>>();  // [1 + crops, 3, S, S]
  ASSERT_EQ(shape[0], 3);
  ASSERT_EQ(pixels->size(), static_cast<size_t>(shape[0]));
  const size_t plane = size_t{3} * shape[2] * shape[3];
  std::vector<float> want;
  ASSERT_TRUE(test::ReadF32Exactly(golden + "/pixel_values.f32", plane * shape[0], &want));
  std::vector<float> got;
  for (const Gemma3Pixels& p : *pixels) {
    ASSERT_EQ(p.values.size(), plane);
    got.insert(got.end(), p.values.begin(), p.values.end());
  }
  const Diff d = Compare(got, want);
  std::printf("gemma3_pan_and_scan pixel_values: %dx%d -> whole + %zu crops of %dx%d, max |diff| %.3g, %zu of %zu values "
              "differ\n", image->width, image->height, pixels->size() - 1, shape[3], shape[2], d.max_abs, d.differing,
              want.size());
  EXPECT_LE(d.max_abs, 1.0f / 255.0f);
  // Ignoring the crops (the whole image three times) is far off.
  std::vector<float> whole_thrice;
  for (int i = 0; i < shape[0]; ++i) whole_thrice.insert(whole_thrice.end(), got.begin(), got.begin() + plane);
  EXPECT_GT(Compare(whole_thrice, want).max_abs, 0.5f);
}

void CheckGemma4Golden(const std::string& name) {
  const std::string dir = Folder(name);
  auto params = Gemma4ImageParamsFromHfJson(test::ReadTextFile(dir + "/image_processor_config.json"));
  ASSERT_TRUE(params.ok()) << params.message();
  auto image = LoadImageFile(dir + "/image.png");
  ASSERT_TRUE(image.ok()) << image.message();
  auto pixels = PreprocessGemma4(*image, *params);
  ASSERT_TRUE(pixels.ok()) << pixels.message();
  const nlohmann::json meta = test::ReadJson(dir + "/meta.json");
  const auto& shape = meta["files"]["pixel_values.f32"]["shape"];
  ASSERT_EQ(pixels->max_patches, shape[1].get<int>());
  ASSERT_EQ(pixels->patch_dim, shape[2].get<int>());
  EXPECT_EQ(pixels->num_soft_tokens, meta["n_image_tokens"].get<int>());
  std::vector<float> want;
  ASSERT_TRUE(test::ReadF32Exactly(dir + "/pixel_values.f32", pixels->pixel_values.size(), &want));
  const Diff d = Compare(pixels->pixel_values, want);
  std::printf("%s pixel_values: %dx%d -> %dx%d (%d patches, %d soft tokens), max |diff| %.3g, %zu of %zu values differ\n",
              name.c_str(), image->width, image->height, pixels->resized_width, pixels->resized_height,
              pixels->num_patches, pixels->num_soft_tokens, d.max_abs, d.differing, want.size());
  EXPECT_LE(d.max_abs, 1.0f / 255.0f);  // one uint8 step on [0, 1]; the aim (and the result) is exact
  EXPECT_EQ(d.differing, 0u);
  EXPECT_EQ(pixels->position_ids, ReadI32File(dir + "/image_position_ids.i32"));
}

TEST(Gemma4Preprocess, MatchesHfPixelValuesE2b) { CheckGemma4Golden("gemma4_e2b_image_audio"); }
TEST(Gemma4Preprocess, MatchesHfPixelValuesBidir) { CheckGemma4Golden("gemma4_bidir_image"); }

TEST(Gemma4Preprocess, ResizedSizeFollowsHfRules) {
  // 61 x 97 (H x W), patch 4, k 3, 70 soft tokens -> 630 patches, 10080 pixels: factor
  // sqrt(10080 / 5917) = 1.3052, ideal 79.6 x 126.6, multiples of 12 -> 72 x 120.
  auto size = Gemma4ResizedSize(61, 97, 4, 630, 3);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(size->height, 72);
  EXPECT_EQ(size->width, 120);
  // 97 x 61, patch 6, k 2, 280 patches: ideal 126.6 x 79.6, multiples of 12 -> 120 x 72.
  size = Gemma4ResizedSize(97, 61, 6, 280, 2);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(size->height, 120);
  EXPECT_EQ(size->width, 72);
  // A 2 x 2 image grows: ideal 50.2 * 2 = 100.4 -> 96 x 96.
  size = Gemma4ResizedSize(2, 2, 4, 630, 3);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(size->height, 96);
  EXPECT_EQ(size->width, 96);
  // 10 x 1000: the height rounds to 0, so it becomes one cell (12) and the width
  // min(floor(1000 / 10) * 12, (630 // 9) * 12) = min(1200, 840) = 840.
  size = Gemma4ResizedSize(10, 1000, 4, 630, 3);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(size->height, 12);
  EXPECT_EQ(size->width, 840);
  // 10 x 10 with a budget of one 4 x 4 patch: both sides round to 0.
  EXPECT_FALSE(Gemma4ResizedSize(10, 10, 4, 1, 3).ok());
}

TEST(Gemma4Preprocess, PatchesAndPositionsOfAnUnresizedImage) {
  // 8 x 12 (H x W) with patch 4, no resize and no rescale: patch (r, c) holds rows 4r..4r+3 and
  // columns 4c..4c+3 as (row, column, channel); positions are (c, r); the rest is padding.
  Gemma4ImageParams params;
  params.patch_size = 4;
  params.pooling_kernel_size = 1;
  params.max_soft_tokens = 8;
  params.do_resize = false;
  params.scaling.do_rescale = false;
  const Image pattern = testing::Pattern(12, 8);
  auto pixels = PreprocessGemma4(pattern, params);
  ASSERT_TRUE(pixels.ok()) << pixels.message();
  EXPECT_EQ(pixels->num_patches, 6);
  EXPECT_EQ(pixels->num_soft_tokens, 6);
  for (int patch = 0; patch < 8; ++patch) {
    const int r = patch / 3, c = patch % 3;
    const bool real = patch < 6;
    EXPECT_EQ(pixels->position_ids[2 * patch], real ? c : -1);
    EXPECT_EQ(pixels->position_ids[2 * patch + 1], real ? r : -1);
    for (int i = 0; i < 48; ++i) {
      const float v = pixels->pixel_values[static_cast<size_t>(patch) * 48 + i];
      const float want = real ? pattern.Pixel(c * 4 + (i / 3) % 4, r * 4 + i / 12)[i % 3] : 0.f;
      ASSERT_EQ(v, want) << "patch " << patch << " value " << i;
    }
  }
}

std::string Boxes(const std::vector<CropBox>& crops) {
  std::string out;
  for (const CropBox& b : crops) {
    char box[64];
    std::snprintf(box, sizeof(box), "(%d,%d %dx%d)", b.x, b.y, b.width, b.height);
    out += box;
  }
  return out;
}

TEST(Gemma3PanAndScan, CropGeometryFollowsHfRules) {
  const PanAndScanParams on{.enabled = true};  // min crop 256, at most 4 crops, ratio 1.2
  // 1000 x 300: ratio 3.33; floor(3.33 + 0.5) = 3, floor(1000 / 256) = 3 -> 3 crops of
  // ceil(1000 / 3) = 334 (the last cut to 332) x 300.
  EXPECT_EQ(Boxes(PanAndScanCrops(1000, 300, on)), "(0,0 334x300)(334,0 334x300)(668,0 332x300)");
  // The same standing up.
  EXPECT_EQ(Boxes(PanAndScanCrops(300, 1000, on)), "(0,0 300x334)(0,334 300x334)(0,668 300x332)");
  // 600 x 300: 2 crops of 300 x 300.
  EXPECT_EQ(Boxes(PanAndScanCrops(600, 300, on)), "(0,0 300x300)(300,0 300x300)");
  // 2000 x 300: floor(7.17) = 7, floor(2000 / 256) = 7, capped at 4 -> 500 x 300.
  EXPECT_EQ(Boxes(PanAndScanCrops(2000, 300, on)), "(0,0 500x300)(500,0 500x300)(1000,0 500x300)(1500,0 500x300)");
  // 500 x 450: ratio 1.11 < 1.2, nothing.
  EXPECT_EQ(PanAndScanCrops(500, 450, on).size(), 0u);
  // 700 x 200: 2 crops of 350 x 200, but 200 < 256: nothing.
  EXPECT_EQ(PanAndScanCrops(700, 200, on).size(), 0u);
  // 513 x 256: ratio 2.004 -> 2 crops; floor(513 / 256) = 2; ceil(256.5) = 257 x 256.
  EXPECT_EQ(Boxes(PanAndScanCrops(513, 256, on)), "(0,0 257x256)(257,0 256x256)");
  // 97 x 61 with min crop 20: ratio 1.59 -> floor(2.09) = 2 crops of ceil(48.5) = 49 (and 48).
  const PanAndScanParams small{.enabled = true, .min_crop_size = 20};
  EXPECT_EQ(Boxes(PanAndScanCrops(97, 61, small)), "(0,0 49x61)(49,0 48x61)");
  // 100 x 100 at ratio 1.0 (square, width >= height): 1.0 < 1.2, nothing; disabled: nothing.
  EXPECT_EQ(PanAndScanCrops(100, 100, small).size(), 0u);
  EXPECT_EQ(PanAndScanCrops(1000, 300, PanAndScanParams{}).size(), 0u);
}

TEST(Gemma3PanAndScan, CropsArePreprocessedLikeWholeImages) {
  Gemma3ImageParams params;
  params.height = params.width = 32;
  params.pan_and_scan = {.enabled = true, .min_crop_size = 20, .max_num_crops = 4, .min_ratio_to_activate = 1.2};
  const Image image = testing::Pattern(97, 61);
  auto all = PreprocessGemma3(image, params);
  ASSERT_TRUE(all.ok()) << all.message();
  ASSERT_EQ(all->size(), 3u);  // the whole image, then two crops
  Gemma3ImageParams plain = params;
  plain.pan_and_scan.enabled = false;
  const std::vector<CropBox> crops = PanAndScanCrops(97, 61, params.pan_and_scan);
  for (size_t i = 0; i < all->size(); ++i) {
    const Image source = i == 0 ? image : CropImage(image, crops[i - 1]);
    auto alone = PreprocessGemma3(source, plain);
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ((*all)[i].values, (*alone)[0].values) << "image " << i;
    EXPECT_EQ((*all)[i].values.size(), size_t{3} * 32 * 32);
  }
}

TEST(ImageProcessorConfig, DefaultsNestingAndErrors) {
  auto g3 = Gemma3ImageParamsFromHfJson("{}");
  ASSERT_TRUE(g3.ok());
  EXPECT_EQ(g3->height, 224);
  EXPECT_EQ(g3->resample, Resample::kBilinear);
  EXPECT_FALSE(g3->pan_and_scan.enabled);
  g3 = Gemma3ImageParamsFromHfJson(R"({"image_processor": {"image_processor_type": "Gemma3ImageProcessorFast",
      "size": 896, "do_pan_and_scan": true, "pan_and_scan_min_crop_size": null, "image_mean": 0.25}})");
  ASSERT_TRUE(g3.ok()) << g3.message();
  EXPECT_EQ(g3->height, 896);
  EXPECT_EQ(g3->width, 896);
  EXPECT_TRUE(g3->pan_and_scan.enabled);
  EXPECT_EQ(g3->pan_and_scan.min_crop_size, 256);  // null keeps the default
  EXPECT_EQ(g3->scaling.mean[2], 0.25f);

  auto g4 = Gemma4ImageParamsFromHfJson(test::ReadTextFile(Folder("gemma4_bidir_image") + "/image_processor_config.json"));
  ASSERT_TRUE(g4.ok()) << g4.message();
  EXPECT_EQ(g4->patch_size, 6);
  EXPECT_EQ(g4->pooling_kernel_size, 2);
  EXPECT_EQ(g4->max_soft_tokens, 70);
  EXPECT_EQ(g4->resample, Resample::kBicubic);
  EXPECT_FALSE(g4->scaling.do_normalize);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"image_processor_type": "SiglipImageProcessor"})", "not Gemma4ImageProcessor"},
      {R"({"patch_size": "16"})", "'patch_size' must be"},
      {R"({"patch_size": 0})", "must be positive"},
      {R"({"resample": 1})", "resample 1 is not supported"},
      {R"({"image_std": [1, 2]})", "'image_std' must be"},
      {R"({"do_rescale": 1})", "'do_rescale' must be true or false"},
      {R"([1, 2])", "not a JSON object"},
      {R"({"patch_size": )", "not valid JSON"},
  };
  for (const auto& [text, expect] : bad) {
    auto r = Gemma4ImageParamsFromHfJson(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.message().find(expect), std::string::npos) << text << " -> " << r.message();
  }
  auto size = Gemma3ImageParamsFromHfJson(R"({"size": {"shortest_edge": 896}})");
  ASSERT_FALSE(size.ok());
  EXPECT_NE(size.message().find("'size' must be"), std::string::npos);
}

}  // namespace
}  // namespace gemlet::media
