// Gemma 3n's vision tower (MobileNet-V5 + the vision embedder): a checkpoint in HF's layout with timm's
// tensor names (tests/common/tiny_mnv5.h: the golden's tiny arch at 128 x 128, 16 soft tokens) written
// as an mmproj by `gemlet convert --mmproj-out`'s writer, then run on the reference kernels and the best
// ones. Until transformers' golden exists (hf-mm/gemma3n_image_audio; its test below skips without it),
// the tower's numbers are checked against llama.cpp by hand (bench/media/mnv5_vs_llamacpp.sh, which
// runs Gemma3nVisionLlamaCpp.Export here).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/tiny_mnv5.h"
#include "convert/mmproj.h"
#include "convert/safetensors.h"
#include "encoders/hf_mm_files.h"
#include "encoders/vision_encoder.h"
#include "gguf/gguf_reader.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "media/image.h"
#include "media/image_preprocess.h"

namespace gemlet {
namespace {

using hfmm::MaxAbsDiff;
using hfmm::ReadF32;

struct Built {
  std::string dir;
  std::map<DType, std::string> mmproj;
};

// The checkpoint at this image size (16 soft tokens at 128, llama.cpp's fixed 256 at 768) and its
// mmproj per type, written once per test binary and removed when it exits.
const Built& Tiny(int image_size, DType type = DType::kF32) {
  struct Cache {
    std::map<int, Built> built;
    ~Cache() {
      for (const auto& [size, b] : built) std::filesystem::remove_all(b.dir);
    }
  };
  static Cache cache;
  Built& b = cache.built[image_size];
  if (b.dir.empty()) {
    b.dir = (std::filesystem::temp_directory_path() /
             ("gemlet-mnv5-" + std::to_string(image_size) + "-" + std::to_string(::getpid())))
                .string();
    test::Gemma3nImageCheckpoint spec;
    spec.image_size = image_size;
    spec.soft_tokens = image_size == 768 ? 256 : 16;
    std::string error;
    EXPECT_TRUE(test::WriteGemma3nImageCheckpoint(b.dir, spec, &error)) << error;
  }
  if (b.mmproj.count(type) == 0) {
    const std::string path = b.dir + "/mmproj-" + DTypeName(type) + ".gguf";
    auto checkpoint = SafetensorsCheckpoint::OpenDir(b.dir);
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.message();
    if (checkpoint.ok()) {
      MmprojOptions o;
      o.hf_dir = b.dir;
      o.output_path = path;
      o.outtype = type;
      o.model_name = "tiny-mnv5";
      auto written = WriteMmproj(o, *checkpoint.value());
      EXPECT_TRUE(written.ok()) << written.message();
      if (written.ok()) {
        EXPECT_EQ(written->projector, "gemma3nv, gemma3na");
      }
    }
    b.mmproj[type] = path;
  }
  return b;
}

// [3, s, s] channels first, byte / 255: what the processor makes of an s x s image (no resize).
std::vector<float> Planar(const std::vector<uint8_t>& rgb, int s) {
  std::vector<float> out(static_cast<size_t>(3) * s * s);
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < s * s; ++i) out[static_cast<size_t>(c) * s * s + i] = static_cast<float>(rgb[static_cast<size_t>(i) * 3 + c]) / 255.0f;
  }
  return out;
}

// The writer: llama.cpp's gemma3nv names and shapes (timm blocks double-indexed, the stem bias and layer
// scales as [1, 1, c], convolution kernels as PyTorch keeps them), its fake keys, gemlet's vocab offset;
// the audio tower beside it.
TEST(Gemma3nVisionMmproj, WritesLlamaCppLayout) {
  auto file = GgufFile::Open(Tiny(128).mmproj.at(DType::kF32));
  ASSERT_TRUE(file.ok()) << file.message();
  const GgufFile& f = *file.value();
  EXPECT_EQ(f.GetString("clip.vision.projector_type").value(), "gemma3nv");
  EXPECT_EQ(f.GetString("clip.audio.projector_type").value(), "gemma3na");
  EXPECT_TRUE(f.GetBool("clip.has_vision_encoder").value());
  EXPECT_EQ(f.GetU32("clip.vision.image_size").value(), 128u);
  EXPECT_EQ(f.GetU32("clip.vision.patch_size").value(), 8u);  // 128 / 16 soft tokens
  EXPECT_EQ(f.GetU32("clip.vision.embedding_length").value(), 2048u);
  EXPECT_EQ(f.GetU32("clip.vision.projection_dim").value(), 64u);
  EXPECT_EQ(f.GetU32("clip.vision.vocab_offset").value(), 384u);
  EXPECT_EQ(f.GetF32Array("clip.vision.image_std").value(), std::vector<float>({1.0f, 1.0f, 1.0f}));
  const std::pair<const char*, const char*> shapes[] = {
      {"v.conv_stem.conv.weight", "[3, 3, 3, 8]"},
      {"v.conv_stem.conv.bias", "[1, 1, 8]"},
      {"v.blk.0.0.conv_exp.weight", "[3, 3, 8, 32]"},
      {"v.blk.0.1.bn2.weight", "[8]"},
      {"v.blk.1.0.dw_start.conv.weight", "[3, 3, 1, 8]"},
      {"v.blk.1.0.dw_mid.conv.weight", "[5, 5, 1, 48]"},
      {"v.blk.1.0.layer_scale.gamma", "[1, 1, 16]"},
      {"v.blk.2.3.attn.query.proj.weight", "[1, 1, 24, 16]"},
      {"v.blk.2.3.attn.key.down_conv.weight", "[3, 3, 1, 24]"},
      {"v.blk.2.3.attn.value.proj.weight", "[1, 1, 24, 8]"},
      {"v.blk.3.1.attn.output.proj.weight", "[1, 1, 24, 32]"},
      {"v.msfa.ffn.pw_exp.conv.weight", "[1, 1, 56, 112]"},
      {"v.msfa.ffn.pw_proj.conv.weight", "[1, 1, 112, 2048]"},
      {"mm.embedding.weight", "[2048, 64]"},
      {"mm.input_projection.weight", "[2048, 64]"},
      {"a.blk.0.attn_q.weight", "[32, 32]"},
  };
  for (const auto& [name, shape] : shapes) {
    const GgufTensor* t = f.FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->ShapeString(), shape) << name;
  }
  // MQA blocks without a K/V stride have no downsampling.
  EXPECT_EQ(f.FindTensor("v.blk.3.1.attn.key.down_conv.weight"), nullptr);
  auto encoder = VisionEncoder::Open(Tiny(128).mmproj.at(DType::kF32));
  ASSERT_TRUE(encoder.ok()) << encoder.message();
  const VisionTowerConfig& c = encoder.value()->config();
  EXPECT_EQ(c.projector, VisionProjector::kGemma3n);
  EXPECT_EQ(c.soft_tokens, 16);
  EXPECT_EQ(c.soft_tokens_side, 4);
  EXPECT_EQ(c.vocab_offset, 384);
  EXPECT_FALSE(TextBidirectional(c, 2048));
}

class Gemma3nVision : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    kernels_ = KernelsNamed(GetParam());
    ASSERT_NE(kernels_, nullptr);
    auto encoder = VisionEncoder::Open(Tiny(128).mmproj.at(DType::kF32));
    ASSERT_TRUE(encoder.ok()) << encoder.message();
    encoder_ = std::move(encoder.value());
  }
  std::vector<float> Encode(const std::vector<float>& pixels, std::vector<float>* tower = nullptr) {
    KernelContext ctx(2, kernels_);
    std::vector<float> out(static_cast<size_t>(encoder_->config().soft_tokens * encoder_->config().projection_dim));
    const Status s = encoder_->Encode(pixels.data(), out.data(), ctx, tower);
    EXPECT_TRUE(s.ok()) << s.message();
    return out;
  }

  const KernelTable* kernels_ = nullptr;
  std::unique_ptr<VisionEncoder> encoder_;
};

// The fast kernels against the scalar reference on one thread (for "ref": two threads against one): the
// same tower, every soft token.
TEST_P(Gemma3nVision, MatchesReferenceKernels) {
  const std::vector<float> pixels = Planar(test::TestPicture(128, 128), 128);
  std::vector<float> tower, ref_tower;
  const std::vector<float> got = Encode(pixels, &tower);
  auto ref = VisionEncoder::Open(Tiny(128).mmproj.at(DType::kF32));
  ASSERT_TRUE(ref.ok());
  KernelContext ctx(1, &RefKernels());
  std::vector<float> want(got.size());
  ASSERT_TRUE(ref.value()->Encode(pixels.data(), want.data(), ctx, &ref_tower).ok());
  ASSERT_EQ(tower.size(), 16u * 2048u);
  const double tower_diff = MaxAbsDiff(tower, ref_tower), diff = MaxAbsDiff(got, want);
  std::printf("[gemma3n vision, %s vs ref] tower max |diff| %.2e, embeddings max |diff| %.2e\n", GetParam(), tower_diff,
              diff);
  EXPECT_LT(tower_diff, 1e-3);
  EXPECT_LT(diff, 1e-3);
}

// What the embedder guarantees (its last norm has no weight: every row has RMS 1), and that the
// image matters: another picture, or a flat one, moves every token.
TEST_P(Gemma3nVision, EmbeddingsFollowTheImage) {
  const std::vector<float> a = Encode(Planar(test::TestPicture(128, 128, 0), 128));
  const std::vector<float> b = Encode(Planar(test::TestPicture(128, 128, 1), 128));
  const std::vector<float> flat = Encode(std::vector<float>(3 * 128 * 128, 0.5f));
  const int d = encoder_->config().projection_dim;
  for (int t = 0; t < 16; ++t) {
    double squares = 0;
    for (int i = 0; i < d; ++i) squares += double{a[static_cast<size_t>(t * d + i)]} * a[static_cast<size_t>(t * d + i)];
    EXPECT_NEAR(std::sqrt(squares / d), 1.0, 1e-3) << "token " << t;
  }
  EXPECT_GT(MaxAbsDiff(a, b), 0.1);
  EXPECT_GT(MaxAbsDiff(a, flat), 0.1);
  // Even a flat image's tokens differ over the grid: the convolutions' zero padding marks the borders.
  EXPECT_GT(MaxAbsDiff(std::vector<float>(flat.begin(), flat.begin() + d), std::vector<float>(flat.begin() + 5 * d, flat.begin() + 6 * d)), 1e-4);
}

// The end-of-image marker (the first vision hard token, 384 here) through the embedder's hard path;
// ids outside the vision vocabulary are refused.
TEST_P(Gemma3nVision, EmbedsTheEndOfImageToken) {
  KernelContext ctx(2, kernels_);
  const int d = encoder_->config().projection_dim;
  std::vector<float> eoi(static_cast<size_t>(d)), other(static_cast<size_t>(d));
  ASSERT_TRUE(encoder_->EmbedHardToken(384, eoi.data(), ctx).ok());
  ASSERT_TRUE(encoder_->EmbedHardToken(385, other.data(), ctx).ok());
  EXPECT_GT(MaxAbsDiff(eoi, other), 0.1);
  double squares = 0;
  for (float v : eoi) squares += double{v} * v;
  EXPECT_NEAR(std::sqrt(squares / d), 1.0, 1e-3);
  EXPECT_FALSE(encoder_->EmbedHardToken(383, eoi.data(), ctx).ok());
  EXPECT_FALSE(encoder_->EmbedHardToken(384 + 64, eoi.data(), ctx).ok());
}

// F16 matrices (and depthwise kernels) stay close to F32.
TEST_P(Gemma3nVision, F16MatricesStayClose) {
  const std::vector<float> pixels = Planar(test::TestPicture(128, 128), 128);
  const std::vector<float> f32 = Encode(pixels);
  auto f16 = VisionEncoder::Open(Tiny(128, DType::kF16).mmproj.at(DType::kF16));
  ASSERT_TRUE(f16.ok()) << f16.message();
  KernelContext ctx(2, kernels_);
  std::vector<float> got(f32.size());
  ASSERT_TRUE(f16.value()->Encode(pixels.data(), got.data(), ctx).ok());
  const double diff = MaxAbsDiff(got, f32);
  std::printf("[gemma3n vision f16, %s] embeddings max |diff| vs f32 %.2e\n", GetParam(), diff);
  EXPECT_LT(diff, 5e-2);
}

INSTANTIATE_TEST_SUITE_P(Kernels, Gemma3nVision, ::testing::Values("ref", "auto"));

// transformers' golden (tests/data/hf-mm/gemma3n_image_audio, tools/mm_reference/mm3n_goldens.py on the
// device machine: timm's mobilenetv5_300m_enc at TINY_MNV5): HF's pixels, the tower's output and the
// projected embeddings at the image placeholders.
TEST(Gemma3nVisionGolden, MatchesTransformers) {
  const std::string dir = hfmm::HfMmDir("gemma3n_image_audio");
  if (!std::filesystem::exists(dir + "/vision_tower_out.f32")) {
    GTEST_SKIP() << "no HF golden (" << dir << "): tools/mm_reference/prepare_device.sh makes it";
  }
  auto encoder = VisionEncoder::Open(hfmm::Mmproj("gemma3n_image_audio", DType::kF32));
  ASSERT_TRUE(encoder.ok()) << encoder.message();
  const VisionTowerConfig& c = encoder.value()->config();
  const std::vector<float> pixels = ReadF32(dir + "/pixel_values.f32");  // [1, 3, s, s]
  ASSERT_EQ(pixels.size(), static_cast<size_t>(3 * c.image_size * c.image_size));
  // src/media's preprocessing of image.png against HF's pixels.
  auto image = media::LoadImageFile(dir + "/image.png");
  ASSERT_TRUE(image.ok()) << image.message();
  media::Gemma3ImageParams params;
  params.height = params.width = c.image_size;
  params.scaling.mean = c.mean;
  params.scaling.std = c.std;
  auto ours = media::PreprocessGemma3(image.value(), params);
  ASSERT_TRUE(ours.ok()) << ours.message();
  std::printf("[gemma3n vision golden] pixels max |diff| %.2e\n", MaxAbsDiff(ours.value()[0].values, pixels));
  for (const char* name : {"ref", "auto"}) {
    KernelContext ctx(2, KernelsNamed(name));
    std::vector<float> embeddings(static_cast<size_t>(c.soft_tokens * c.projection_dim)), tower;
    ASSERT_TRUE(encoder.value()->Encode(pixels.data(), embeddings.data(), ctx, &tower).ok());
    // HF's tower output is [1, hidden, side, side]; ours [side * side, hidden].
    const std::vector<float> hf_tower = ReadF32(dir + "/vision_tower_out.f32");
    ASSERT_EQ(hf_tower.size(), tower.size());
    std::vector<float> transposed(tower.size());
    const size_t n = static_cast<size_t>(c.soft_tokens), d = static_cast<size_t>(c.hidden);
    for (size_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < d; ++i) transposed[i * n + t] = tower[t * d + i];
    }
    // Gemma3nModel.get_image_features scales the tower's output by sqrt(hidden) in place, after the
    // golden's hook took it: the golden holds the scaled tensor.
    const float scale = std::sqrt(static_cast<float>(c.hidden));
    for (float& v : transposed) v *= scale;
    const double tower_diff = MaxAbsDiff(transposed, hf_tower);
    const double embeds_diff = MaxAbsDiff(embeddings, ReadF32(dir + "/image_embeds.f32"));
    std::printf("[gemma3n vision golden, %s] tower max |diff| %.2e, embeddings max |diff| %.2e\n", name, tower_diff,
                embeds_diff);
    // The scaled tower reaches 329: float32 rounding of its sums, relative to that.
    double tower_max = 0;
    for (float v : hf_tower) tower_max = std::max(tower_max, std::fabs(static_cast<double>(v)));
    EXPECT_LT(tower_diff, 1e-5 * tower_max);
    EXPECT_LT(embeds_diff, 1e-4);
  }
}

// The llama.cpp cross-check's gemlet half (bench/media/mnv5_vs_llamacpp.sh sets GEMLET_MNV5_XCHECK_DIR):
// the checkpoint at 768 x 768 (llama.cpp's graph hard-codes the 16 x 16 fusion grid), its mmproj,
// a 768 x 768 PNG (no resize in either tool) and its raw bytes, and gemlet's embeddings of it as
// llama.cpp dumps its own: [int32 n_tokens][int32 n_embd][f32 data].
TEST(Gemma3nVisionLlamaCpp, Export) {
  const char* out = std::getenv("GEMLET_MNV5_XCHECK_DIR");
  if (out == nullptr) GTEST_SKIP() << "manual check: run bench/media/mnv5_vs_llamacpp.sh";
  const std::string dir = out;
  std::filesystem::create_directories(dir);
  // GEMLET_MNV5_XCHECK_TYPE=f16: the matrices as llama.cpp's converter writes them by default.
  const char* type_name = std::getenv("GEMLET_MNV5_XCHECK_TYPE");
  const DType type = type_name != nullptr && std::string(type_name) == "f16" ? DType::kF16 : DType::kF32;
  const Built& b = Tiny(768, type);
  std::filesystem::copy_file(b.mmproj.at(type), dir + "/mmproj.gguf", std::filesystem::copy_options::overwrite_existing);
  const std::vector<uint8_t> rgb = test::TestPicture(768, 768);
  const std::vector<uint8_t> png = test::PngRgb(768, 768, rgb);
  std::ofstream(dir + "/image.png", std::ios::binary).write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  std::ofstream(dir + "/image.rgb", std::ios::binary).write(reinterpret_cast<const char*>(rgb.data()), static_cast<std::streamsize>(rgb.size()));
  auto encoder = VisionEncoder::Open(dir + "/mmproj.gguf");
  ASSERT_TRUE(encoder.ok()) << encoder.message();
  const VisionTowerConfig& c = encoder.value()->config();
  ASSERT_EQ(c.soft_tokens, 256);
  // The PNG through src/media, as the engine reads it: no resize at 768, so byte / 255.
  auto image = media::LoadImageFile(dir + "/image.png");
  ASSERT_TRUE(image.ok()) << image.message();
  media::Gemma3ImageParams params;
  params.height = params.width = c.image_size;
  params.scaling.mean = c.mean;
  params.scaling.std = c.std;
  auto pixels = media::PreprocessGemma3(image.value(), params);
  ASSERT_TRUE(pixels.ok()) << pixels.message();
  EXPECT_EQ(MaxAbsDiff(pixels.value()[0].values, Planar(rgb, 768)), 0.0);
  for (const char* name : {"ref", "auto"}) {
    KernelContext ctx(4, KernelsNamed(name));
    std::vector<float> embeddings(static_cast<size_t>(c.soft_tokens * c.projection_dim));
    ASSERT_TRUE(encoder.value()->Encode(pixels.value()[0].values.data(), embeddings.data(), ctx).ok());
    std::ofstream f(dir + "/gemlet-" + name + ".bin", std::ios::binary);
    const int32_t header[2] = {c.soft_tokens, c.projection_dim};
    f.write(reinterpret_cast<const char*>(header), sizeof header);
    f.write(reinterpret_cast<const char*>(embeddings.data()), static_cast<std::streamsize>(embeddings.size() * sizeof(float)));
  }
}

}  // namespace
}  // namespace gemlet
