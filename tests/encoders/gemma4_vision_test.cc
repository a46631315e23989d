// Gemma 4's vision tower against transformers 5.17 (shared/testdata/hf-mm: gemma4_e2b_image_audio,
// clipped linears and 3x3 pooling; gemma4_bidir_image, 2x2 pooling and standardisation): the
// checkpoint written as an mmproj by `gemlet convert --mmproj-out`'s writer, then HF's own patches
// through the tower and the embedder, and the image file through src/media first; and the text model
// with the image in its prompt. On the reference kernels and the best ones this CPU runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "convert/safetensors.h"
#include "encoders/hf_mm_files.h"
#include "encoders/vision_encoder.h"
#include "gguf/gguf_reader.h"
#include "kernels/kernels.h"
#include "media/image.h"
#include "media/image_preprocess.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace gemlet {
namespace {

using hfmm::HfMmDir;
using hfmm::MaxAbsDiff;
using hfmm::ReadF32;

// HF's patches of the image (pixel_values.f32, image_position_ids.i32).
struct HfPatches {
  std::vector<float> values;
  std::vector<int32_t> positions;
  ImagePatches View() const { return {values.data(), positions.data(), static_cast<int>(positions.size() / 2)}; }
};

HfPatches ReadPatches(const std::string& model) {
  return {ReadF32(HfMmDir(model) + "/pixel_values.f32"), hfmm::ReadRaw<int32_t>(HfMmDir(model) + "/image_position_ids.i32")};
}

nlohmann::json InputIds(const std::string& model) {
  std::ifstream in(HfMmDir(model) + "/input_ids.json");
  return nlohmann::json::parse(in);
}

// The writer: llama.cpp's keys and names, plus what gemlet's reader needs that llama.cpp leaves out;
// the patch Linear re-ordered into the conv kernel llama.cpp convolves with.
TEST(Gemma4VisionMmproj, WritesLlamaCppLayout) {
  for (const std::string model : {"gemma4_e2b_image_audio", "gemma4_bidir_image"}) {
    SCOPED_TRACE(model);
    auto file = GgufFile::Open(hfmm::Mmproj(model, DType::kF32));
    ASSERT_TRUE(file.ok()) << file.message();
    const GgufFile& f = *file.value();
    EXPECT_EQ(f.GetString("clip.vision.projector_type").value(), "gemma4v");
    EXPECT_FALSE(f.Has("clip.projector_type"));
    const bool e2b = model == "gemma4_e2b_image_audio";
    const int64_t d = e2b ? 32 : 48, p = e2b ? 4 : 6;
    EXPECT_EQ(f.GetU32("clip.vision.projector.scale_factor").value(), e2b ? 3u : 2u);
    EXPECT_EQ(f.GetU32("clip.vision.max_soft_tokens").value(), 70u);
    const GgufTensor* patch = f.FindTensor("v.patch_embd.weight");
    ASSERT_NE(patch, nullptr);
    EXPECT_EQ(patch->ShapeString(), "[" + std::to_string(p) + ", " + std::to_string(p) + ", 3, " + std::to_string(d) + "]");
    EXPECT_EQ(f.FindTensor("v.position_embd.weight")->ShapeString(), "[" + std::to_string(d) + ", 64, 2]");
    EXPECT_EQ(f.FindTensor("mm.input_projection.weight")->ShapeString(), "[" + std::to_string(d) + ", 64]");
    EXPECT_EQ(f.FindTensor("v.blk.1.attn_q_norm.weight")->ShapeString(), "[16]");
    EXPECT_EQ(f.FindTensor("v.std_bias") != nullptr, !e2b);
    const GgufTensor* bound = f.FindTensor("v.blk.1.ffn_down.output_max");
    ASSERT_EQ(bound != nullptr, e2b);
    if (e2b) {
      EXPECT_EQ(bound->ShapeString(), "[1]");
    }
    // Kernel value (out o, channel ch, row y, column x) = HF weight (o, (y * p + x) * 3 + ch).
    auto checkpoint = SafetensorsCheckpoint::OpenDir(HfMmDir(model));
    ASSERT_TRUE(checkpoint.ok());
    const StTensor* hf = checkpoint.value()->Find("model.vision_tower.patch_embedder.input_proj.weight");
    ASSERT_NE(hf, nullptr);
    std::vector<float> row(static_cast<size_t>(3 * p * p));
    const float* kernel = reinterpret_cast<const float*>(patch->data);
    int mismatches = 0;
    for (int64_t o = 0; o < d; ++o) {
      hf->ReadRowF32(o, row.data());
      for (int64_t ch = 0; ch < 3; ++ch) {
        for (int64_t y = 0; y < p; ++y) {
          for (int64_t x = 0; x < p; ++x) {
            mismatches += kernel[((o * 3 + ch) * p + y) * p + x] != row[static_cast<size_t>((y * p + x) * 3 + ch)];
          }
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

class Gemma4Vision : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {
 protected:
  void SetUp() override {
    model_ = std::get<0>(GetParam());
    kernels_ = KernelsNamed(std::get<1>(GetParam()));
    ASSERT_NE(kernels_, nullptr);
    auto encoder = VisionEncoder::Open(hfmm::Mmproj(model_, DType::kF32));
    ASSERT_TRUE(encoder.ok()) << encoder.message();
    encoder_ = std::move(encoder.value());
  }
  std::string Label() const { return model_ + ", " + std::get<1>(GetParam()); }

  std::string model_;
  const KernelTable* kernels_ = nullptr;
  std::unique_ptr<VisionEncoder> encoder_;
};

TEST_P(Gemma4Vision, HfPatchesGiveHfEmbeddings) {
  const VisionTowerConfig& c = encoder_->config();
  EXPECT_EQ(c.projector, VisionProjector::kGemma4);
  const HfPatches patches = ReadPatches(model_);
  KernelContext ctx(2, kernels_);
  std::vector<float> embeddings, tower;
  auto n = encoder_->EncodePatches(patches.View(), &embeddings, ctx, &tower);
  ASSERT_TRUE(n.ok()) << n.message();
  EXPECT_EQ(n.value(), InputIds(model_)["placeholders"]["image"]["count"].get<int>());
  const double tower_diff = MaxAbsDiff(tower, ReadF32(HfMmDir(model_) + "/vision_tower_out.f32"));
  const std::vector<float> golden = ReadF32(HfMmDir(model_) + "/image_embeds.f32");
  const double embeds_diff = MaxAbsDiff(embeddings, golden);
  std::printf("[gemma4 vision, %s] tower max |diff| %.2e, embeddings max |diff| %.2e\n", Label().c_str(), tower_diff,
              embeds_diff);
  EXPECT_LT(tower_diff, 1e-4);
  EXPECT_LT(embeds_diff, 1e-4);

  // A blank image (its patches all 0, positions kept) gives embeddings far from the golden.
  HfPatches blank = patches;
  std::fill(blank.values.begin(), blank.values.end(), 0.0f);
  std::vector<float> blank_embeddings;
  ASSERT_TRUE(encoder_->EncodePatches(blank.View(), &blank_embeddings, ctx).ok());
  EXPECT_GT(MaxAbsDiff(blank_embeddings, golden), 0.1);
}

// F16 matrices and patch kernel (llama.cpp's converter's default): within F16's rounding of HF.
TEST_P(Gemma4Vision, F16MatricesStayClose) {
  auto encoder = VisionEncoder::Open(hfmm::Mmproj(model_, DType::kF16));
  ASSERT_TRUE(encoder.ok()) << encoder.message();
  KernelContext ctx(2, kernels_);
  std::vector<float> embeddings;
  ASSERT_TRUE(encoder.value()->EncodePatches(ReadPatches(model_).View(), &embeddings, ctx).ok());
  const double diff = MaxAbsDiff(embeddings, ReadF32(HfMmDir(model_) + "/image_embeds.f32"));
  std::printf("[gemma4 vision f16, %s] embeddings max |diff| %.2e\n", Label().c_str(), diff);
  EXPECT_LT(diff, 1e-2);
}

// Q8_0 matrices (`--mmproj-type q8_0`, as llama.cpp's converter writes q8_0 mmproj files): the
// tower reads them through the kernels' Q8_0 path; rows that are not whole blocks stay F16.
TEST_P(Gemma4Vision, Q8_0MatricesStayClose) {
  const std::string path = hfmm::Mmproj(model_, DType::kQ8_0);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  int q8 = 0;
  for (const GgufTensor& t : file.value()->tensors()) q8 += t.type == DType::kQ8_0;
  EXPECT_GT(q8, 0);
  auto encoder = VisionEncoder::Open(path);
  ASSERT_TRUE(encoder.ok()) << encoder.message();
  KernelContext ctx(2, kernels_);
  std::vector<float> embeddings;
  ASSERT_TRUE(encoder.value()->EncodePatches(ReadPatches(model_).View(), &embeddings, ctx).ok());
  const std::vector<float> golden = ReadF32(HfMmDir(model_) + "/image_embeds.f32");
  const double diff = MaxAbsDiff(embeddings, golden);
  double range = 0;
  for (float v : golden) range = std::max(range, std::fabs(double{v}));
  std::printf("[gemma4 vision q8_0, %s] %d Q8_0 matrices, embeddings max |diff| %.2e (%.1f%% of their range)\n",
              Label().c_str(), q8, diff, 100 * diff / range);
  // Q8_0 rounds each weight to 1/127 of its block's largest, and the fast kernels round the
  // activations to 8 bits too: about 2% of the embeddings' range here (F16: 0.1%).
  EXPECT_LT(diff, 0.03 * range);
}

// End to end from the PNG: src/media's preprocessing (bit-exact to HF's, tested there) with the
// budget and geometry the mmproj carries, then the tower.
TEST_P(Gemma4Vision, ImageFileGivesHfEmbeddings) {
  const VisionTowerConfig& c = encoder_->config();
  auto image = media::LoadImageFile(HfMmDir(model_) + "/image.png", media::ImageLimits{});
  ASSERT_TRUE(image.ok()) << image.message();
  media::Gemma4ImageParams params;
  params.patch_size = c.patch_size;
  params.pooling_kernel_size = c.pool;
  params.max_soft_tokens = c.max_soft_tokens;
  auto pixels = media::PreprocessGemma4(image.value(), params);
  ASSERT_TRUE(pixels.ok()) << pixels.message();
  KernelContext ctx(2, kernels_);
  std::vector<float> embeddings;
  auto n = encoder_->EncodePatches({pixels.value().pixel_values.data(), pixels.value().position_ids.data(),
                                    pixels.value().max_patches},
                                   &embeddings, ctx);
  ASSERT_TRUE(n.ok()) << n.message();
  EXPECT_EQ(n.value(), pixels.value().num_soft_tokens);
  const double diff = MaxAbsDiff(embeddings, ReadF32(HfMmDir(model_) + "/image_embeds.f32"));
  std::printf("[gemma4 vision from image.png, %s] embeddings max |diff| %.2e\n", Label().c_str(), diff);
  EXPECT_LT(diff, 1e-4);
}

// The text model with the image in its prompt: the image's rows take the encoder's embeddings (their
// placeholder ids read as pad for the per-layer inputs, as HF replaces them), and with
// use_bidirectional_attention = "vision" they attend to their whole image. Against logits.f32 and
// against what ignoring the image, or its two-way block, would give. gemma4_e2b_image_audio has an
// audio clip after the image: here its rows from the first audio placeholder on are not compared
// (causal model: the rows before it do not see the audio); gemma4_audio_test places both.
TEST_P(Gemma4Vision, LogitsWithTheImageMatchHf) {
  static hfmm::TempFiles text_files;
  const std::string text_path = hfmm::TempPath(model_ + "-text-" + std::get<1>(GetParam()));
  ConvertOptions co;
  co.hf_dir = HfMmDir(model_);
  co.output_path = text_path;
  co.outtype = DType::kF32;
  ASSERT_TRUE(ConvertHfToGguf(co).ok());
  text_files.paths.push_back(text_path);
  auto model = LoadModelFile(text_path);
  ASSERT_TRUE(model.ok()) << model.message();
  ASSERT_TRUE(model.value()->TakesEmbeddings());

  const VisionTowerConfig& c = encoder_->config();
  KernelContext ctx(2, kernels_);
  std::vector<float> image;
  ASSERT_TRUE(encoder_->EncodePatches(ReadPatches(model_).View(), &image, ctx).ok());

  const nlohmann::json ids_json = InputIds(model_);
  const std::vector<int32_t> ids = ids_json["input_ids"].get<std::vector<int32_t>>();
  const int n = static_cast<int>(ids.size());
  const int first = ids_json["placeholders"]["image"]["first_position"].get<int>();
  const int count = ids_json["placeholders"]["image"]["count"].get<int>();
  ASSERT_EQ(image.size(), static_cast<size_t>(count * c.projection_dim));
  // (const json's operator[] on a missing key is undefined: the image-only model has no audio entry)
  const nlohmann::json& placeholders = ids_json.at("placeholders");
  const int compared = placeholders.contains("audio") ? placeholders.at("audio").at("first_position").get<int>() : n;
  std::ifstream config_in(HfMmDir(model_) + "/config.json");
  const nlohmann::json text_config = nlohmann::json::parse(config_in)["text_config"];
  const bool two_way_image = text_config.value("use_bidirectional_attention", nlohmann::json()) == "vision";

  std::vector<const float*> rows(static_cast<size_t>(n), nullptr);
  std::vector<int64_t> key_end(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const bool soft = r >= first && r < first + count;
    if (soft) rows[static_cast<size_t>(r)] = image.data() + static_cast<size_t>(r - first) * c.projection_dim;
    key_end[static_cast<size_t>(r)] = soft && two_way_image ? first + count : r + 1;
  }
  const int64_t n_vocab = model.value()->config().n_vocab;
  const auto run = [&](bool with_image, bool two_way) {
    auto cache = KvCache::Create(model.value()->KvLayout(), 128, DType::kF32, 4);
    EXPECT_TRUE(cache.ok());
    Workspace ws(model.value()->config(), 128, 128, 2, model.value()->ExtraScratchFloats(128));
    SequenceChunk chunk{ids.data(), n, cache.value().get()};
    if (with_image) chunk.embeddings = rows.data();
    if (two_way) chunk.key_end = key_end.data();
    std::vector<float> logits(static_cast<size_t>(n * n_vocab));
    EXPECT_TRUE(model.value()->ForwardBatch(std::span(&chunk, 1), ws, ctx, logits.data(), true).ok());
    logits.resize(static_cast<size_t>(compared * n_vocab));
    return logits;
  };
  std::vector<float> golden = ReadF32(HfMmDir(model_) + "/logits.f32");
  golden.resize(static_cast<size_t>(compared * n_vocab));
  const std::vector<float> got = run(true, true);
  const double diff = MaxAbsDiff(got, golden);
  std::printf("[gemma4 image logits, %s] rows 0..%d of %d: max |diff| %.2e\n", Label().c_str(), compared - 1, n, diff);
  EXPECT_LT(diff, 1e-4);
  for (int r = 0; r < compared; ++r) {
    const auto row = [&](const std::vector<float>& l) {
      return std::max_element(l.begin() + r * n_vocab, l.begin() + (r + 1) * n_vocab) - (l.begin() + r * n_vocab);
    };
    EXPECT_EQ(row(got), row(golden)) << "row " << r;
  }
  // Without the image the logits move far past the tolerance (the goldens' drop_image checks: 29.2
  // and 28.1), and so does the bidirectional model with a causal image (no_token_types: 25.8).
  EXPECT_GT(MaxAbsDiff(run(false, false), golden), 1.0);
  if (two_way_image) {
    EXPECT_GT(MaxAbsDiff(run(true, false), golden), 1.0);
  }
}

// Each of Gemma 3's and Gemma 4's towers refuses the other's input form.
TEST(Gemma4VisionInput, TowersRefuseTheOtherInputForm) {
  auto gemma4 = VisionEncoder::Open(hfmm::Mmproj("gemma4_bidir_image", DType::kF32));
  ASSERT_TRUE(gemma4.ok()) << gemma4.message();
  KernelContext ctx(1);
  std::vector<float> pixels(3 * 64 * 64), out(16 * 64);
  EXPECT_FALSE(gemma4.value()->Encode(pixels.data(), out.data(), ctx).ok());
  // Padding only, and a patch outside the position tables.
  const HfPatches patches = ReadPatches("gemma4_bidir_image");
  HfPatches padding = patches;
  std::fill(padding.positions.begin(), padding.positions.end(), -1);
  EXPECT_FALSE(gemma4.value()->EncodePatches(padding.View(), &out, ctx).ok());
  HfPatches outside = patches;
  outside.positions[0] = 64;
  EXPECT_FALSE(outside.positions.empty() || gemma4.value()->EncodePatches(outside.View(), &out, ctx).ok());
}

INSTANTIATE_TEST_SUITE_P(Kernels, Gemma4Vision,
                         ::testing::Combine(::testing::Values("gemma4_e2b_image_audio", "gemma4_bidir_image"),
                                            ::testing::Values("ref", "auto")),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace gemlet
