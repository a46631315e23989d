// Images through the public API (include/gemlet only), against transformers 5.17's goldens
// (shared/testdata/hf-mm): each checkpoint converted by gemlet::Convert into a text GGUF and an
// mmproj, an Engine loaded with both, HF's pixels and the image file encoded, and the logits of
// HF's own expanded prompt compared row by row. Then what a prompt with an image must keep true:
// the processors' placement, prefix reuse keyed by the image, truncation, saved sessions, and one
// clear error for each misuse.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gemlet/gemlet.h"
#include "gemlet/gemlet.hpp"
#include "gemlet/tasks.hpp"
#include "common/hf_mm_models.h"
#include "gemlet/tools.hpp"
#include "common/test_util.h"

namespace gemlet {
namespace {

const std::string kHfMm = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/";

using test::ReadRawFile;

double MaxAbsDiff(const float* a, const float* b, size_t n) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(double{a[i]} - b[i]));
  return worst;
}

int ArgMax(const float* row, int n) { return static_cast<int>(std::max_element(row, row + n) - row); }

// The golden's prompt: HF's expanded ids, its image placeholders and how many rows to compare
// (gemma4_e2b_image_audio holds a clip after the image, which this API does not place yet).
struct Golden {
  std::vector<int32_t> ids;
  int image_first = 0, image_count = 0;
  int compared_rows = 0;
};

Golden ReadGolden(const std::string& model) {
  std::ifstream in(kHfMm + model + "/input_ids.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  Golden g;
  g.ids = j["input_ids"].get<std::vector<int32_t>>();
  g.image_first = j["placeholders"]["image"]["first_position"].get<int>();
  g.image_count = j["placeholders"]["image"]["count"].get<int>();
  g.compared_rows = static_cast<int>(g.ids.size());
  if (j["placeholders"].contains("audio")) g.compared_rows = j["placeholders"]["audio"]["first_position"].get<int>() - 1;
  return g;
}

// Text GGUF and mmproj of an hf-mm checkpoint, converted once per test binary.
const test::HfMmModel& Convert(const std::string& name) { return test::ConvertHfMm(name); }

std::shared_ptr<Engine> LoadWithMmproj(const std::string& name, const std::string& kernels = "auto",
                                       bool hf_eager_audio = false) {
  const test::HfMmModel& c = Convert(name);
  EngineOptions o;
  o.mmproj_path = c.mmproj;
  o.audio_hf_eager_mask = hf_eager_audio;
  o.n_threads = 2;
  o.kernels.kernels = kernels;
  o.thermal.enabled = false;
  auto engine = Engine::Load(c.model, o);
  EXPECT_TRUE(engine.ok()) << engine.message();
  return engine.ok() ? engine.value() : nullptr;
}

std::unique_ptr<Session> NewSession(const std::shared_ptr<Engine>& engine) {
  SessionOptions o;
  o.n_ctx = 256;
  o.kv_cache_type = KvCacheType::kF32;  // HF's goldens are float32 throughout
  auto s = Session::Create(engine, o);
  EXPECT_TRUE(s.ok()) << s.message();
  return s.ok() ? std::move(s).value() : nullptr;
}

// HF's pixels for the model (Gemma 4: its patches and their positions).
Result<std::shared_ptr<const EncodedMedia>> EncodeHfPixels(const Engine& engine, const std::string& name) {
  const std::vector<float> pixels = ReadRawFile<float>(kHfMm + name + "/pixel_values.f32");
  const std::vector<int32_t> positions =
      engine.info().architecture == "gemma4" ? ReadRawFile<int32_t>(kHfMm + name + "/image_position_ids.i32")
                                             : std::vector<int32_t>();
  return engine.EncodeImagePixels(pixels, positions);
}

// Every row's logits of HF's prompt with `image` on its placeholders.
std::vector<float> PromptLogits(const std::shared_ptr<Engine>& engine, const Golden& g,
                                std::shared_ptr<const EncodedMedia> image) {
  auto session = NewSession(engine);
  Prompt prompt{g.ids, {{g.image_first, std::move(image)}}};
  std::vector<float> logits(g.ids.size() * static_cast<size_t>(engine->info().n_vocab));
  const Status s = session->Evaluate(prompt, logits.data(), /*all_logits=*/true);
  EXPECT_TRUE(s.ok()) << s.message();
  return logits;
}

class MediaApi : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(HfMm, MediaApi,
                         ::testing::Values("gemma3_image", "gemma4_bidir_image", "gemma4_e2b_image_audio"));

TEST_P(MediaApi, LogitsWithTheImageMatchHf) {
  const std::string name = GetParam();
  for (const std::string kernels : {"ref", "auto"}) {
    SCOPED_TRACE(kernels);
    auto engine = LoadWithMmproj(name, kernels);
    ASSERT_NE(engine, nullptr);
    EXPECT_TRUE(engine->info().takes_images);
    const bool with_audio = name == "gemma4_e2b_image_audio";
    EXPECT_EQ(engine->info().takes_audio, with_audio);
    EXPECT_EQ(engine->info().mmproj_projector,
              engine->info().architecture == "gemma4" ? (with_audio ? "gemma4v,gemma4a" : "gemma4v") : "gemma3");
    const Golden g = ReadGolden(name);
    const int n_vocab = engine->info().n_vocab;
    const size_t rows = static_cast<size_t>(g.compared_rows);
    const std::vector<float> golden = ReadRawFile<float>(kHfMm + name + "/logits.f32");

    auto image = EncodeHfPixels(*engine, name);
    ASSERT_TRUE(image.ok()) << image.message();
    EXPECT_EQ(image.value()->n_tokens, g.image_count);
    EXPECT_EQ(image.value()->content_hash.size(), 32u);
    const std::vector<float> embeds = ReadRawFile<float>(kHfMm + name + "/image_embeds.f32");
    ASSERT_EQ(image.value()->embeddings.size(), embeds.size());
    EXPECT_LT(MaxAbsDiff(image.value()->embeddings.data(), embeds.data(), embeds.size()), 1e-4);

    const std::vector<float> logits = PromptLogits(engine, g, image.value());
    const double diff = MaxAbsDiff(logits.data(), golden.data(), rows * n_vocab);
    std::printf("[%s, %s] logits of %zu rows with HF's pixels: max |diff| %.2e\n", name.c_str(), kernels.c_str(), rows,
                diff);
    EXPECT_LT(diff, 1e-4);
    for (size_t r = 0; r < rows; ++r) {
      EXPECT_EQ(ArgMax(&logits[r * n_vocab], n_vocab), ArgMax(&golden[r * n_vocab], n_vocab)) << "row " << r;
    }

    // From the PNG: src/media's decoding and preprocessing, then the same.
    auto from_file = engine->EncodeImageFile(kHfMm + name + "/image.png");
    ASSERT_TRUE(from_file.ok()) << from_file.message();
    const std::vector<float> file_logits = PromptLogits(engine, g, from_file.value());
    const double file_diff = MaxAbsDiff(file_logits.data(), golden.data(), rows * n_vocab);
    std::printf("[%s, %s] from image.png: max |diff| %.2e\n", name.c_str(), kernels.c_str(), file_diff);
    EXPECT_LT(file_diff, 1e-3);

    // The image is not ignored: a blank one moves the logits far beyond the tolerance.
    auto blank = std::make_shared<EncodedMedia>(*image.value());
    std::fill(blank->embeddings.begin(), blank->embeddings.end(), 0.0f);
    const std::vector<float> blank_logits = PromptLogits(engine, g, blank);
    EXPECT_GT(MaxAbsDiff(blank_logits.data(), golden.data(), rows * n_vocab), 1e-2);
  }
}

// The markup around the soft tokens is the HF processor's, found in the vocabulary.
TEST_P(MediaApi, TokenizePromptPlacesTheImageAsTheProcessorDoes) {
  const std::string name = GetParam();
  auto engine = LoadWithMmproj(name);
  ASSERT_NE(engine, nullptr);
  const Golden g = ReadGolden(name);
  auto image = EncodeHfPixels(*engine, name);
  ASSERT_TRUE(image.ok()) << image.message();
  const std::vector<ContentPart> parts = {{"", image.value()}};
  auto prompt = engine->TokenizePrompt(parts);
  ASSERT_TRUE(prompt.ok()) << prompt.message();
  const int before = engine->info().architecture == "gemma4" ? 1 : 2;  // <|image> ; "\n\n" <start_of_image>
  const std::vector<int32_t> expected(g.ids.begin() + g.image_first - before,
                                      g.ids.begin() + g.image_first + g.image_count + before);
  EXPECT_EQ(prompt.value().tokens, expected);
  ASSERT_EQ(prompt.value().media.size(), 1u);
  EXPECT_EQ(prompt.value().media[0].position, before);

  // In a chat: the template's marker, expanded the same way, inside the user's turn.
  std::vector<Message> chat(1);
  chat[0].role = "user";
  chat[0].parts = {{"Describe", nullptr}, {"", image.value()}, {" this. ", nullptr}};
  auto text = engine->ApplyChatTemplate(chat);
  ASSERT_TRUE(text.ok()) << text.message();
  const std::string marker = engine->info().architecture == "gemma4" ? "<|image|>" : "<start_of_image>";
  EXPECT_NE(text.value().find("Describe" + marker + "this."), std::string::npos) << text.value();
  auto chat_prompt = engine->ChatPrompt(chat);
  ASSERT_TRUE(chat_prompt.ok()) << chat_prompt.message();
  ASSERT_EQ(chat_prompt.value().media.size(), 1u);
  const int at = chat_prompt.value().media[0].position;
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), chat_prompt.value().tokens.begin() + at - before));
  EXPECT_FALSE(engine->TokenizeChat(chat).ok());  // tokens alone would lose the image
}

// Prefix reuse keeps an image only where the cache holds the same image; a truncation never keeps
// half of one; a saved session resumes with it.
TEST(MediaApiSession, CacheKeepsImagesWhole) {
  const std::string name = "gemma3_image";
  auto engine = LoadWithMmproj(name);
  ASSERT_NE(engine, nullptr);
  const Golden g = ReadGolden(name);
  const int n_vocab = engine->info().n_vocab;
  auto image = EncodeHfPixels(*engine, name);
  ASSERT_TRUE(image.ok()) << image.message();
  const Prompt prompt{g.ids, {{g.image_first, image.value()}}};
  GenerateOptions greedy;
  greedy.max_tokens = 4;
  greedy.sampling.temperature = 0;

  auto session = NewSession(engine);
  auto first = session->Complete(prompt, greedy);
  ASSERT_TRUE(first.ok()) << first.message();
  ASSERT_EQ(session->media().size(), 1u);
  EXPECT_EQ(session->media()[0].position, g.image_first);

  // The same image again (another object with the same embeddings): everything but the last token
  // comes from the cache, and the answer is the same.
  auto copy = std::make_shared<EncodedMedia>(*image.value());
  auto second = session->Complete(Prompt{g.ids, {{g.image_first, copy}}}, greedy);
  ASSERT_TRUE(second.ok()) << second.message();
  EXPECT_EQ(second.value().stats.cached_tokens, static_cast<int>(g.ids.size()) - 1);
  EXPECT_EQ(second.value().text, first.value().text);

  // Another image behind the same placeholders: nothing from the image on is reused, and the
  // answer is a fresh session's.
  auto other = std::make_shared<EncodedMedia>(*image.value());
  for (float& v : other->embeddings) v = -v;
  const Prompt other_prompt{g.ids, {{g.image_first, other}}};
  auto third = session->Complete(other_prompt, greedy);
  ASSERT_TRUE(third.ok()) << third.message();
  EXPECT_LE(third.value().stats.cached_tokens, g.image_first);
  auto fresh = NewSession(engine);
  auto reference = fresh->Complete(other_prompt, greedy);
  ASSERT_TRUE(reference.ok());
  EXPECT_EQ(third.value().tokens, reference.value().tokens);

  // A cut inside the image goes back to its start.
  ASSERT_TRUE(session->Truncate(g.image_first + 3).ok());
  EXPECT_EQ(session->n_past(), g.image_first);
  EXPECT_TRUE(session->media().empty());

  // Save with the image, resume elsewhere: the next logits are the same bits.
  auto a = NewSession(engine);
  ASSERT_TRUE(a->Evaluate(prompt).ok());
  const std::string state = (std::filesystem::temp_directory_path() /
                             ("gemlet-media-state-" + std::to_string(::getpid()))).string();
  ASSERT_TRUE(a->SaveState(state).ok());
  auto b = NewSession(engine);
  const Status loaded = b->LoadState(state);
  std::filesystem::remove(state);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  ASSERT_EQ(b->media().size(), 1u);
  EXPECT_EQ(b->media()[0].media->content_hash, image.value()->content_hash);
  const int32_t next[] = {g.ids.back()};
  std::vector<float> la(n_vocab), lb(n_vocab);
  ASSERT_TRUE(a->Evaluate(next, la.data()).ok());
  ASSERT_TRUE(b->Evaluate(next, lb.data()).ok());
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
  // A resumed session evaluates its history again with the image (a deep rollback replays it).
  ASSERT_TRUE(b->Truncate(g.image_first + g.image_count + 1).ok());
  ASSERT_TRUE(b->Evaluate(std::span<const int32_t>(g.ids).subspan(g.image_first + g.image_count + 1)).ok());
  ASSERT_TRUE(b->Evaluate(next, lb.data()).ok());
  EXPECT_LT(MaxAbsDiff(la.data(), lb.data(), la.size()), 1e-4);

  // Dropping tokens that cut the image in two is refused; dropping it whole moves what follows.
  EXPECT_FALSE(a->Discard(g.image_first + 1, 4).ok());
  auto dropped = a->Discard(g.image_first - 1, g.image_count + 2);
  ASSERT_TRUE(dropped.ok()) << dropped.message();
  EXPECT_TRUE(a->media().empty());
}

TEST(MediaApiErrors, EachMisuseHasOneClearError) {
  // A Gemma 3 model loaded without an mmproj says which file is missing.
  auto demo = Engine::Load(GEMLET_DEMO_MODEL);
  ASSERT_TRUE(demo.ok());
  auto no_tower = demo.value()->EncodeImageFile(kHfMm + "gemma3_image/image.png");
  ASSERT_FALSE(no_tower.ok());
  EXPECT_EQ(no_tower.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_tower.message().find("mmproj"), std::string::npos) << no_tower.message();
  // A text-only family (Gemma 1): no image, no media in prompts, no mmproj.
  const std::string gemma1 = std::string(GEMLET_TESTDATA_DIR) + "/gguf/gemma1_2b_like_mqa.gguf";
  auto text_model = Engine::Load(gemma1);
  ASSERT_TRUE(text_model.ok()) << text_model.message();
  auto refused_image = text_model.value()->EncodeImageFile(kHfMm + "gemma3_image/image.png");
  ASSERT_FALSE(refused_image.ok());
  EXPECT_NE(refused_image.message().find("text only"), std::string::npos) << refused_image.message();
  auto session = NewSession(text_model.value());
  auto fake = std::make_shared<EncodedMedia>();
  fake->n_tokens = 2;
  fake->n_embd = text_model.value()->info().d_model;
  fake->embeddings.assign(static_cast<size_t>(2 * fake->n_embd), 0.0f);
  const Status text_only = session->Evaluate(Prompt{{2, 5, 5}, {{1, fake}}});
  EXPECT_EQ(text_only.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(text_only.message().find("text only"), std::string::npos) << text_only.message();
  EXPECT_EQ(session->n_past(), 0);
  EngineOptions with_mmproj;
  with_mmproj.mmproj_path = Convert("gemma3_image").mmproj;
  auto refused = Engine::Load(gemma1, with_mmproj);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("mmproj"), std::string::npos) << refused.message();

  // Another model's mmproj (Gemma 3's tower on a Gemma 4 model).
  EngineOptions wrong;
  wrong.mmproj_path = Convert("gemma3_image").mmproj;
  auto mismatched = Engine::Load(Convert("gemma4_bidir_image").model, wrong);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.message().find("gemma3"), std::string::npos) << mismatched.message();

  // A multimodal model without its mmproj; a corrupt image; an mmproj that is not one.
  auto bare = Engine::Load(Convert("gemma3_image").model);
  ASSERT_TRUE(bare.ok());
  auto no_mmproj = bare.value()->EncodeImageFile(kHfMm + "gemma3_image/image.png");
  ASSERT_FALSE(no_mmproj.ok());
  EXPECT_EQ(no_mmproj.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_mmproj.message().find("mmproj"), std::string::npos) << no_mmproj.message();
  auto engine = LoadWithMmproj("gemma3_image");
  ASSERT_NE(engine, nullptr);
  const std::vector<uint8_t> truncated = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0};
  auto bad = engine->EncodeImage(truncated);
  ASSERT_FALSE(bad.ok());
  EXPECT_FALSE(bad.message().empty());
  auto not_image = engine->EncodeImageFile(Convert("gemma3_image").model);
  EXPECT_FALSE(not_image.ok());
  const std::vector<float> wrong_size(10, 0.0f);
  EXPECT_FALSE(engine->EncodeImagePixels(wrong_size).ok());
  EngineOptions not_mmproj;
  not_mmproj.mmproj_path = Convert("gemma3_image").model;
  EXPECT_FALSE(Engine::Load(Convert("gemma3_image").model, not_mmproj).ok());
  // Spans that overlap or leave the prompt.
  auto image = EncodeHfPixels(*engine, "gemma3_image");
  ASSERT_TRUE(image.ok());
  auto s = NewSession(engine);
  const std::vector<int32_t> ids(20, 5);
  EXPECT_EQ(s->Evaluate(Prompt{ids, {{10, image.value()}}}).code(), StatusCode::kInvalidArgument);  // 10 + 16 > 20
  EXPECT_EQ(s->n_past(), 0);
}

// Gemma 4 E2B-like with the image and the clip both in HF's prompt: every row of the logits. The
// goldens were made with transformers' eager attention, whose audio mask the engine reproduces on
// request (EngineOptions::audio_hf_eager_mask); the default is the model's own window.
TEST(MediaApiAudio, ImageAndClipLogitsMatchHf) {
  const std::string name = "gemma4_e2b_image_audio";
  std::ifstream in(kHfMm + name + "/input_ids.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  const std::vector<int32_t> ids = j["input_ids"].get<std::vector<int32_t>>();
  const int audio_first = j["placeholders"]["audio"]["first_position"].get<int>();
  const int audio_count = j["placeholders"]["audio"]["count"].get<int>();
  const Golden g = ReadGolden(name);
  const std::vector<float> golden = ReadRawFile<float>(kHfMm + name + "/logits.f32");
  const std::vector<float> features = ReadRawFile<float>(kHfMm + name + "/input_features.f32");
  const std::vector<uint8_t> mask = ReadRawFile<uint8_t>(kHfMm + name + "/input_features_mask.u8");
  const std::vector<float> embeds = ReadRawFile<float>(kHfMm + name + "/audio_embeds.f32");
  for (const std::string kernels : {"ref", "auto"}) {
    SCOPED_TRACE(kernels);
    auto engine = LoadWithMmproj(name, kernels, /*hf_eager_audio=*/true);
    ASSERT_NE(engine, nullptr);
    EXPECT_TRUE(engine->info().takes_images);
    EXPECT_TRUE(engine->info().takes_audio);
    EXPECT_EQ(engine->info().mmproj_projector, "gemma4v,gemma4a");
    const int n_vocab = engine->info().n_vocab;
    auto image = EncodeHfPixels(*engine, name);
    ASSERT_TRUE(image.ok()) << image.message();
    auto clip = engine->EncodeAudioFeatures(features, mask);
    ASSERT_TRUE(clip.ok()) << clip.message();
    EXPECT_EQ(clip.value()->kind, MediaKind::kAudio);
    EXPECT_FALSE(clip.value()->two_way);
    ASSERT_EQ(clip.value()->n_tokens, audio_count);
    EXPECT_LT(MaxAbsDiff(clip.value()->embeddings.data(), embeds.data(), embeds.size()), 1e-4);

    const auto logits_of = [&](std::shared_ptr<const EncodedMedia> audio) {
      auto session = NewSession(engine);
      const Prompt prompt{ids, {{g.image_first, image.value()}, {audio_first, std::move(audio)}}};
      std::vector<float> logits(ids.size() * static_cast<size_t>(n_vocab));
      const Status s = session->Evaluate(prompt, logits.data(), true);
      EXPECT_TRUE(s.ok()) << s.message();
      return logits;
    };
    const std::vector<float> logits = logits_of(clip.value());
    const double diff = MaxAbsDiff(logits.data(), golden.data(), golden.size());
    std::printf("[%s, %s] logits of all %zu rows, image and clip: max |diff| %.2e\n", name.c_str(), kernels.c_str(),
                ids.size(), diff);
    EXPECT_LT(diff, 1e-4);
    for (size_t r = 0; r < ids.size(); ++r) {
      EXPECT_EQ(ArgMax(&logits[r * n_vocab], n_vocab), ArgMax(&golden[r * n_vocab], n_vocab)) << "row " << r;
    }
    // From audio.wav: decoding, HF's log-mel, the tower; and the same samples given as PCM.
    auto from_file = engine->EncodeAudioFile(kHfMm + name + "/audio.wav");
    ASSERT_TRUE(from_file.ok()) << from_file.message();
    const std::vector<float> file_logits = logits_of(from_file.value());
    const double file_diff = MaxAbsDiff(file_logits.data(), golden.data(), golden.size());
    std::printf("[%s, %s] from audio.wav: max |diff| %.2e\n", name.c_str(), kernels.c_str(), file_diff);
    EXPECT_LT(file_diff, 1e-3);
    // A silent clip of the same length: far off, so the clip is not ignored.
    auto silent = std::make_shared<EncodedMedia>(*clip.value());
    std::fill(silent->embeddings.begin(), silent->embeddings.end(), 0.0f);
    const std::vector<float> silent_logits = logits_of(silent);
    EXPECT_GT(MaxAbsDiff(silent_logits.data(), golden.data(), golden.size()), 1e-2);
  }

  // The processor's markup around the clip; PCM from a microphone gives the file's embeddings.
  auto engine = LoadWithMmproj(name);
  ASSERT_NE(engine, nullptr);
  auto clip = engine->EncodeAudioFile(kHfMm + name + "/audio.wav");
  ASSERT_TRUE(clip.ok()) << clip.message();
  auto prompt = engine->TokenizePrompt(std::vector<ContentPart>{{"", clip.value()}});
  ASSERT_TRUE(prompt.ok()) << prompt.message();
  EXPECT_EQ(prompt.value().tokens, std::vector<int32_t>(ids.begin() + audio_first - 1, ids.begin() + audio_first + audio_count + 1));
  std::ifstream wav(kHfMm + name + "/audio.wav", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(wav)), std::istreambuf_iterator<char>());
  std::vector<float> pcm((bytes.size() - 44) / 2);  // the golden's plain 44-byte header, int16 mono
  for (size_t i = 0; i < pcm.size(); ++i) {
    int16_t v;
    std::memcpy(&v, bytes.data() + 44 + 2 * i, 2);
    pcm[i] = static_cast<float>(v) / 32768.0f;
  }
  auto from_pcm = engine->EncodeAudioPcm(pcm, 16000);
  ASSERT_TRUE(from_pcm.ok()) << from_pcm.message();
  EXPECT_EQ(from_pcm.value()->embeddings, clip.value()->embeddings);
  // Stereo at 48 kHz (the same clip twice, resampled) is taken too.
  std::vector<float> stereo;
  for (float v : pcm) stereo.insert(stereo.end(), {v, v, v, v, v, v});  // 3x the rate, 2 channels
  auto resampled = engine->EncodeAudioPcm(stereo, 48000, 2);
  ASSERT_TRUE(resampled.ok()) << resampled.message();
  EXPECT_NEAR(resampled.value()->n_tokens, clip.value()->n_tokens, 1);

  // Bad clips: too long, empty, not audio, 0 Hz; audio for an engine without an audio tower.
  const std::vector<float> long_clip(16000 * 31, 0.1f);
  auto too_long = engine->EncodeAudioPcm(long_clip, 16000);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.message().find("30 s"), std::string::npos) << too_long.message();
  EXPECT_FALSE(engine->EncodeAudioPcm({}, 16000).ok());
  EXPECT_FALSE(engine->EncodeAudioPcm(pcm, 0).ok());
  EXPECT_FALSE(engine->EncodeAudioFile(kHfMm + name + "/image.png").ok());
  auto vision_only = LoadWithMmproj("gemma4_bidir_image");
  ASSERT_NE(vision_only, nullptr);
  auto no_tower = vision_only->EncodeAudioFile(kHfMm + name + "/audio.wav");
  ASSERT_FALSE(no_tower.ok());
  EXPECT_EQ(no_tower.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_tower.message().find("not audio"), std::string::npos) << no_tower.message();
}

// Gemma 3n's clip: 16 fixed soft slots and its end-of-audio token, which the tower embeds, placed
// as Gemma3nProcessor places them; every row of the logits (the bound for 3n is 1e-2).
TEST(MediaApiAudio, Gemma3nClipCarriesItsEndToken) {
  const std::string name = "gemma3n_audio";
  std::ifstream in(kHfMm + name + "/input_ids.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  const std::vector<int32_t> ids = j["input_ids"].get<std::vector<int32_t>>();
  const int first = j["placeholders"]["audio"]["first_position"].get<int>();
  const int count = j["placeholders"]["audio"]["count"].get<int>();
  const std::vector<float> golden = ReadRawFile<float>(kHfMm + name + "/logits.f32");
  auto engine = LoadWithMmproj(name, "ref");
  ASSERT_NE(engine, nullptr);
  EXPECT_TRUE(engine->info().takes_audio);
  EXPECT_EQ(engine->info().mmproj_projector, "gemma3na");
  const int n_vocab = engine->info().n_vocab;
  for (const bool from_file : {false, true}) {
    SCOPED_TRACE(from_file ? "audio.wav" : "HF's features");
    auto clip = from_file ? engine->EncodeAudioFile(kHfMm + name + "/audio.wav")
                          : engine->EncodeAudioFeatures(ReadRawFile<float>(kHfMm + name + "/input_features.f32"),
                                                        ReadRawFile<uint8_t>(kHfMm + name + "/input_features_mask.u8"));
    ASSERT_TRUE(clip.ok()) << clip.message();
    ASSERT_EQ(clip.value()->n_tokens, count + 1);  // the slots and <end_of_audio>
    EXPECT_EQ(clip.value()->end_token, ids[static_cast<size_t>(first + count)]);
    // The processor's expansion, end token included.
    auto prompt = engine->TokenizePrompt(std::vector<ContentPart>{{"", clip.value()}});
    ASSERT_TRUE(prompt.ok()) << prompt.message();
    EXPECT_EQ(prompt.value().tokens, std::vector<int32_t>(ids.begin() + first - 2, ids.begin() + first + count + 2));
    ASSERT_EQ(prompt.value().media.size(), 1u);
    EXPECT_EQ(prompt.value().media[0].position, 2);
    auto session = NewSession(engine);
    std::vector<float> logits(ids.size() * static_cast<size_t>(n_vocab));
    ASSERT_TRUE(session->Evaluate(Prompt{ids, {{first, clip.value()}}}, logits.data(), true).ok());
    const double diff = MaxAbsDiff(logits.data(), golden.data(), golden.size());
    std::printf("[gemma3n_audio, ref, %s] logits of all %zu rows: max |diff| %.2e\n", from_file ? "audio.wav" : "features",
                ids.size(), diff);
    EXPECT_LT(diff, 2e-3);
    for (size_t r = 0; r < ids.size(); ++r) {
      EXPECT_EQ(ArgMax(&logits[r * n_vocab], n_vocab), ArgMax(&golden[r * n_vocab], n_vocab)) << "row " << r;
    }
  }
}

// The task presets with media: describe places the image before the request, transcribe the clip;
// a task that takes text refuses them.
TEST(MediaApiTasks, DescribeAndTranscribeCarryTheirMedia) {
  auto engine = LoadWithMmproj("gemma4_e2b_image_audio");
  ASSERT_NE(engine, nullptr);
  auto image = engine->EncodeImageFile(kHfMm + "gemma4_e2b_image_audio/image.png");
  auto clip = engine->EncodeAudioFile(kHfMm + "gemma4_e2b_image_audio/audio.wav");
  ASSERT_TRUE(image.ok() && clip.ok());
  auto session = NewSession(engine);
  TaskOptions describe;
  describe.task = "describe";
  describe.media = {image.value()};
  describe.generate.max_tokens = 3;
  describe.generate.sampling.temperature = 0;
  auto described = RunTask(*session, "", describe);
  ASSERT_TRUE(described.ok()) << described.message();
  EXPECT_EQ(described->answer_language, "en");
  ASSERT_EQ(session->media().size(), 1u);
  EXPECT_EQ(session->media()[0].media, image.value());
  // The image's placeholders, between <|image> and <image|>, with the request's words after them.
  const std::vector<int32_t>& held = session->tokens();
  const MediaSpan& span = session->media()[0];
  const int32_t soft = engine->MediaToken(MediaKind::kImage).value();
  ASSERT_GT(span.position, 0);
  EXPECT_EQ(held[static_cast<size_t>(span.position - 1)], 505);  // the test vocabulary's <|image>
  for (int k = 0; k < span.media->n_tokens; ++k) EXPECT_EQ(held[static_cast<size_t>(span.position + k)], soft);
  EXPECT_EQ(held[static_cast<size_t>(span.position + span.media->n_tokens)], 506);  // <image|>
  EXPECT_GT(held.size(), static_cast<size_t>(span.position + span.media->n_tokens + 4));

  TaskOptions transcribe;
  transcribe.task = "transcribe";
  transcribe.to = "zh";
  transcribe.media = {clip.value()};
  transcribe.generate = describe.generate;
  auto heard = RunTask(*session, "", transcribe);
  ASSERT_TRUE(heard.ok()) << heard.message();
  EXPECT_EQ(heard->answer_language, "zh-Hans");
  ASSERT_EQ(session->media().size(), 1u);
  EXPECT_EQ(session->media()[0].media->kind, MediaKind::kAudio);

  TaskOptions polish;
  polish.task = "polish";
  polish.media = {image.value()};
  EXPECT_EQ(RunTask(*session, "hi", polish).status().code(), StatusCode::kInvalidArgument);
  TaskOptions both = describe;
  both.media.push_back(clip.value());
  EXPECT_EQ(RunTask(*session, "", both).status().code(), StatusCode::kInvalidArgument);
}

// The C API over the same: an image from the file, a prompt of parts, every row's logits equal to
// the C++ API's bit for bit, the session's media, and a conversation turn with an image.
TEST(MediaCApi, ImagesThroughTheCApi) {
  const test::HfMmModel& c = Convert("gemma3_image");
  gemlet_engine_options eo = gemlet_engine_options_default();
  eo.mmproj_path = c.mmproj.c_str();
  eo.n_threads = 2;
  gemlet_engine* engine = nullptr;
  ASSERT_EQ(gemlet_engine_load(c.model.c_str(), &eo, &engine), GEMLET_OK) << gemlet_last_error();
  gemlet_model_info info = gemlet_model_info_default();
  ASSERT_EQ(gemlet_engine_info(engine, &info), GEMLET_OK);
  EXPECT_TRUE(info.takes_images);
  EXPECT_STREQ(info.mmproj_projector, "gemma3");

  gemlet_media* image = nullptr;
  ASSERT_EQ(gemlet_engine_encode_image_file(engine, (kHfMm + "gemma3_image/image.png").c_str(), nullptr, &image),
            GEMLET_OK)
      << gemlet_last_error();
  EXPECT_EQ(gemlet_media_get_kind(image), GEMLET_MEDIA_IMAGE);
  EXPECT_EQ(gemlet_media_n_tokens(image), 16);
  EXPECT_EQ(std::strlen(gemlet_media_content_hash(image)), 32u);
  int32_t soft = -1;
  ASSERT_EQ(gemlet_engine_media_token(engine, GEMLET_MEDIA_IMAGE, &soft), GEMLET_OK);
  EXPECT_EQ(soft, 507);

  // HF's prompt with the image placed by hand, against the C++ API on the same engine file.
  const Golden g = ReadGolden("gemma3_image");
  gemlet_prompt* prompt = nullptr;
  ASSERT_EQ(gemlet_prompt_new(g.ids.data(), g.ids.size(), &prompt), GEMLET_OK);
  EXPECT_EQ(gemlet_prompt_place_media(prompt, static_cast<int>(g.ids.size()) - 8, image), GEMLET_INVALID_ARGUMENT);
  ASSERT_EQ(gemlet_prompt_place_media(prompt, g.image_first, image), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(gemlet_prompt_place_media(prompt, g.image_first + 4, image), GEMLET_INVALID_ARGUMENT);  // overlaps
  EXPECT_EQ(gemlet_prompt_n_media(prompt), 1u);

  gemlet_session_options so = gemlet_session_options_default();
  so.n_ctx = 256;
  so.kv_type = GEMLET_KV_F32;
  gemlet_session* session = nullptr;
  ASSERT_EQ(gemlet_session_create(engine, &so, &session), GEMLET_OK) << gemlet_last_error();
  const int n_vocab = gemlet_engine_n_vocab(engine);
  std::vector<float> logits(g.ids.size() * static_cast<size_t>(n_vocab));
  ASSERT_EQ(gemlet_session_evaluate_prompt(session, prompt, logits.data(), true), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(gemlet_session_n_media(session), 1u);
  int position = -1;
  gemlet_media* held = nullptr;
  ASSERT_EQ(gemlet_session_media_at(session, 0, &position, &held), GEMLET_OK);
  EXPECT_EQ(position, g.image_first);
  EXPECT_STREQ(gemlet_media_content_hash(held), gemlet_media_content_hash(image));
  gemlet_media_free(held);
  EXPECT_EQ(gemlet_session_media_at(session, 1, &position, nullptr), GEMLET_INVALID_ARGUMENT);

  auto cpp = LoadWithMmproj("gemma3_image");
  ASSERT_NE(cpp, nullptr);
  auto cpp_image = cpp->EncodeImageFile(kHfMm + "gemma3_image/image.png");
  ASSERT_TRUE(cpp_image.ok());
  const std::vector<float> expected = PromptLogits(cpp, g, cpp_image.value());
  EXPECT_EQ(0, std::memcmp(logits.data(), expected.data(), logits.size() * sizeof(float)));

  // Parts: the processor's markup around the image.
  gemlet_content_part parts[2] = {gemlet_content_part_default(), gemlet_content_part_default()};
  parts[0].media = image;
  parts[1].text = "w";
  gemlet_prompt* from_parts = nullptr;
  ASSERT_EQ(gemlet_engine_tokenize_prompt(engine, parts, 1, false, false, &from_parts), GEMLET_OK)
      << gemlet_last_error();
  size_t n = 0;
  const int32_t* ids = gemlet_prompt_tokens(from_parts, &n);
  ASSERT_EQ(n, 20u);
  EXPECT_EQ(ids[0], 108);
  EXPECT_EQ(ids[1], 505);
  EXPECT_EQ(ids[2], 507);
  EXPECT_EQ(ids[18], 506);
  gemlet_prompt_free(from_parts);

  // A conversation turn with the image, and the chat prompt of the same message.
  gemlet_conversation_options co = gemlet_conversation_options_default();
  co.session.n_ctx = 256;
  gemlet_conversation* chat = nullptr;
  ASSERT_EQ(gemlet_conversation_create(engine, &co, &chat), GEMLET_OK) << gemlet_last_error();
  gemlet_generate_options go = gemlet_generate_options_default();
  go.max_tokens = 3;
  go.temperature = 0;
  ASSERT_EQ(gemlet_conversation_send_parts(chat, parts, 2, &go, nullptr, nullptr, nullptr), GEMLET_OK)
      << gemlet_last_error();
  EXPECT_EQ(gemlet_conversation_n_messages(chat), 2u);
  gemlet_message m = gemlet_message_default();
  m.role = "user";
  m.parts = parts;
  m.n_parts = 2;
  gemlet_prompt* chat_prompt = nullptr;
  ASSERT_EQ(gemlet_engine_chat_prompt(engine, &m, 1, nullptr, &chat_prompt), GEMLET_OK) << gemlet_last_error();
  EXPECT_EQ(gemlet_prompt_n_media(chat_prompt), 1u);
  gemlet_prompt_free(chat_prompt);
  EXPECT_EQ(gemlet_conversation_send_parts(chat, nullptr, 1, &go, nullptr, nullptr, nullptr), GEMLET_INVALID_ARGUMENT);

  // NULLs and a bad image: one status each, nothing crashes.
  gemlet_media* bad = nullptr;
  const uint8_t junk[4] = {1, 2, 3, 4};
  EXPECT_NE(gemlet_engine_encode_image(engine, junk, sizeof junk, nullptr, &bad), GEMLET_OK);
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(gemlet_engine_encode_image_file(engine, nullptr, nullptr, &bad), GEMLET_INVALID_ARGUMENT);
  EXPECT_EQ(gemlet_session_evaluate_prompt(session, nullptr, nullptr, false), GEMLET_INVALID_ARGUMENT);

  gemlet_conversation_free(chat);
  gemlet_prompt_free(prompt);
  gemlet_session_free(session);
  gemlet_media_free(image);  // after the prompt that held it: either order is fine
  gemlet_engine_free(engine);
}

}  // namespace
}  // namespace gemlet
