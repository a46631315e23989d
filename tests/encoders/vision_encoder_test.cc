// Gemma 3's vision tower against transformers (shared/testdata/hf-mm/gemma3_image): the checkpoint
// converted to an mmproj by `gemlet convert --mmproj-out`'s writer, then HF's own pixel values
// through SigLIP and the projector (the tower's output and the image embeddings), and the image file
// through src/media first. On the reference kernels and the best ones this CPU runs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/mmproj.h"
#include "convert/safetensors.h"
#include "encoders/hf_mm_files.h"
#include "encoders/vision_encoder.h"
#include "kernels/kernels.h"
#include "media/image.h"
#include "media/image_preprocess.h"
#include "model/kv_cache.h"
#include "model/model.h"

#include <nlohmann/json.hpp>

namespace gemlet {
namespace {

using hfmm::MaxAbsDiff;
using hfmm::ReadF32;
using hfmm::TempFiles;

const std::string kDir = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/gemma3_image";

// The checkpoint's mmproj (F32 or F16 matrices).
std::string Mmproj(DType type) { return hfmm::Mmproj("gemma3_image", type); }

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

// The text model with the image in its prompt: the soft tokens' rows take the encoder's embeddings
// and attend to each other both ways (HF's token_type_ids mask; the sliding window still bounds the
// keys behind a row: extending it too put the logits off by up to 5.7). Against logits.f32, and
// against what ignoring either would give.
TEST_P(Gemma3Vision, LogitsWithTheImageMatchHf) {
  static TempFiles text_files;
  const std::string text_path = (std::filesystem::temp_directory_path() /
                                 ("gemlet-gemma3-text-" + std::to_string(::getpid()) + "-" + GetParam() + ".gguf"))
                                    .string();
  ConvertOptions co;
  co.hf_dir = kDir;
  co.output_path = text_path;
  co.outtype = DType::kF32;
  ASSERT_TRUE(ConvertHfToGguf(co).ok());
  text_files.paths.push_back(text_path);
  auto model = LoadModelFile(text_path);
  ASSERT_TRUE(model.ok()) << model.message();
  ASSERT_TRUE(model.value()->TakesEmbeddings());

  auto encoder = VisionEncoder::Open(Mmproj(DType::kF32));
  ASSERT_TRUE(encoder.ok()) << encoder.message();
  const VisionTowerConfig& c = encoder.value()->config();
  KernelContext ctx(2, kernels_);
  std::vector<float> image(static_cast<size_t>(c.n_tokens() * c.projection_dim));
  ASSERT_TRUE(encoder.value()->Encode(ReadF32(kDir + "/pixel_values.f32").data(), image.data(), ctx).ok());

  std::ifstream in(kDir + "/input_ids.json");
  const nlohmann::json ids_json = nlohmann::json::parse(in);
  const std::vector<int32_t> ids = ids_json["input_ids"].get<std::vector<int32_t>>();
  const int first = ids_json["placeholders"]["image"]["first_position"].get<int>();
  const int count = ids_json["placeholders"]["image"]["count"].get<int>();
  ASSERT_EQ(count, c.n_tokens());
  const int n = static_cast<int>(ids.size());
  std::vector<const float*> rows(static_cast<size_t>(n), nullptr);
  std::vector<int64_t> key_end(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const bool soft = r >= first && r < first + count;
    if (soft) rows[static_cast<size_t>(r)] = image.data() + static_cast<size_t>(r - first) * c.projection_dim;
    key_end[static_cast<size_t>(r)] = soft ? first + count : r + 1;
  }
  const int64_t n_vocab = model.value()->config().n_vocab;
  const auto run = [&](bool with_image, bool two_way) {
    auto cache = KvCache::Create(model.value()->KvLayout(), 64, DType::kF32, 4);
    EXPECT_TRUE(cache.ok());
    Workspace ws(model.value()->config(), 32, 64, 2, model.value()->ExtraScratchFloats(32));
    SequenceChunk chunk{ids.data(), n, cache.value().get()};
    if (with_image) chunk.embeddings = rows.data();
    if (two_way) chunk.key_end = key_end.data();
    std::vector<float> logits(static_cast<size_t>(n * n_vocab));
    EXPECT_TRUE(model.value()->ForwardBatch(std::span(&chunk, 1), ws, ctx, logits.data(), true).ok());
    return logits;
  };
  const std::vector<float> golden = ReadF32(kDir + "/logits.f32");
  const std::vector<float> got = run(true, true);
  const double diff = MaxAbsDiff(got, golden);
  std::printf("[gemma3 image logits, %s] max |diff| %.2e\n", GetParam(), diff);
  EXPECT_LT(diff, 1e-4);
  for (int r = 0; r < n; ++r) {
    const auto row = [&](const std::vector<float>& l) {
      return std::max_element(l.begin() + r * n_vocab, l.begin() + (r + 1) * n_vocab) - (l.begin() + r * n_vocab);
    };
    EXPECT_EQ(row(got), row(golden)) << "row " << r;
  }
  // Without the image, or with the soft tokens causal, the logits move far past the tolerance (the
  // goldens' checks: 29.2 and 22.8).
  EXPECT_GT(MaxAbsDiff(run(false, false), golden), 1.0);
  EXPECT_GT(MaxAbsDiff(run(true, false), golden), 1.0);

  // Model::Forward in chunks: the chunk before the image ends early so that the image's 16 rows go
  // in one (batches of 16: rows 0-5, 6-21, 22-27; of 20: 0-5, 6-25, 26-27), the same logits; an
  // image longer than the batch is refused before anything is evaluated.
  for (int batch : {16, 20, 32}) {
    auto cache = KvCache::Create(model.value()->KvLayout(), 64, DType::kF32, 4);
    ASSERT_TRUE(cache.ok());
    Workspace ws(model.value()->config(), batch, 64, 2, model.value()->ExtraScratchFloats(batch));
    std::vector<float> logits(static_cast<size_t>(n * n_vocab));
    const Status s = model.value()->Forward(ids.data(), n, rows.data(), key_end.data(), *cache.value(), ws, ctx,
                                            logits.data(), true);
    ASSERT_TRUE(s.ok()) << "batch " << batch << ": " << s.message();
    EXPECT_LT(MaxAbsDiff(logits, golden), 1e-4) << "batch " << batch;
  }
  auto cache = KvCache::Create(model.value()->KvLayout(), 64, DType::kF32, 4);
  Workspace small(model.value()->config(), 8, 64, 2, model.value()->ExtraScratchFloats(8));
  const Status too_long = model.value()->Forward(ids.data(), n, rows.data(), key_end.data(), *cache.value(), small, ctx,
                                                 nullptr, false);
  EXPECT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("does not fit a batch of 8"), std::string::npos) << too_long.message();
  EXPECT_EQ(cache.value()->n_past(), 0);
}

TEST(VisionEncoder, RefusesWhatItCannotRun) {
  EXPECT_FALSE(VisionEncoder::Open(kDir + "/config.json").ok());  // not a GGUF
  auto text_model = VisionEncoder::Open(std::string(GEMLET_TESTDATA_DIR) + "/gguf/gemma4_e2b_like.gguf");
  ASSERT_FALSE(text_model.ok());
  EXPECT_NE(text_model.message().find("not an mmproj"), std::string::npos) << text_model.message();
}

// A family whose forward does not place embeddings refuses them rather than ignore the image.
TEST(VisionEncoder, OtherFamiliesRefuseImageRows) {
  auto model = LoadModelFile(std::string(GEMLET_TESTDATA_DIR) + "/gguf/gemma1_2b_like_mqa.gguf");
  ASSERT_TRUE(model.ok()) << model.message();
  auto cache = KvCache::Create(model.value()->KvLayout(), 16, DType::kF32, 4);
  ASSERT_TRUE(cache.ok());
  Workspace ws(model.value()->config(), 4, 16, 1, model.value()->ExtraScratchFloats(4));
  const int32_t tokens[2] = {2, 10};
  const std::vector<float> row(static_cast<size_t>(model.value()->config().d_model), 0.5f);
  const float* rows[2] = {nullptr, row.data()};
  SequenceChunk chunk{tokens, 2, cache.value().get()};
  chunk.embeddings = rows;
  KernelContext ctx(1);
  const Status s = model.value()->ForwardBatch(std::span(&chunk, 1), ws, ctx, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("does not take images"), std::string::npos) << s.message();
  EXPECT_EQ(cache.value()->n_past(), 0);
}

INSTANTIATE_TEST_SUITE_P(Kernels, Gemma3Vision, ::testing::Values("ref", "auto"));

}  // namespace
}  // namespace gemlet
