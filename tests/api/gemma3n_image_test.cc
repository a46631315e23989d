// Gemma 3n takes images through the public API: the tiny MobileNet-V5 checkpoint of
// tests/common/tiny_mnv5.h (hf-mm/gemma3n_audio's text decoder and audio tower, a vision tower of the
// golden's arch) converted by gemlet::Convert into a text GGUF and one mmproj with both towers, an Engine
// loaded with them, a PNG encoded, placed as Gemma3nProcessor places it ("\n\n<start_of_image>", the
// soft tokens, "<end_of_image>\n\n", the end marker embedded by the vision embedder), and the text model
// reading it. Then transformers' golden with an image and a clip in one prompt (tests/data/hf-mm/
// gemma3n_image_audio, converted the same way): every row's logits from HF's pixels and features and
// from image.png and audio.wav.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/hf_mm_models.h"
#include "common/tiny_mnv5.h"
#include "gemlet/gemlet.hpp"
#include "gemlet/tools.hpp"
#include "common/test_util.h"

namespace gemlet {
namespace {

struct Model {
  std::string dir, model, mmproj;
  ~Model() { std::filesystem::remove_all(dir); }
};

const Model& Converted() {
  static Model m;
  if (!m.dir.empty()) return m;
  m.dir = (std::filesystem::temp_directory_path() / ("gemlet-mnv5-api-" + std::to_string(::getpid()))).string();
  std::string error;
  test::Gemma3nImageCheckpoint spec;
  EXPECT_TRUE(test::WriteGemma3nImageCheckpoint(m.dir + "/hf", spec, &error)) << error;
  m.model = m.dir + "/model.gguf";
  m.mmproj = m.dir + "/mmproj.gguf";
  tools::ConvertOptions o;
  o.hf_dir = m.dir + "/hf";
  o.output_path = m.model;
  o.mmproj_output_path = m.mmproj;
  o.outtype = "f32";
  auto report = tools::Convert(o);
  EXPECT_TRUE(report.ok()) << report.message();
  return m;
}

std::shared_ptr<Engine> Load(const std::string& kernels) {
  EngineOptions o;
  o.mmproj_path = Converted().mmproj;
  o.n_threads = 2;
  o.kernels.kernels = kernels;
  o.thermal.enabled = false;
  auto engine = Engine::Load(Converted().model, o);
  EXPECT_TRUE(engine.ok()) << engine.message();
  return engine.ok() ? engine.value() : nullptr;
}

std::string WritePng(const std::string& name, int w, int h, int variant) {
  const std::string path = Converted().dir + "/" + name;
  const std::vector<uint8_t> png = test::PngRgb(w, h, test::TestPicture(w, h, variant));
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  return path;
}

std::vector<float> Logits(const std::shared_ptr<Engine>& engine, const Prompt& prompt) {
  SessionOptions o;
  o.n_ctx = 128;
  o.kv_cache_type = KvCacheType::kF32;
  auto session = Session::Create(engine, o);
  EXPECT_TRUE(session.ok()) << session.message();
  std::vector<float> logits(prompt.tokens.size() * static_cast<size_t>(engine->info().n_vocab));
  if (!session.ok()) return logits;
  const Status s = session.value()->Evaluate(prompt, logits.data(), /*all_logits=*/true);
  EXPECT_TRUE(s.ok()) << s.message();
  return logits;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::fabs(double{a[i]} - b[i]));
  return worst;
}

TEST(Gemma3nImage, EngineTakesImagesWithTheirEndMarker) {
  auto engine = Load("auto");
  ASSERT_NE(engine, nullptr);
  EXPECT_TRUE(engine->info().takes_images);
  EXPECT_TRUE(engine->info().takes_audio);
  EXPECT_EQ(engine->info().mmproj_projector, "gemma3nv,gemma3na");
  auto image = engine->EncodeImageFile(WritePng("a.png", 128, 128, 0));
  ASSERT_TRUE(image.ok()) << image.message();
  const EncodedMedia& m = *image.value();
  EXPECT_EQ(m.kind, MediaKind::kImage);
  ASSERT_EQ(m.n_tokens, 17);  // 16 soft tokens and <end_of_image>
  EXPECT_EQ(m.end_token, 384);  // the test vocabulary's <end_of_image>, the first vision hard token
  EXPECT_FALSE(m.two_way);      // Gemma 3n's text model is causal over images

  // The PNG needs no resize at the processor's 128 x 128: its pixels as byte / 255 give the same rows.
  const std::vector<uint8_t> rgb = test::TestPicture(128, 128, 0);
  std::vector<float> planar(3 * 128 * 128);
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 128 * 128; ++i) planar[static_cast<size_t>(c * 128 * 128 + i)] = rgb[static_cast<size_t>(i * 3 + c)] / 255.0f;
  }
  auto from_pixels = engine->EncodeImagePixels(planar);
  ASSERT_TRUE(from_pixels.ok()) << from_pixels.message();
  EXPECT_EQ(MaxAbsDiff(from_pixels.value()->embeddings, m.embeddings), 0.0);
  EXPECT_FALSE(engine->EncodeImagePixels(std::vector<float>(3 * 64 * 64, 0.5f)).ok());

  // Gemma3nProcessor's expansion: \n\n <start_of_image> 16 x <image_soft_token> <end_of_image> \n\n.
  auto prompt = engine->TokenizePrompt(std::vector<ContentPart>{{"", image.value()}});
  ASSERT_TRUE(prompt.ok()) << prompt.message();
  std::vector<int32_t> want = {108, 380};
  want.insert(want.end(), 16, 385);
  want.insert(want.end(), {384, 108});
  EXPECT_EQ(prompt.value().tokens, want);
  ASSERT_EQ(prompt.value().media.size(), 1u);
  EXPECT_EQ(prompt.value().media[0].position, 2);

  // Another size is resized to the square first; another picture gives other rows.
  auto wide = engine->EncodeImageFile(WritePng("wide.png", 97, 61, 1));
  ASSERT_TRUE(wide.ok()) << wide.message();
  EXPECT_EQ(wide.value()->n_tokens, 17);
  EXPECT_GT(MaxAbsDiff(wide.value()->embeddings, m.embeddings), 0.1);
  // The end marker's row does not depend on the image.
  const size_t d = static_cast<size_t>(m.n_embd);
  EXPECT_EQ(MaxAbsDiff(std::vector<float>(m.embeddings.end() - static_cast<ptrdiff_t>(d), m.embeddings.end()),
                       std::vector<float>(wide.value()->embeddings.end() - static_cast<ptrdiff_t>(d), wide.value()->embeddings.end())),
            0.0);
}

// The text model reads the image: the logits after it move with the picture, and a prompt whose
// placeholders are plain tokens (the image ignored) reads differently; ref and fast kernels agree.
TEST(Gemma3nImage, TextModelReadsTheImage) {
  std::vector<float> per_kernels[2];
  int k = 0;
  for (const char* kernels : {"ref", "auto"}) {
    auto engine = Load(kernels);
    ASSERT_NE(engine, nullptr);
    auto a = engine->EncodeImageFile(WritePng("a.png", 128, 128, 0));
    auto b = engine->EncodeImageFile(WritePng("b.png", 128, 128, 1));
    ASSERT_TRUE(a.ok() && b.ok());
    auto pa = engine->TokenizePrompt(std::vector<ContentPart>{{"", a.value()}});
    auto pb = engine->TokenizePrompt(std::vector<ContentPart>{{"", b.value()}});
    ASSERT_TRUE(pa.ok() && pb.ok());
    const std::vector<float> la = Logits(engine, pa.value()), lb = Logits(engine, pb.value());
    const Prompt ignored{pa.value().tokens, {}};
    const std::vector<float> li = Logits(engine, ignored);
    const size_t n_vocab = static_cast<size_t>(engine->info().n_vocab);
    // Rows 0 and 1 come before the image: equal; the last row reads it.
    const auto row = [&](const std::vector<float>& l, size_t r) {
      return std::vector<float>(l.begin() + static_cast<ptrdiff_t>(r * n_vocab), l.begin() + static_cast<ptrdiff_t>((r + 1) * n_vocab));
    };
    const size_t last = pa.value().tokens.size() - 1;
    EXPECT_EQ(MaxAbsDiff(row(la, 1), row(lb, 1)), 0.0);
    const double other_image = MaxAbsDiff(row(la, last), row(lb, last)), no_image = MaxAbsDiff(row(la, last), row(li, last));
    std::printf("[gemma3n image, %s] last-row logits |diff|: other image %.3f, image ignored %.3f\n", kernels, other_image,
                no_image);
    EXPECT_GT(other_image, 1e-2);
    EXPECT_GT(no_image, 1e-2);
    per_kernels[k++] = la;
  }
  const double diff = MaxAbsDiff(per_kernels[0], per_kernels[1]);
  std::printf("[gemma3n image] logits ref vs auto max |diff| %.2e\n", diff);
  EXPECT_LT(diff, 2e-3);
}

using test::ReadRawFile;

// transformers' golden (tests/data/hf-mm/gemma3n_image_audio) through the public API: HF's expanded
// prompt with the image and the clip, each carrying its end marker (<end_of_image>, <end_of_audio>),
// on their placeholders. Every row's logits within the 1e-2 from HF's pixels and features and
// within 10x that from image.png and audio.wav, every argmax HF's; HF's zeroed pixels and features give
// HF's own distance from the golden (meta.json `checks`), and the media left out (the placeholders read
// as plain tokens) is far off.
TEST(Gemma3nImageGolden, ImageAndClipLogitsMatchHf) {
  const std::string name = "gemma3n_image_audio", dir = test::HfMmFolder(name);
  std::ifstream in(dir + "/input_ids.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  const std::vector<int32_t> ids = j["input_ids"].get<std::vector<int32_t>>();
  const int image_first = j["placeholders"]["image"]["first_position"].get<int>();
  const int image_count = j["placeholders"]["image"]["count"].get<int>();
  const int audio_first = j["placeholders"]["audio"]["first_position"].get<int>();
  const int audio_count = j["placeholders"]["audio"]["count"].get<int>();
  std::ifstream meta_in(dir + "/meta.json");
  const nlohmann::json checks = nlohmann::json::parse(meta_in)["checks"];
  const std::vector<float> golden = ReadRawFile<float>(dir + "/logits.f32");
  const std::vector<float> inputs_embeds = ReadRawFile<float>(dir + "/inputs_embeds.f32");
  const std::vector<float> pixels = ReadRawFile<float>(dir + "/pixel_values.f32");
  const std::vector<float> features = ReadRawFile<float>(dir + "/input_features.f32");
  const std::vector<uint8_t> mask = ReadRawFile<uint8_t>(dir + "/input_features_mask.u8");
  const test::HfMmModel& files = test::ConvertHfMm(name);
  constexpr double kTolerance = 1e-2;
  for (const char* kernels : {"ref", "auto"}) {
    SCOPED_TRACE(kernels);
    EngineOptions o;
    o.mmproj_path = files.mmproj;
    o.n_threads = 2;
    o.kernels.kernels = kernels;
    o.thermal.enabled = false;
    auto loaded = Engine::Load(files.model, o);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    const std::shared_ptr<Engine> engine = loaded.value();
    EXPECT_EQ(engine->info().mmproj_projector, "gemma3nv,gemma3na");
    const size_t n_vocab = static_cast<size_t>(engine->info().n_vocab), d = static_cast<size_t>(engine->info().d_model);
    ASSERT_EQ(golden.size(), ids.size() * n_vocab);

    auto image = engine->EncodeImagePixels(pixels);
    ASSERT_TRUE(image.ok()) << image.message();
    auto clip = engine->EncodeAudioFeatures(features, mask);
    ASSERT_TRUE(clip.ok()) << clip.message();
    // Each one's rows, its end marker's included, are HF's inputs_embeds at its placeholders.
    for (const auto& [media, first, count] : {std::tuple(image.value(), image_first, image_count),
                                              std::tuple(clip.value(), audio_first, audio_count)}) {
      ASSERT_EQ(media->n_tokens, count + 1);
      EXPECT_EQ(media->end_token, ids[static_cast<size_t>(first + count)]);
      const auto row = [&](int r) { return inputs_embeds.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(r) * d); };
      const double diff = MaxAbsDiff(media->embeddings, std::vector<float>(row(first), row(first + count + 1)));
      EXPECT_LT(diff, 1e-4) << (media->kind == MediaKind::kImage ? "image" : "clip");
    }
    // The image part tokenized as Gemma3nProcessor expands it, at HF's place.
    auto part = engine->TokenizePrompt(std::vector<ContentPart>{{"", image.value()}});
    ASSERT_TRUE(part.ok()) << part.message();
    EXPECT_EQ(part.value().tokens, std::vector<int32_t>(ids.begin() + image_first - 2, ids.begin() + image_first + image_count + 2));

    const auto logits_of = [&](std::shared_ptr<const EncodedMedia> picture, std::shared_ptr<const EncodedMedia> audio) {
      Prompt prompt{ids, {}};
      if (picture) prompt.media.push_back({image_first, std::move(picture)});
      if (audio) prompt.media.push_back({audio_first, std::move(audio)});
      return Logits(engine, prompt);
    };
    const auto argmax_equal = [&](const std::vector<float>& l) {
      for (size_t r = 0; r < ids.size(); ++r) {
        const float* a = l.data() + r * n_vocab;
        const float* b = golden.data() + r * n_vocab;
        EXPECT_EQ(std::max_element(a, a + n_vocab) - a, std::max_element(b, b + n_vocab) - b) << "row " << r;
      }
    };
    const std::vector<float> logits = logits_of(image.value(), clip.value());
    const double diff = MaxAbsDiff(logits, golden);
    std::printf("[gemma3n_image_audio, %s] logits of all %zu rows from HF's pixels and features: max |diff| %.2e\n",
                kernels, ids.size(), diff);
    EXPECT_LT(diff, kTolerance);
    argmax_equal(logits);

    // From the files: src/media's decoding, the processors' resize and log-mel, the towers.
    auto image_file = engine->EncodeImageFile(dir + "/image.png");
    ASSERT_TRUE(image_file.ok()) << image_file.message();
    auto clip_file = engine->EncodeAudioFile(dir + "/audio.wav");
    ASSERT_TRUE(clip_file.ok()) << clip_file.message();
    const std::vector<float> file_logits = logits_of(image_file.value(), clip_file.value());
    const double file_diff = MaxAbsDiff(file_logits, golden);
    std::printf("[gemma3n_image_audio, %s] from image.png and audio.wav: max |diff| %.2e\n", kernels, file_diff);
    EXPECT_LT(file_diff, 10 * kTolerance);
    argmax_equal(file_logits);

    // HF's controls: zeroed pixels, zeroed features (the same mask).
    auto zero_image = engine->EncodeImagePixels(std::vector<float>(pixels.size(), 0.0f));
    auto zero_clip = engine->EncodeAudioFeatures(std::vector<float>(features.size(), 0.0f), mask);
    ASSERT_TRUE(zero_image.ok() && zero_clip.ok());
    const struct {
      const char* what;
      std::vector<float> logits;
      double hf;  // HF's own run's distance from the golden; < 0: none
    } controls[] = {
        {"zero_image", logits_of(zero_image.value(), clip.value()), checks["zero_image_logits_max_abs_diff"].get<double>()},
        {"zero_audio", logits_of(image.value(), zero_clip.value()), checks["zero_audio_logits_max_abs_diff"].get<double>()},
        {"image left out", logits_of(nullptr, clip.value()), -1},
        {"clip left out", logits_of(image.value(), nullptr), -1},
    };
    for (const auto& c : controls) {
      const double moved = MaxAbsDiff(c.logits, golden);
      std::printf("[gemma3n_image_audio, %s] %s: max |diff| %.3f", kernels, c.what, moved);
      std::printf(c.hf >= 0 ? " (HF's own run: %.3f)\n" : "\n", c.hf);
      EXPECT_GT(moved, 100 * kTolerance) << c.what;
      if (c.hf >= 0) {
        EXPECT_NEAR(moved, c.hf, kTolerance) << c.what;
      }
    }
  }
}

}  // namespace
}  // namespace gemlet
