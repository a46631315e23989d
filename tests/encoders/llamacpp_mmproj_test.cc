// llama.cpp's own mmproj files of the hf-mm models (tests/data/llamacpp-mmproj, written by its
// convert_hf_to_gguf.py --mmproj de3ff81 with transformers 5.17 on the device machine; how: the
// README there) load in gemlet and give the towers' outputs of gemlet's own mmproj and of HF.
// llama.cpp cannot run the tiny text models beside them, so the towers are compared, not the logits.
// Gemma 3n has no file: llama.cpp's converter at de3ff81 cannot write its audio tower (no name for
// the subsampling convolutions' norms) and its clip loader has no gemma3na graph.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "encoders/audio_encoder.h"
#include "encoders/hf_mm_files.h"
#include "encoders/vision_encoder.h"
#include "gguf/gguf_reader.h"
#include "kernels/kernels.h"

namespace gemlet {
namespace {

using hfmm::HfMmDir;
using hfmm::MaxAbsDiff;
using hfmm::ReadF32;

std::string LlamaCppFile(const std::string& model, const std::string& type) {
  return std::string(GEMLET_SOURCE_DIR) + "/tests/data/llamacpp-mmproj/" + model + ".mmproj-" + type + ".gguf";
}

// The image's embeddings (and the tower's output) from HF's own pixels: Gemma 3's square, or
// Gemma 4's patches with their positions.
struct Encoded {
  std::vector<float> embeddings, tower;
};

Encoded EncodeImage(const std::string& mmproj, const std::string& model) {
  Encoded out;
  auto encoder = VisionEncoder::Open(mmproj);
  EXPECT_TRUE(encoder.ok()) << mmproj << ": " << encoder.message();
  if (!encoder.ok()) return out;
  KernelContext ctx(2, KernelsNamed("ref"));
  const std::vector<float> pixels = ReadF32(HfMmDir(model) + "/pixel_values.f32");
  const std::string positions_path = HfMmDir(model) + "/image_position_ids.i32";
  if (std::filesystem::exists(positions_path)) {
    const std::vector<int32_t> positions = hfmm::ReadRaw<int32_t>(positions_path);
    const ImagePatches patches{pixels.data(), positions.data(), static_cast<int>(positions.size() / 2)};
    auto n = encoder.value()->EncodePatches(patches, &out.embeddings, ctx, &out.tower);
    EXPECT_TRUE(n.ok()) << n.message();
  } else {
    const VisionTowerConfig& c = encoder.value()->config();
    out.embeddings.resize(static_cast<size_t>(c.n_tokens() * c.projection_dim));
    EXPECT_TRUE(encoder.value()->Encode(pixels.data(), out.embeddings.data(), ctx, &out.tower).ok());
  }
  return out;
}

Encoded EncodeAudio(const std::string& mmproj, const std::string& model) {
  Encoded out;
  auto encoder = AudioEncoder::Open(mmproj);
  EXPECT_TRUE(encoder.ok()) << mmproj << ": " << encoder.message();
  if (!encoder.ok()) return out;
  KernelContext ctx(2, KernelsNamed("ref"));
  const std::vector<float> features = ReadF32(HfMmDir(model) + "/input_features.f32");
  const std::vector<uint8_t> mask = hfmm::ReadRaw<uint8_t>(HfMmDir(model) + "/input_features_mask.u8");
  auto n = encoder.value()->Encode(features.data(), mask.data(), static_cast<int>(mask.size()), &out.embeddings, ctx,
                                   &out.tower);
  EXPECT_TRUE(n.ok()) << n.message();
  return out;
}

class LlamaCppMmproj : public ::testing::TestWithParam<const char*> {};

// Gemma 4 E2B-like (3x3 pooling, the released models'): the same tensors and keys gemlet reads, so
// the same embeddings as gemlet's own file, and HF's within 1e-4.
TEST(LlamaCppMmprojImage, Gemma4TowerMatchesGemletsFileAndHf) {
  const std::string model = "gemma4_e2b_image_audio";
  const Encoded theirs = EncodeImage(LlamaCppFile(model, "f32"), model);
  const Encoded ours = EncodeImage(hfmm::Mmproj(model, DType::kF32), model);
  const std::vector<float> golden = ReadF32(HfMmDir(model) + "/image_embeds.f32");
  const double vs_ours = MaxAbsDiff(theirs.embeddings, ours.embeddings), vs_hf = MaxAbsDiff(theirs.embeddings, golden);
  const double tower_vs_hf = MaxAbsDiff(theirs.tower, ReadF32(HfMmDir(model) + "/vision_tower_out.f32"));
  std::printf("[llama.cpp mmproj %s image] vs gemlet's file %.2e, vs HF %.2e (tower %.2e)\n", model.c_str(), vs_ours,
              vs_hf, tower_vs_hf);
  EXPECT_LT(vs_ours, 1e-6);
  EXPECT_LT(vs_hf, 1e-4);
  EXPECT_LT(tower_vs_hf, 1e-4);
}

// Gemma 3: llama.cpp keeps the projection matrix F16 even in its F32 files (tensor_force_quant), so
// the tower is HF's within 1e-4 and the embeddings within F16's rounding of one matrix (< 1e-3).
TEST(LlamaCppMmprojImage, Gemma3TowerMatchesHf) {
  const std::string model = "gemma3_image";
  const Encoded theirs = EncodeImage(LlamaCppFile(model, "f32"), model);
  const std::vector<float> golden = ReadF32(HfMmDir(model) + "/image_embeds.f32");
  const double vs_hf = MaxAbsDiff(theirs.embeddings, golden);
  const double tower_vs_hf = MaxAbsDiff(theirs.tower, ReadF32(HfMmDir(model) + "/vision_tower_out.f32"));
  std::printf("[llama.cpp mmproj %s image] vs HF %.2e (tower %.2e)\n", model.c_str(), vs_hf, tower_vs_hf);
  EXPECT_LT(tower_vs_hf, 1e-4);
  EXPECT_LT(vs_hf, 1e-3);
}

// gemma4_bidir_image pools 2x2, but llama.cpp's converter writes no pooling size (its gemma4v graph
// assumes 3, the released models'): its file describes another model, and gemlet reads it as
// llama.cpp would: 3x3 pooling, fewer soft tokens than HF's.
TEST(LlamaCppMmprojImage, Gemma4WithoutPoolingKeyPoolsAsLlamaCpp) {
  const std::string model = "gemma4_bidir_image";
  auto encoder = VisionEncoder::Open(LlamaCppFile(model, "f32"));
  ASSERT_TRUE(encoder.ok()) << encoder.message();
  EXPECT_EQ(encoder.value()->config().pool, 3);
  auto ours = VisionEncoder::Open(hfmm::Mmproj(model, DType::kF32));
  ASSERT_TRUE(ours.ok()) << ours.message();
  EXPECT_EQ(ours.value()->config().pool, 2);
}

// F16 files (the converter's default type): within F16's rounding of HF, as gemlet's F16 files are.
TEST_P(LlamaCppMmproj, F16ImageTowerStaysClose) {
  const std::string model = GetParam();
  const Encoded theirs = EncodeImage(LlamaCppFile(model, "f16"), model);
  const Encoded ours = EncodeImage(hfmm::Mmproj(model, DType::kF16), model);
  const std::vector<float> golden = ReadF32(HfMmDir(model) + "/image_embeds.f32");
  const double vs_hf = MaxAbsDiff(theirs.embeddings, golden), ours_vs_hf = MaxAbsDiff(ours.embeddings, golden);
  std::printf("[llama.cpp mmproj %s image, f16] vs HF %.2e (gemlet's f16 file %.2e)\n", model.c_str(), vs_hf, ours_vs_hf);
  EXPECT_LT(vs_hf, 1e-2);
}

INSTANTIATE_TEST_SUITE_P(HfMm, LlamaCppMmproj, ::testing::Values("gemma3_image", "gemma4_e2b_image_audio"),
                         [](const auto& info) { return std::string(info.param); });

// Gemma 4's audio tower from llama.cpp's file (vision and audio in one file, as its converter writes).
TEST(LlamaCppMmprojAudio, Gemma4AudioTowerMatchesGemletsFileAndHf) {
  const std::string model = "gemma4_e2b_image_audio";
  for (const char* type : {"f32", "f16"}) {
    const Encoded theirs = EncodeAudio(LlamaCppFile(model, type), model);
    const Encoded ours = EncodeAudio(hfmm::Mmproj(model, std::string(type) == "f32" ? DType::kF32 : DType::kF16), model);
    const std::vector<float> golden = ReadF32(HfMmDir(model) + "/audio_embeds.f32");
    const double vs_ours = MaxAbsDiff(theirs.embeddings, ours.embeddings), vs_hf = MaxAbsDiff(theirs.embeddings, golden);
    std::printf("[llama.cpp mmproj %s audio, %s] vs gemlet's file %.2e, vs HF %.2e\n", model.c_str(), type, vs_ours,
                vs_hf);
    // Both writers store softplus(per_dim_scale); made beside torch 2.11 the converter's values are
    // gemlet's bit for bit (torch 1.13's softplus, session 28's files, was one ulp off in 7 of 32).
    EXPECT_EQ(vs_ours, 0.0);
    EXPECT_LT(vs_hf, std::string(type) == "f32" ? 1e-4 : 1e-2);
  }
}

}  // namespace
}  // namespace gemlet
