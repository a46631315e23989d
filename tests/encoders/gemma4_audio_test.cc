// Gemma 4's audio tower against transformers 5.17 (shared/testdata/hf-mm/gemma4_e2b_image_audio:
// USM conformer, chunked local attention 12/13, clipped linears): the checkpoint written as an mmproj
// by `gemlet convert --mmproj-out`'s writer (audio and vision in one file), then HF's own features
// through the tower and the embedder, and audio.wav through src/media first; and the text model
// with the image and the audio in its prompt. On the reference kernels and the best ones this CPU runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/convert.h"
#include "convert/safetensors.h"
#include "encoders/audio_encoder.h"
#include "encoders/hf_mm_files.h"
#include "encoders/vision_encoder.h"
#include "gguf/gguf_reader.h"
#include "kernels/kernels.h"
#include "media/audio.h"
#include "media/audio_features.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace gemlet {
namespace {

using hfmm::HfMmDir;
using hfmm::MaxAbsDiff;
using hfmm::ReadF32;

const std::string kModel = "gemma4_e2b_image_audio";

// HF's features of audio.wav (input_features.f32, input_features_mask.u8).
struct HfFeatures {
  std::vector<float> values;
  std::vector<uint8_t> mask;
  int frames() const { return static_cast<int>(mask.size()); }
};

HfFeatures ReadFeatures(const std::string& model) {
  return {ReadF32(HfMmDir(model) + "/input_features.f32"), hfmm::ReadRaw<uint8_t>(HfMmDir(model) + "/input_features_mask.u8")};
}

nlohmann::json InputIds(const std::string& model) {
  std::ifstream in(HfMmDir(model) + "/input_ids.json");
  return nlohmann::json::parse(in);
}

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

// A file without an audio tower, and features of the wrong shape, are refused with one line each.
TEST(Gemma4AudioMmproj, RefusesWhatItCannotEncode) {
  auto none = AudioEncoder::Open(hfmm::Mmproj("gemma4_bidir_image", DType::kF32));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("no audio tower"), std::string::npos) << none.message();
  auto encoder = AudioEncoder::Open(hfmm::Mmproj(kModel, DType::kF32));
  ASSERT_TRUE(encoder.ok()) << encoder.message();
  KernelContext ctx(1);
  std::vector<float> out;
  EXPECT_FALSE(encoder.value()->Encode(nullptr, nullptr, 10, &out, ctx).ok());
  const std::vector<float> features(32 * 8, 1.0f);
  EXPECT_FALSE(encoder.value()->Encode(features.data(), nullptr, 0, &out, ctx).ok());
  const std::vector<uint8_t> padding(8, 0);
  EXPECT_FALSE(encoder.value()->Encode(features.data(), padding.data(), 8, &out, ctx).ok());
}

class Gemma4Audio : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    kernels_ = KernelsNamed(GetParam());
    ASSERT_NE(kernels_, nullptr);
    auto encoder = AudioEncoder::Open(hfmm::Mmproj(kModel, DType::kF32));
    ASSERT_TRUE(encoder.ok()) << encoder.message();
    encoder_ = std::move(encoder.value());
  }

  const KernelTable* kernels_ = nullptr;
  std::unique_ptr<AudioEncoder> encoder_;
};

TEST_P(Gemma4Audio, HfFeaturesGiveHfEmbeddings) {
  const AudioTowerConfig& c = encoder_->config();
  EXPECT_EQ(c.projector, AudioProjector::kGemma4);
  const HfFeatures features = ReadFeatures(kModel);
  ASSERT_EQ(features.values.size(), static_cast<size_t>(features.frames() * c.n_mels));
  KernelContext ctx(2, kernels_);
  std::vector<float> embeddings, tower;
  auto n = encoder_->Encode(features.values.data(), features.mask.data(), features.frames(), &embeddings, ctx, &tower);
  ASSERT_TRUE(n.ok()) << n.message();
  EXPECT_EQ(n.value(), InputIds(kModel)["placeholders"]["audio"]["count"].get<int>());
  const double tower_diff = MaxAbsDiff(tower, ReadF32(HfMmDir(kModel) + "/audio_tower_out.f32"));
  const std::vector<float> golden = ReadF32(HfMmDir(kModel) + "/audio_embeds.f32");
  const double embeds_diff = MaxAbsDiff(embeddings, golden);
  std::printf("[gemma4 audio, %s] tower max |diff| %.2e, embeddings max |diff| %.2e\n", GetParam(), tower_diff,
              embeds_diff);
  EXPECT_LT(tower_diff, 1e-4);
  EXPECT_LT(embeds_diff, 1e-4);

  // Zeroed features (mask kept) give embeddings far from the golden.
  std::vector<float> zeros(features.values.size(), 0.0f), zero_embeddings;
  ASSERT_TRUE(encoder_->Encode(zeros.data(), features.mask.data(), features.frames(), &zero_embeddings, ctx).ok());
  EXPECT_GT(MaxAbsDiff(zero_embeddings, golden), 0.1);
}

// With the model's own window (llama.cpp's rule), frames the mask marks as padding take no part:
// the clip with 37 more frames of noise behind it, masked, gives the same soft tokens (zeroed
// before each convolution, hidden as keys; the attention and the light convolution look only back).
// HF's eager rule is another computation: its embeddings are far from these.
TEST_P(Gemma4Audio, LocalWindowIgnoresPaddingFrames) {
  AudioEncoderOptions options;
  options.attention_mask = AudioAttentionMask::kLocalWindow;
  auto local = AudioEncoder::Open(hfmm::Mmproj(kModel, DType::kF32), options);
  ASSERT_TRUE(local.ok()) << local.message();
  EXPECT_EQ(local.value()->config().attention_mask, AudioAttentionMask::kLocalWindow);
  const HfFeatures features = ReadFeatures(kModel);
  const int mels = local.value()->config().n_mels, extra = 37;
  HfFeatures padded = features;
  for (int i = 0; i < extra * mels; ++i) padded.values.push_back(std::sin(0.37f * static_cast<float>(i)) * 9.0f);
  padded.mask.resize(padded.mask.size() + extra, 0);
  KernelContext ctx(2, kernels_);
  std::vector<float> plain, with_padding, tower, eager;
  auto n = local.value()->Encode(features.values.data(), features.mask.data(), features.frames(), &plain, ctx);
  auto m = local.value()->Encode(padded.values.data(), padded.mask.data(), padded.frames(), &with_padding, ctx, &tower);
  ASSERT_TRUE(n.ok() && m.ok());
  EXPECT_EQ(m.value(), n.value());
  EXPECT_EQ(tower.size(), static_cast<size_t>(AudioTowerConfig::SubsampledFrames(padded.frames()) * 48));
  EXPECT_LT(MaxAbsDiff(with_padding, plain), 1e-5);
  ASSERT_TRUE(encoder_->Encode(features.values.data(), features.mask.data(), features.frames(), &eager, ctx).ok());
  const double apart = MaxAbsDiff(plain, eager);
  std::printf("[gemma4 audio, %s] local window vs HF eager rule: embeddings max |diff| %.2e\n", GetParam(), apart);
  EXPECT_GT(apart, 0.1);
}

// F16 matrices (llama.cpp's converter's default; the convolutions stay F32): within F16's rounding.
TEST_P(Gemma4Audio, F16MatricesStayClose) {
  auto encoder = AudioEncoder::Open(hfmm::Mmproj(kModel, DType::kF16));
  ASSERT_TRUE(encoder.ok()) << encoder.message();
  const HfFeatures features = ReadFeatures(kModel);
  KernelContext ctx(2, kernels_);
  std::vector<float> embeddings;
  ASSERT_TRUE(encoder.value()->Encode(features.values.data(), features.mask.data(), features.frames(), &embeddings, ctx).ok());
  const double diff = MaxAbsDiff(embeddings, ReadF32(HfMmDir(kModel) + "/audio_embeds.f32"));
  std::printf("[gemma4 audio f16, %s] embeddings max |diff| %.2e\n", GetParam(), diff);
  EXPECT_LT(diff, 1e-2);
}

// End to end from the WAV: src/media's decoding and log-mel features (within 1e-4 of HF's, tested
// there) with the folder's extractor config, then the tower.
TEST_P(Gemma4Audio, AudioFileGivesHfEmbeddings) {
  std::ifstream config(HfMmDir(kModel) + "/feature_extractor_config.json");
  const std::string text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  auto params = media::LogMelParamsFromHfJson(text);
  ASSERT_TRUE(params.ok()) << params.message();
  auto audio = media::LoadAudioFile(HfMmDir(kModel) + "/audio.wav");
  ASSERT_TRUE(audio.ok()) << audio.message();
  auto features = media::ComputeLogMel(audio.value(), params.value());
  ASSERT_TRUE(features.ok()) << features.message();
  ASSERT_EQ(features.value().num_mels, encoder_->config().n_mels);
  KernelContext ctx(2, kernels_);
  std::vector<float> embeddings;
  auto n = encoder_->Encode(features.value().values.data(), features.value().mask.data(), features.value().num_frames,
                            &embeddings, ctx);
  ASSERT_TRUE(n.ok()) << n.message();
  EXPECT_EQ(n.value(), InputIds(kModel)["placeholders"]["audio"]["count"].get<int>());
  const double diff = MaxAbsDiff(embeddings, ReadF32(HfMmDir(kModel) + "/audio_embeds.f32"));
  std::printf("[gemma4 audio from audio.wav, %s] embeddings max |diff| %.2e\n", GetParam(), diff);
  EXPECT_LT(diff, 1e-3);
}

// The text model with the image and the audio in its prompt: each placeholder row takes its
// encoder's embedding (the ids read as pad for the per-layer inputs, as HF replaces them); the
// on-device model is causal everywhere, audio included. Every row of logits.f32, against it and
// against what zeroed or missing audio gives (the goldens' zero_audio / drop_audio: 19.4 / 23.8).
TEST_P(Gemma4Audio, LogitsWithImageAndAudioMatchHf) {
  static hfmm::TempFiles text_files;
  const std::string text_path = hfmm::TempPath(kModel + "-audio-text-" + GetParam());
  ConvertOptions co;
  co.hf_dir = HfMmDir(kModel);
  co.output_path = text_path;
  co.outtype = DType::kF32;
  ASSERT_TRUE(ConvertHfToGguf(co).ok());
  text_files.paths.push_back(text_path);
  auto model = LoadModelFile(text_path);
  ASSERT_TRUE(model.ok()) << model.message();
  auto vision = VisionEncoder::Open(hfmm::Mmproj(kModel, DType::kF32));
  ASSERT_TRUE(vision.ok()) << vision.message();

  KernelContext ctx(2, kernels_);
  const std::vector<float> pixels = ReadF32(HfMmDir(kModel) + "/pixel_values.f32");
  const std::vector<int32_t> positions = hfmm::ReadRaw<int32_t>(HfMmDir(kModel) + "/image_position_ids.i32");
  std::vector<float> image;
  ASSERT_TRUE(vision.value()->EncodePatches({pixels.data(), positions.data(), static_cast<int>(positions.size() / 2)},
                                            &image, ctx).ok());
  const HfFeatures features = ReadFeatures(kModel);
  const auto encode_audio = [&](const std::vector<float>& values) {
    std::vector<float> audio;
    EXPECT_TRUE(encoder_->Encode(values.data(), features.mask.data(), features.frames(), &audio, ctx).ok());
    return audio;
  };
  const std::vector<float> audio = encode_audio(features.values);
  const std::vector<float> silent = encode_audio(std::vector<float>(features.values.size(), 0.0f));

  const nlohmann::json ids_json = InputIds(kModel);
  const std::vector<int32_t> ids = ids_json["input_ids"].get<std::vector<int32_t>>();
  const int n = static_cast<int>(ids.size());
  const nlohmann::json& placeholders = ids_json.at("placeholders");
  const int image_first = placeholders.at("image").at("first_position").get<int>();
  const int image_count = placeholders.at("image").at("count").get<int>();
  const int audio_first = placeholders.at("audio").at("first_position").get<int>();
  const int audio_count = placeholders.at("audio").at("count").get<int>();
  const int64_t width = encoder_->config().projection_dim;
  ASSERT_EQ(image.size(), static_cast<size_t>(image_count * width));
  ASSERT_EQ(audio.size(), static_cast<size_t>(audio_count * width));

  const int64_t n_vocab = model.value()->config().n_vocab;
  // audio_rows null: the audio placeholders stay ordinary tokens (an engine that ignores the audio).
  const auto run = [&](const float* audio_rows) {
    std::vector<const float*> rows(static_cast<size_t>(n), nullptr);
    for (int i = 0; i < image_count; ++i) rows[static_cast<size_t>(image_first + i)] = image.data() + i * width;
    for (int i = 0; audio_rows != nullptr && i < audio_count; ++i) {
      rows[static_cast<size_t>(audio_first + i)] = audio_rows + i * width;
    }
    auto cache = KvCache::Create(model.value()->KvLayout(), 128, DType::kF32, 4);
    EXPECT_TRUE(cache.ok());
    Workspace ws(model.value()->config(), 128, 128, 2, model.value()->ExtraScratchFloats(128));
    SequenceChunk chunk{ids.data(), n, cache.value().get()};
    chunk.embeddings = rows.data();
    std::vector<float> logits(static_cast<size_t>(n * n_vocab));
    EXPECT_TRUE(model.value()->ForwardBatch(std::span(&chunk, 1), ws, ctx, logits.data(), true).ok());
    return logits;
  };
  const std::vector<float> golden = ReadF32(HfMmDir(kModel) + "/logits.f32");
  const std::vector<float> got = run(audio.data());
  const double diff = MaxAbsDiff(got, golden);
  std::printf("[gemma4 image + audio logits, %s] all %d rows: max |diff| %.2e\n", GetParam(), n, diff);
  EXPECT_LT(diff, 1e-4);
  for (int r = 0; r < n; ++r) {
    const auto argmax = [&](const std::vector<float>& l) {
      return std::max_element(l.begin() + r * n_vocab, l.begin() + (r + 1) * n_vocab) - (l.begin() + r * n_vocab);
    };
    EXPECT_EQ(argmax(got), argmax(golden)) << "row " << r;
  }
  EXPECT_GT(MaxAbsDiff(run(silent.data()), golden), 1.0);
  EXPECT_GT(MaxAbsDiff(run(nullptr), golden), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Kernels, Gemma4Audio, ::testing::Values("ref", "auto"));

}  // namespace
}  // namespace gemlet
