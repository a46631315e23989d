// Gemma 3's vision tower against transformers (shared/testdata/hf-mm/gemma3_image): the checkpoint
// converted to an mmproj by `gemlet convert --mmproj-out`'s writer, then HF's own pixel values
// through SigLIP and the projector (the tower's output and the image embeddings), and the image file
// through src/media first. On the reference kernels and the best ones this CPU runs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "convert/mmproj.h"
#include "convert/safetensors.h"
#include "encoders/vision_encoder.h"
#include "kernels/kernels.h"
#include "media/image.h"
#include "media/image_preprocess.h"

namespace gemlet {
namespace {

const std::string kDir = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/gemma3_image";

std::vector<float> ReadF32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::fabs(double{a[i]} - b[i]));
  return worst;
}

// Files the tests wrote, removed when the binary exits.
struct TempFiles {
  std::vector<std::string> paths;
  ~TempFiles() {
    for (const std::string& p : paths) std::filesystem::remove(p);
  }
};

// The checkpoint's mmproj, written once per test binary (F32 or F16 matrices).
std::string Mmproj(DType type) {
  static TempFiles written_files;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("gemlet-gemma3-mmproj-" + std::to_string(::getpid()) + "-" + DTypeName(type) + ".gguf"))
                               .string();
  if (std::filesystem::exists(path)) return path;
  auto checkpoint = SafetensorsCheckpoint::OpenDir(kDir);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.message();
  MmprojOptions o;
  o.hf_dir = kDir;
  o.output_path = path;
  o.outtype = type;
  o.model_name = "gemma3_image";
  auto written = WriteMmproj(o, *checkpoint.value());
  EXPECT_TRUE(written.ok()) << written.message();
  written_files.paths.push_back(path);
  return path;
}

class Gemma3Vision : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    kernels_ = KernelsNamed(GetParam());
    ASSERT_NE(kernels_, nullptr);
  }
  const KernelTable* kernels_ = nullptr;
};

TEST_P(Gemma3Vision, HfPixelsGiveHfEmbeddings) {
  auto encoder = VisionEncoder::Open(Mmproj(DType::kF32));
  ASSERT_TRUE(encoder.ok()) << encoder.message();
  const VisionTowerConfig& c = encoder.value()->config();
  EXPECT_EQ(c.projector_name, "gemma3");
  EXPECT_EQ(c.n_tokens(), 16);
  EXPECT_EQ(c.projection_dim, 64);
  const std::vector<float> pixels = ReadF32(kDir + "/pixel_values.f32");
  ASSERT_EQ(pixels.size(), static_cast<size_t>(3 * c.image_size * c.image_size));
  KernelContext ctx(2, kernels_);
  std::vector<float> embeddings(static_cast<size_t>(c.n_tokens() * c.projection_dim)), tower;
  ASSERT_TRUE(encoder.value()->Encode(pixels.data(), embeddings.data(), ctx, &tower).ok());
  const double tower_diff = MaxAbsDiff(tower, ReadF32(kDir + "/vision_tower_out.f32"));
  const std::vector<float> golden = ReadF32(kDir + "/image_embeds.f32");
  const double embeds_diff = MaxAbsDiff(embeddings, golden);
  std::printf("[gemma3 vision, %s] tower max |diff| %.2e, embeddings max |diff| %.2e\n", GetParam(), tower_diff,
              embeds_diff);
  EXPECT_LT(tower_diff, 1e-4);
  EXPECT_LT(embeds_diff, 1e-4);

  // A blank image gives embeddings far from the golden: the comparison above can fail.
  std::vector<float> blank(pixels.size(), 0.0f), blank_embeddings(embeddings.size());
  ASSERT_TRUE(encoder.value()->Encode(blank.data(), blank_embeddings.data(), ctx).ok());
  EXPECT_GT(MaxAbsDiff(blank_embeddings, golden), 0.1);
}

// F16 matrices (what llama.cpp's converter writes by default): within F16's rounding of HF.
TEST_P(Gemma3Vision, F16MatricesStayClose) {
  auto encoder = VisionEncoder::Open(Mmproj(DType::kF16));
  ASSERT_TRUE(encoder.ok()) << encoder.message();
  const VisionTowerConfig& c = encoder.value()->config();
  const std::vector<float> pixels = ReadF32(kDir + "/pixel_values.f32");
  KernelContext ctx(2, kernels_);
  std::vector<float> embeddings(static_cast<size_t>(c.n_tokens() * c.projection_dim));
  ASSERT_TRUE(encoder.value()->Encode(pixels.data(), embeddings.data(), ctx).ok());
  const double diff = MaxAbsDiff(embeddings, ReadF32(kDir + "/image_embeds.f32"));
  std::printf("[gemma3 vision f16, %s] embeddings max |diff| %.2e\n", GetParam(), diff);
  EXPECT_LT(diff, 1e-2);
}

// End to end from the PNG: src/media's preprocessing (bit-exact to HF's, tested there), then the tower.
TEST_P(Gemma3Vision, ImageFileGivesHfEmbeddings) {
  auto encoder = VisionEncoder::Open(Mmproj(DType::kF32));
  ASSERT_TRUE(encoder.ok()) << encoder.message();
  const VisionTowerConfig& c = encoder.value()->config();
  auto image = media::LoadImageFile(kDir + "/image.png", media::ImageLimits{});
  ASSERT_TRUE(image.ok()) << image.message();
  media::Gemma3ImageParams params;
  params.height = params.width = c.image_size;
  params.scaling.mean = c.mean;
  params.scaling.std = c.std;
  auto pixels = media::PreprocessGemma3(image.value(), params);
  ASSERT_TRUE(pixels.ok()) << pixels.message();
  KernelContext ctx(2, kernels_);
  std::vector<float> embeddings(static_cast<size_t>(c.n_tokens() * c.projection_dim));
  ASSERT_TRUE(encoder.value()->Encode(pixels.value()[0].values.data(), embeddings.data(), ctx).ok());
  EXPECT_LT(MaxAbsDiff(embeddings, ReadF32(kDir + "/image_embeds.f32")), 1e-3);
}

TEST(VisionEncoder, RefusesWhatItCannotRun) {
  EXPECT_FALSE(VisionEncoder::Open(kDir + "/config.json").ok());  // not a GGUF
  auto text_model = VisionEncoder::Open(std::string(GEMLET_TESTDATA_DIR) + "/gguf/gemma4_e2b_like.gguf");
  ASSERT_FALSE(text_model.ok());
  EXPECT_NE(text_model.message().find("not an mmproj"), std::string::npos) << text_model.message();
}

INSTANTIATE_TEST_SUITE_P(Kernels, Gemma3Vision, ::testing::Values("ref", "auto"));

}  // namespace
}  // namespace gemlet
