// Long clips through the public API, on hf-mm's gemma4_e2b_image_audio converted by gemlet::Convert:
// Engine::EncodeAudioPieces cuts a 70 s clip (audio.wav repeated with pauses) in its pauses into
// pieces of at most 30 s, each encoded as EncodeAudioPcm encodes it; a clip within the window is
// EncodeAudio's one piece; too long is kTooLarge naming both durations; the transcribe task runs one
// generation per piece and joins the texts (JoinTranscripts); the C API gives the same pieces.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/long_clip.h"
#include "gemlet/gemlet.h"
#include "gemlet/gemlet.hpp"
#include "gemlet/tasks.hpp"
#include "common/hf_mm_models.h"
#include "gemlet/tools.hpp"

namespace gemlet {
namespace {

const std::string kHfMm = std::string(GEMLET_TESTDATA_DIR) + "/hf-mm/";

const test::HfMmModel& E2b() { return test::ConvertHfMm("gemma4_e2b_image_audio"); }

std::shared_ptr<Engine> Load(bool with_mmproj = true) {
  EngineOptions o;
  if (with_mmproj) o.mmproj_path = E2b().mmproj;
  o.n_threads = 2;
  o.thermal.enabled = false;
  o.memory_pressure_path = "";
  auto e = Engine::Load(E2b().model, o);
  EXPECT_TRUE(e.ok()) << e.message();
  return e.ok() ? e.value() : nullptr;
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::vector<float> Floats(const std::vector<int16_t>& samples) {
  std::vector<float> out(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) out[i] = static_cast<float>(samples[i]) / 32768.0f;
  return out;
}

TEST(AudioPieces, ALongClipIsCutInItsPauses) {
  auto engine = Load();
  ASSERT_NE(engine, nullptr);
  const std::vector<int16_t> samples = test::LongClipSamples(70.0);
  auto pieces = engine->EncodeAudioPieces(Bytes(test::Wav16k(samples)));
  ASSERT_TRUE(pieces.ok()) << pieces.message();
  ASSERT_GE(pieces->size(), 3u);
  EXPECT_EQ(pieces->front().start_seconds, 0.0);
  EXPECT_DOUBLE_EQ(pieces->back().end_seconds, 70.0);
  for (size_t i = 0; i < pieces->size(); ++i) {
    const AudioPiece& p = (*pieces)[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(p.media->kind, MediaKind::kAudio);
    EXPECT_LE(p.end_seconds - p.start_seconds, 30.0);
    if (i > 0) {
      EXPECT_EQ(p.start_seconds, (*pieces)[i - 1].end_seconds);  // no gap, no overlap
    }
    if (i + 1 < pieces->size()) {
      EXPECT_GE(p.end_seconds - p.start_seconds, 25.0);  // cut in the window's last 5 s
      // In a pause: the 100 ms around the cut are silent, the tones on either side loud.
      const size_t cut = static_cast<size_t>(std::lround(p.end_seconds * 16000));
      for (size_t k = cut - 800; k < cut + 800; ++k) ASSERT_EQ(samples[k], 0) << "the cut at " << p.end_seconds << " s";
    }
    std::printf("piece %zu: %.2f s to %.2f s, %d soft tokens\n", i, p.start_seconds, p.end_seconds, p.media->n_tokens);
  }
  // Each piece as EncodeAudioPcm encodes its samples; the PCM entry cuts the same.
  const AudioPiece& second = (*pieces)[1];
  const std::vector<float> all = Floats(samples);
  const size_t a = static_cast<size_t>(std::lround(second.start_seconds * 16000));
  const size_t b = static_cast<size_t>(std::lround(second.end_seconds * 16000));
  auto alone = engine->EncodeAudioPcm(std::span<const float>(all.data() + a, b - a), 16000);
  ASSERT_TRUE(alone.ok()) << alone.message();
  EXPECT_EQ(alone.value()->embeddings, second.media->embeddings);
  auto from_pcm = engine->EncodeAudioPiecesPcm(all, 16000);
  ASSERT_TRUE(from_pcm.ok()) << from_pcm.message();
  ASSERT_EQ(from_pcm->size(), pieces->size());
  for (size_t i = 0; i < pieces->size(); ++i) {
    EXPECT_EQ((*from_pcm)[i].end_seconds, (*pieces)[i].end_seconds);
    EXPECT_EQ((*from_pcm)[i].media->embeddings, (*pieces)[i].media->embeddings);
  }
}

TEST(AudioPieces, AShortClipIsOnePieceAndTooLongIsTooLarge) {
  auto engine = Load();
  ASSERT_NE(engine, nullptr);
  auto one = engine->EncodeAudioPiecesFile(test::ShortClipPath());
  ASSERT_TRUE(one.ok()) << one.message();
  ASSERT_EQ(one->size(), 1u);
  auto clip = engine->EncodeAudioFile(test::ShortClipPath());
  ASSERT_TRUE(clip.ok());
  EXPECT_EQ(one->front().media->embeddings, clip.value()->embeddings);
  EXPECT_NEAR(one->front().end_seconds, 27237 / 16000.0, 1e-9);

  AudioOptions minute;
  minute.max_seconds = 60;
  auto too_long = engine->EncodeAudioPieces(Bytes(test::LongClipWav(70.0)), minute);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kTooLarge);
  EXPECT_NE(too_long.message().find("70.0 s"), std::string::npos) << too_long.message();
  EXPECT_NE(too_long.message().find("60 s"), std::string::npos) << too_long.message();
  const std::vector<float> pcm = Floats(test::LongClipSamples(61.0));
  EXPECT_EQ(engine->EncodeAudioPiecesPcm(pcm, 16000, 1, minute).status().code(), StatusCode::kTooLarge);
  // Stereo frames count once: 61 s of stereo is 30.5 s.
  EXPECT_TRUE(engine->EncodeAudioPiecesPcm(pcm, 16000, 2, minute).ok());

  EXPECT_EQ(engine->EncodeAudioPieces({}).status().code(), StatusCode::kError);  // empty
  auto corrupt = engine->EncodeAudioPieces(Bytes(test::LongClipWav(5.0).substr(0, 30)));
  EXPECT_EQ(corrupt.status().code(), StatusCode::kError) << corrupt.message();
  EXPECT_EQ(engine->EncodeAudioPiecesPcm(pcm, 0).status().code(), StatusCode::kInvalidArgument);
  AudioOptions none;
  none.max_seconds = 0;
  EXPECT_EQ(engine->EncodeAudioPieces(Bytes(test::LongClipWav(5.0)), none).status().code(), StatusCode::kInvalidArgument);
  auto deaf = Load(/*with_mmproj=*/false);
  ASSERT_NE(deaf, nullptr);
  auto refused = deaf->EncodeAudioPiecesFile(test::ShortClipPath());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("mmproj"), std::string::npos) << refused.message();
}

TEST(AudioPieces, TranscribeRunsOneGenerationPerPieceAndJoinsThem) {
  auto engine = Load();
  ASSERT_NE(engine, nullptr);
  auto pieces = engine->EncodeAudioPieces(Bytes(test::LongClipWav(70.0)));
  ASSERT_TRUE(pieces.ok()) << pieces.message();
  SessionOptions so;
  so.n_ctx = 1024;
  auto session = Session::Create(engine, so);
  ASSERT_TRUE(session.ok());
  TaskOptions o;
  o.task = "transcribe";
  o.generate.max_tokens = 6;
  o.generate.sampling.temperature = 0;
  std::vector<std::string> each;
  for (const AudioPiece& p : pieces.value()) {
    o.media = {p.media};
    auto r = RunTask(*session.value(), "", o);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->parts, 1);
    each.push_back(r->output);
  }
  o.media.clear();
  for (const AudioPiece& p : pieces.value()) o.media.push_back(p.media);
  std::string streamed;
  auto whole = RunTask(*session.value(), "", o, [&](ChunkKind, std::string_view text) {
    streamed += text;
    return true;
  });
  ASSERT_TRUE(whole.ok()) << whole.message();
  EXPECT_EQ(whole->parts, static_cast<int>(pieces->size()));
  EXPECT_EQ(whole->output, JoinTranscripts(each));
  EXPECT_FALSE(whole->output.empty());
  EXPECT_EQ(whole->stats.generated_tokens, 6 * static_cast<int>(pieces->size()));
  EXPECT_EQ(streamed, whole->output);  // each piece's text streamed, with the seams between them
  std::printf("transcript of %zu pieces: %s\n", pieces->size(), whole->output.c_str());
}

TEST(AudioPieces, JoinTranscriptsSpacesAllButChineseAndJapanese) {
  const auto join = [](std::vector<std::string> v) { return JoinTranscripts(v); };
  EXPECT_EQ(join({"Hello there.", "How are you?"}), "Hello there. How are you?");
  EXPECT_EQ(join({"你好。", "今天天气很好"}), "你好。今天天气很好");
  EXPECT_EQ(join({"the word", "日本語"}), "the word日本語");
  EXPECT_EQ(join({"こんにちは", "world"}), "こんにちはworld");
  EXPECT_EQ(join({"안녕하세요", "반갑습니다"}), "안녕하세요 반갑습니다");  // Korean spaces its words
  EXPECT_EQ(join({"", "one", "", "two"}), "one two");
  EXPECT_EQ(join({}), "");
}

TEST(AudioPieces, TheCApiGivesThePieces) {
  const test::HfMmModel& c = E2b();
  gemlet_engine_options eo = gemlet_engine_options_default();
  eo.mmproj_path = c.mmproj.c_str();
  eo.n_threads = 2;
  gemlet_engine* engine = nullptr;
  ASSERT_EQ(gemlet_engine_load(c.model.c_str(), &eo, &engine), GEMLET_OK) << gemlet_last_error();
  const std::string wav = test::LongClipWav(70.0);
  gemlet_audio_pieces* pieces = nullptr;
  ASSERT_EQ(gemlet_engine_encode_audio_pieces(engine, Bytes(wav).data(), wav.size(), nullptr, &pieces), GEMLET_OK)
      << gemlet_last_error();
  auto cpp = Load()->EncodeAudioPieces(Bytes(wav));
  ASSERT_TRUE(cpp.ok());
  ASSERT_EQ(gemlet_audio_pieces_count(pieces), cpp->size());
  for (size_t i = 0; i < cpp->size(); ++i) {
    gemlet_media* media = nullptr;
    double start = -1, end = -1;
    ASSERT_EQ(gemlet_audio_pieces_at(pieces, i, &media, &start, &end), GEMLET_OK);
    EXPECT_EQ(start, (*cpp)[i].start_seconds);
    EXPECT_EQ(end, (*cpp)[i].end_seconds);
    ASSERT_EQ(gemlet_media_n_tokens(media), (*cpp)[i].media->n_tokens);
    EXPECT_EQ(std::memcmp(gemlet_media_embeddings(media), (*cpp)[i].media->embeddings.data(),
                          (*cpp)[i].media->embeddings.size() * sizeof(float)),
              0);
    gemlet_media_free(media);
  }
  EXPECT_EQ(gemlet_audio_pieces_at(pieces, cpp->size(), nullptr, nullptr, nullptr), GEMLET_INVALID_ARGUMENT);

  // The transcribe task over the pieces, as the C++ API runs it.
  std::vector<gemlet_media*> media(cpp->size());
  for (size_t i = 0; i < media.size(); ++i) ASSERT_EQ(gemlet_audio_pieces_at(pieces, i, &media[i], nullptr, nullptr), GEMLET_OK);
  gemlet_session_options so = gemlet_session_options_default();
  so.n_ctx = 1024;
  gemlet_session* session = nullptr;
  ASSERT_EQ(gemlet_session_create(engine, &so, &session), GEMLET_OK) << gemlet_last_error();
  gemlet_task_options task = gemlet_task_options_default();
  task.task = "transcribe";
  task.media = media.data();
  task.n_media = media.size();
  gemlet_generate_options g = gemlet_generate_options_default();
  g.max_tokens = 4;
  g.temperature = 0;
  const char* output = nullptr;
  ASSERT_EQ(gemlet_task_run(session, "", &task, &g, &output, nullptr), GEMLET_OK) << gemlet_last_error();
  SessionOptions cpp_so;
  cpp_so.n_ctx = 1024;
  auto cpp_session = Session::Create(Load(), cpp_so);
  ASSERT_TRUE(cpp_session.ok());
  TaskOptions o;
  o.task = "transcribe";
  o.generate.max_tokens = 4;
  o.generate.sampling.temperature = 0;
  for (const AudioPiece& p : cpp.value()) o.media.push_back(p.media);
  auto want = RunTask(*cpp_session.value(), "", o);
  ASSERT_TRUE(want.ok()) << want.message();
  EXPECT_EQ(std::string(output), want->output);
  EXPECT_EQ(want->parts, static_cast<int>(media.size()));
  for (gemlet_media* m : media) gemlet_media_free(m);
  gemlet_session_free(session);
  gemlet_audio_pieces_free(pieces);

  gemlet_audio_options minute = gemlet_audio_options_default();
  EXPECT_EQ(minute.max_seconds, 600.0);
  minute.max_seconds = 60;
  EXPECT_EQ(gemlet_engine_encode_audio_pieces(engine, Bytes(wav).data(), wav.size(), &minute, &pieces), GEMLET_TOO_LARGE);
  EXPECT_STREQ(gemlet_status_name(GEMLET_TOO_LARGE), "too large");
  std::vector<float> pcm = Floats(test::LongClipSamples(40.0));
  ASSERT_EQ(gemlet_engine_encode_audio_pieces_pcm(engine, pcm.data(), pcm.size(), 16000, 1, &minute, &pieces), GEMLET_OK);
  EXPECT_EQ(gemlet_audio_pieces_count(pieces), 2u);
  gemlet_audio_pieces_free(pieces);
  ASSERT_EQ(gemlet_engine_encode_audio_pieces_file(engine, test::ShortClipPath().c_str(), nullptr, &pieces), GEMLET_OK);
  EXPECT_EQ(gemlet_audio_pieces_count(pieces), 1u);
  gemlet_audio_pieces_free(pieces);
  gemlet_engine_free(engine);
}

}  // namespace
}  // namespace gemlet
