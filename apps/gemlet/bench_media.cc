// `gemlet bench --image FILE | --audio FILE --mmproj M`: what a photo or a clip costs before the
// model can answer. Times the public API's own path (Engine::EncodeImageFile / EncodeAudioFile:
// decoding, preprocessing and the tower), the path the tests check against HF, so the figure is the
// tested code's. For a clip it also reports encode time per second of audio, the real-time factor,
// and the time from the end of the clip to the first token of its transcription (encode, the
// prompt's prefill, one sampled token): what a user waits after they stop speaking.
#include "bench_media.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "cli_common.h"
#include "command.h"
#include "gemlet/gemlet.hpp"

namespace gemlet::cli {
namespace {

struct MediaBenchFlags {
  std::string model_path, mmproj, image, audio;
  int threads = 0;
  int reps = 5;
  bool json = false;
};

struct MediaBenchResult {
  std::vector<double> encode_ms, first_token_ms;
  double clip_seconds = 0;
  int soft_tokens = 0;
  uint64_t peak_anon = 0;
  MemoryUsage memory;
};

// The clip's length: its pieces' end (the decoder's own sample count, resampled), so the ratio
// per second of audio divides by what the tower heard.
Result<double> ClipSeconds(const Engine& engine, const std::string& path) {
  AudioOptions options;
  auto pieces = engine.EncodeAudioPiecesFile(path, options);
  if (!pieces.ok()) return pieces.status();
  return pieces->empty() ? 0.0 : pieces->back().end_seconds;
}

// Encode, prefill and one token: the clip's transcription request as `gemlet transcribe` makes it.
Result<double> FirstTokenMs(const std::shared_ptr<Engine>& engine, const SessionOptions& session_options,
                            const std::string& path) {
  const double t0 = Now();
  auto clip = engine->EncodeAudioFile(path);
  if (!clip.ok()) return clip.status();
  Message message;
  message.role = "user";
  message.parts.push_back(ContentPart{.text = {}, .media = *clip});
  message.parts.push_back(ContentPart{.text = "Transcribe this audio.", .media = nullptr});
  auto prompt = engine->ChatPrompt(std::span<const Message>(&message, 1));
  if (!prompt.ok()) return prompt.status();
  auto session = Session::Create(engine, session_options);
  if (!session.ok()) return session.status();
  GenerateOptions options;
  options.max_tokens = 1;
  options.sampling.temperature = 0;
  auto reply = (*session)->Generate(*prompt, options);
  if (!reply.ok()) return reply.status();
  return (Now() - t0) * 1e3;
}

Status Measure(const MediaBenchFlags& f, MediaBenchResult* out) {
  PeakAnonSampler sampler;
  EngineOptions engine_options;
  engine_options.mmproj_path = f.mmproj;
  engine_options.n_threads = f.threads;
  engine_options.thermal.enabled = false;  // the engine is measured, not the governor's pacing
  auto loaded = Engine::Load(f.model_path, engine_options);
  if (!loaded.ok()) return loaded.status();
  std::shared_ptr<Engine> engine = loaded.value();
  const bool audio = !f.audio.empty();
  if (audio) {
    auto seconds = ClipSeconds(*engine, f.audio);
    if (!seconds.ok()) return seconds.status();
    out->clip_seconds = *seconds;
  }
  // One untimed round first: page faults of the mmap'd tower and the first allocation of every
  // buffer are a load's cost, not an image's.
  for (int rep = -1; rep < f.reps; ++rep) {
    const double t0 = Now();
    auto media = audio ? engine->EncodeAudioFile(f.audio) : engine->EncodeImageFile(f.image);
    const double ms = (Now() - t0) * 1e3;
    if (!media.ok()) return media.status();
    out->soft_tokens = (*media)->n_tokens;
    if (rep >= 0) out->encode_ms.push_back(ms);
  }
  if (audio) {
    SessionOptions session_options;
    session_options.n_threads = f.threads;
    session_options.n_ctx = out->soft_tokens + 64;
    for (int rep = 0; rep < f.reps; ++rep) {
      auto ms = FirstTokenMs(engine, session_options, f.audio);
      if (!ms.ok()) return ms.status();
      out->first_token_ms.push_back(*ms);
    }
  }
  out->memory = engine->MeasureMemory();
  sampler.Stop();
  out->peak_anon = sampler.peak();
  return Status::Ok();
}

void Print(const MediaBenchFlags& f, const MediaBenchResult& r) {
  const bool audio = !f.audio.empty();
  const double encode = Median(r.encode_ms);
  const double mib = 1.0 / (1 << 20);
  if (f.json) {
    nlohmann::json j = {{"cpu_info", CpuInfo()},
                        {"model", f.model_path},
                        {"mmproj", f.mmproj},
                        {"input", audio ? f.audio : f.image},
                        {"kind", audio ? "audio" : "image"},
                        {"threads", f.threads},
                        {"soft_tokens", r.soft_tokens},
                        {"encode_ms", r.encode_ms},
                        {"encode_ms_median", encode},
                        {"peak_rss_bytes", r.memory.peak_rss_bytes},
                        {"peak_anon_bytes", r.peak_anon}};
    if (audio) {
      j["clip_seconds"] = r.clip_seconds;
      j["encode_ms_per_audio_second"] = encode / r.clip_seconds;
      j["real_time_factor"] = r.clip_seconds * 1e3 / encode;
      j["first_token_ms"] = r.first_token_ms;
      j["first_token_ms_median"] = Median(r.first_token_ms);
    }
    std::printf("%s\n", j.dump(1).c_str());
    return;
  }
  std::printf("cpu: %s, %d threads\n", CpuInfo().c_str(), f.threads);
  std::printf("%s: %d soft tokens, encode %.1f ms (median of %zu)\n", audio ? f.audio.c_str() : f.image.c_str(),
              r.soft_tokens, encode, r.encode_ms.size());
  if (audio) {
    std::printf("clip %.2f s: %.1f ms per second of audio, %.1fx faster than real time\n", r.clip_seconds,
                encode / r.clip_seconds, r.clip_seconds * 1e3 / encode);
    std::printf("end of clip to first token: %.1f ms (median of %zu)\n", Median(r.first_token_ms),
                r.first_token_ms.size());
  }
  std::printf("peak RSS %.0f MiB, peak anonymous %.0f MiB\n", r.memory.peak_rss_bytes * mib, r.peak_anon * mib);
}

}  // namespace

int RunMediaBench(int argc, char** argv) {
  CLI::App app{"Measure encoding an image or a clip through the model's towers (the public API's path: decode,\n"
               "preprocess, encode), peak memory, and for a clip the time from its end to the first token"};
  app.name("gemlet bench");
  MediaBenchFlags f;
  AddModelFileFlag(app, f.model_path);
  app.add_option("--mmproj", f.mmproj, "the model's towers (llama.cpp mmproj GGUF)")->required();
  auto* image = app.add_option("--image", f.image, "an image file to encode");
  auto* audio = app.add_option("--audio", f.audio, "an audio file to encode");
  image->excludes(audio);
  app.add_option("-t,--threads", f.threads, "threads (default: every core)")->check(CLI::NonNegativeNumber);
  app.add_option("-r,--repetitions", f.reps, "timed repetitions (after one untimed)")->check(CLI::PositiveNumber);
  app.add_flag("--json", f.json, "print one JSON object");
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (f.image.empty() && f.audio.empty()) return UsageError("--image FILE or --audio FILE: what to encode");
  auto model = ResolveModelPath(f.model_path);
  if (!model.ok()) return Fail(model.status());
  f.model_path = *model;
  if (f.threads == 0) f.threads = ThreadsOrAllCores(0);
  MediaBenchResult result;
  if (Status s = Measure(f, &result); !s.ok()) return Fail(s);
  Print(f, result);
  return 0;
}

}  // namespace gemlet::cli
