// Gemma 4's audio tower (shared/testdata/hf-mm/gemma4_e2b_image_audio: USM conformer, chunked local
// attention 12/13, clipped linears) written as an mmproj by `gemlet convert --mmproj-out`'s writer,
// in one file with the vision tower.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/safetensors.h"
#include "encoders/hf_mm_files.h"
#include "encoders/vision_encoder.h"
#include "gguf/gguf_reader.h"

namespace gemlet {
namespace {

using hfmm::HfMmDir;

const std::string kModel = "gemma4_e2b_image_audio";

// The writer: llama.cpp's keys and names beside the vision tower's, plus what gemlet's reader needs
// that llama.cpp hard-codes; per_dim_scale stored softplus'ed, the depthwise kernel without its
// middle axis.
TEST(Gemma4AudioMmproj, WritesLlamaCppLayout) {
  auto file = GgufFile::Open(hfmm::Mmproj(kModel, DType::kF32));
  ASSERT_TRUE(file.ok()) << file.message();
  const GgufFile& f = *file.value();
  EXPECT_EQ(f.GetString("clip.vision.projector_type").value(), "gemma4v");
  EXPECT_EQ(f.GetString("clip.audio.projector_type").value(), "gemma4a");
  EXPECT_TRUE(f.GetBool("clip.has_vision_encoder").value());
  EXPECT_TRUE(f.GetBool("clip.has_audio_encoder").value());
  EXPECT_EQ(f.GetU32("clip.audio.embedding_length").value(), 32u);
  EXPECT_EQ(f.GetU32("clip.audio.feed_forward_length").value(), 128u);
  EXPECT_EQ(f.GetU32("clip.audio.block_count").value(), 2u);
  EXPECT_EQ(f.GetU32("clip.audio.attention.head_count").value(), 2u);
  EXPECT_EQ(f.GetU32("clip.audio.projection_dim").value(), 64u);
  EXPECT_EQ(f.GetU32("clip.audio.num_mel_bins").value(), 32u);
  EXPECT_EQ(f.GetU32("clip.audio.chunk_size").value(), 12u);
  EXPECT_EQ(f.GetU32("clip.audio.attention.context_left").value(), 13u);
  EXPECT_EQ(f.GetU32("clip.audio.attention.context_right").value(), 0u);
  EXPECT_EQ(f.GetF32("clip.audio.attention.logit_softcapping").value(), 50.0f);
  EXPECT_EQ(f.GetU32("clip.audio.conv_kernel_size").value(), 5u);
  EXPECT_EQ(f.GetF32("clip.audio.residual_weight").value(), 0.5f);
  const std::pair<const char*, const char*> shapes[] = {
      {"a.conv1d.0.weight", "[3, 3, 1, 32]"},        {"a.conv1d.1.weight", "[3, 3, 32, 8]"},
      {"a.conv1d.1.norm.weight", "[8]"},             {"a.input_projection.weight", "[64, 32]"},
      {"a.blk.1.ffn_up.weight", "[32, 128]"},        {"a.blk.1.ffn_down_1.weight", "[128, 32]"},
      {"a.blk.0.attn_k_rel.weight", "[32, 32]"},     {"a.blk.0.per_dim_scale.weight", "[16]"},
      {"a.blk.0.conv_dw.weight", "[5, 32]"},         {"a.blk.0.conv_pw1.weight", "[32, 64]"},
      {"a.blk.0.conv_pw1.output_max", "[1]"},        {"a.blk.1.norm_conv.weight", "[32]"},
      {"a.blk.1.ln2.weight", "[32]"},                {"a.pre_encode.out.weight", "[32, 48]"},
      {"a.pre_encode.out.bias", "[48]"},             {"mm.a.input_projection.weight", "[48, 64]"},
  };
  for (const auto& [name, shape] : shapes) {
    const GgufTensor* t = f.FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->ShapeString(), shape) << name;
  }
  auto checkpoint = SafetensorsCheckpoint::OpenDir(HfMmDir(kModel));
  ASSERT_TRUE(checkpoint.ok());
  const StTensor* raw = checkpoint.value()->Find("model.audio_tower.layers.1.self_attn.per_dim_scale");
  ASSERT_NE(raw, nullptr);
  std::vector<float> w(16);
  raw->ReadRowF32(0, w.data());
  const float* stored = reinterpret_cast<const float*>(f.FindTensor("a.blk.1.per_dim_scale.weight")->data);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(stored[i], std::log1p(std::exp(w[static_cast<size_t>(i)])), 1e-6) << i;
  // The vision tower in the same file still opens (it reads v.* and mm.* only).
  EXPECT_TRUE(VisionEncoder::Open(hfmm::Mmproj(kModel, DType::kF32)).ok());
}

}  // namespace
}  // namespace gemlet
