// `gemlet logits`: raw logits of a forward pass (or of greedy decode steps) for tests and acceptance,
// with images and clips placed on the runs of their placeholders in --tokens (HF's processor output).
#include <CLI/CLI.hpp>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cli_common.h"
#include "command.h"
#include "gemlet/gemlet.hpp"

namespace gemlet::cli {
namespace {

bool ParseTokenList(const std::string& text, std::vector<int32_t>* out, std::string* error) {
  std::string cleaned;
  for (char c : text) cleaned += (c == '[' || c == ']') ? ' ' : c;
  size_t i = 0;
  while (i < cleaned.size()) {
    while (i < cleaned.size() && (cleaned[i] == ' ' || cleaned[i] == ',')) ++i;
    if (i == cleaned.size()) break;
    size_t end = i;
    while (end < cleaned.size() && cleaned[end] != ',' && cleaned[end] != ' ') ++end;
    const std::string item = cleaned.substr(i, end - i);
    char* stop = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &stop, 10);
    if (stop == item.c_str() || *stop != '\0' || errno != 0 || v < 0 || v > INT32_MAX) {
      *error = "invalid token id '" + item + "' in --tokens";
      return false;
    }
    out->push_back(static_cast<int32_t>(v));
    i = end;
  }
  if (out->empty()) {
    *error = "--tokens is empty";
    return false;
  }
  return true;
}

// A raw little-endian file of T (HF's pixel_values.f32, image_position_ids.i32).
template <class T>
Result<std::vector<T>> ReadRawFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot open '" + path + "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty() || bytes.size() % sizeof(T) != 0) {
    return Status::Error("'" + path + "' is not a whole number of " + std::to_string(sizeof(T)) + "-byte values");
  }
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// Media of one kind, in prompt order, on the runs of that kind's placeholder in tokens: one run per
// image or clip, as long as its soft tokens. Spans of both kinds are merged in position order.
Status PlaceMedia(const Engine& engine, MediaKind kind, const std::vector<std::shared_ptr<const EncodedMedia>>& items,
                  Prompt* prompt) {
  if (items.empty()) return Status::Ok();
  const char* what = kind == MediaKind::kAudio ? "clip" : "image";
  const Result<int32_t> media_token = engine.MediaToken(kind);
  if (!media_token.ok()) return media_token.status();
  const int32_t placeholder = media_token.value();
  const std::vector<int32_t>& t = prompt->tokens;
  size_t placed = 0;
  for (size_t i = 0; i < t.size();) {
    if (t[i] != placeholder) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < t.size() && t[end] == placeholder) ++end;
    // Media with its own end marker (Gemma 3n audio) covers that token as well.
    if (placed < items.size() && items[placed]->end_token >= 0 && end < t.size() && t[end] == items[placed]->end_token) ++end;
    if (placed == items.size()) {
      return Status::Error("--tokens holds more runs of the " + std::string(what) + " placeholder (" +
                           std::to_string(placeholder) + ") than the " + std::to_string(items.size()) + " given");
    }
    if (static_cast<int>(end - i) != items[placed]->n_tokens) {
      return Status::Error(std::string(what) + " " + std::to_string(placed + 1) + " has " +
                           std::to_string(items[placed]->n_tokens) + " soft tokens, but its run of placeholders at position " +
                           std::to_string(i) + " has " + std::to_string(end - i));
    }
    prompt->media.push_back({static_cast<int>(i), items[placed++]});
    i = end;
  }
  if (placed != items.size()) {
    return Status::Error(std::to_string(items.size()) + " " + what + "(s) given, but --tokens holds " +
                         std::to_string(placed) + " run(s) of the " + what + " placeholder (" +
                         std::to_string(placeholder) + ")");
  }
  std::sort(prompt->media.begin(), prompt->media.end(),
            [](const MediaSpan& a, const MediaSpan& b) { return a.position < b.position; });
  return Status::Ok();
}

// The media flags of gemlet logits: files, or HF's own preprocessed inputs.
struct LogitsMedia {
  std::vector<std::string> image_paths, pixel_paths, position_paths, audio_paths, feature_paths, feature_mask_paths;
  int max_soft_tokens = 0;
  bool pan_and_scan = false;  // Gemma 3: each --image's crops on the placeholder runs after its own
};

// A second file per entry of `paths` (positions beside pixels, masks beside features), read as T.
template <class T>
Result<std::vector<T>> Companion(const std::vector<std::string>& companions, size_t i) {
  if (companions.empty()) return std::vector<T>();
  return ReadRawFile<T>(companions[i]);
}

// --tokens with the media the flags give, encoded and placed on their placeholder runs.
Result<Prompt> MediaPrompt(const Engine& engine, const std::vector<int32_t>& tokens, const LogitsMedia& m) {
  std::vector<std::shared_ptr<const EncodedMedia>> images, clips;
  // Each encoding in turn; the first failure names its file.
  auto add = [](Result<std::shared_ptr<const EncodedMedia>> r, const std::string& path,
                std::vector<std::shared_ptr<const EncodedMedia>>* to) -> Status {
    if (!r.ok()) return Status::Error(path + ": " + r.message());
    to->push_back(r.value());
    return Status::Ok();
  };
  ImageOptions image_options;
  image_options.max_soft_tokens = m.max_soft_tokens;
  image_options.pan_and_scan.enabled = m.pan_and_scan;
  for (const std::string& path : m.image_paths) {
    if (Status s = add(engine.EncodeImageFile(path, image_options), path, &images); !s.ok()) return s;
    // Gemma3Processor's prompt holds the whole image, then each crop in its own markup.
    const std::vector<std::shared_ptr<const EncodedMedia>> crops = images.back()->crops;
    images.insert(images.end(), crops.begin(), crops.end());
  }
  for (size_t i = 0; i < m.pixel_paths.size(); ++i) {
    auto values = ReadRawFile<float>(m.pixel_paths[i]);
    auto positions = Companion<int32_t>(m.position_paths, i);
    if (!values.ok() || !positions.ok()) return values.ok() ? positions.status() : values.status();
    if (Status s = add(engine.EncodeImagePixels(values.value(), positions.value()), m.pixel_paths[i], &images); !s.ok()) {
      return s;
    }
  }
  for (const std::string& path : m.audio_paths) {
    if (Status s = add(engine.EncodeAudioFile(path), path, &clips); !s.ok()) return s;
  }
  for (size_t i = 0; i < m.feature_paths.size(); ++i) {
    auto values = ReadRawFile<float>(m.feature_paths[i]);
    auto mask = Companion<uint8_t>(m.feature_mask_paths, i);
    if (!values.ok() || !mask.ok()) return values.ok() ? mask.status() : values.status();
    if (Status s = add(engine.EncodeAudioFeatures(values.value(), mask.value()), m.feature_paths[i], &clips); !s.ok()) {
      return s;
    }
  }
  Prompt prompt{tokens, {}};
  for (auto [kind, items] : {std::pair(MediaKind::kImage, &images), std::pair(MediaKind::kAudio, &clips)}) {
    if (Status s = PlaceMedia(engine, kind, *items, &prompt); !s.ok()) return s;
  }
  return prompt;
}

int ArgMax(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) best = row[i] > row[best] ? i : best;
  return best;
}

int RunLogits(int argc, char** argv) {
  CLI::App app{"Write the logits of a forward pass as raw little-endian float32, row-major [rows, n_vocab]"};
  app.name("gemlet logits");
  std::string model_path, tokens_text, out_path;
  std::string kv_type_name = "f32";  // the logits are compared with f32 references: no rounding in the cache
  int decode = 0, threads = 0, ctx = 0, batch = 512;
  AddModelFileFlag(app, model_path);
  app.add_option("--tokens", tokens_text, "token ids, comma separated (e.g. 2,17,9)")->required();
  app.add_option("--out", out_path, "output file for the logits")->required();
  app.add_option("--decode", decode, "prefill the tokens, then greedily decode N tokens and write their N rows")
      ->check(NonNegative());
  AddThreadsFlag(app, threads);
  AddContextFlag(app, ctx, "prompt + decode");
  AddBatchFlag(app, batch);
  AddKvTypeFlag(app, kv_type_name);
  EngineOptions engine_options;
  AddKernelFlags(app, engine_options.kernels);
  LogitsMedia media;
  app.add_option("--mmproj", engine_options.mmproj_path, "the model's vision tower (llama.cpp mmproj GGUF)");
  app.add_option("--image", media.image_paths,
                 "an image file (PNG, JPEG, WebP, HEIC) for the next run of image placeholders in --tokens; "
                 "repeatable, in prompt order")
      ->check(CLI::ExistingFile);
  app.add_option("--pixel-values", media.pixel_paths,
                 "an image as HF's processor preprocessed it (raw float32), instead of --image; repeatable")
      ->check(CLI::ExistingFile);
  app.add_option("--pixel-positions", media.position_paths,
                 "Gemma 4: each --pixel-values' patch positions (raw int32 [rows, 2], HF's image_position_ids)")
      ->check(CLI::ExistingFile);
  app.add_option("--audio", media.audio_paths,
                 "an audio clip (WAV, FLAC, Ogg, MP3) for the next run of audio placeholders in --tokens; repeatable")
      ->check(CLI::ExistingFile);
  app.add_option("--audio-features", media.feature_paths,
                 "a clip as HF's feature extractor gave it (raw float32 [frames, mels]), instead of --audio; repeatable")
      ->check(CLI::ExistingFile);
  app.add_option("--audio-mask", media.feature_mask_paths, "each --audio-features' valid frames (raw uint8, 1 = valid)")
      ->check(CLI::ExistingFile);
  app.add_flag("--hf-eager-audio-mask", engine_options.audio_hf_eager_mask,
               "Gemma 4 audio with transformers' eager attention mask (to compare with goldens made with it)");
  app.add_option("--max-soft-tokens", media.max_soft_tokens, "Gemma 4: soft tokens per --image at most (0: the mmproj's)")
      ->check(NonNegative());
  app.add_flag("--pan-and-scan", media.pan_and_scan,
               "Gemma 3: each --image with its pan-and-scan crops (the processor's default sizes), the crops on the "
               "placeholder runs after the image's");
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (std::string err = Validate(engine_options.kernels); !err.empty()) return UsageError(err);
  if (!media.image_paths.empty() && !media.pixel_paths.empty()) return UsageError("give images as --image or --pixel-values, not both");
  if (!media.position_paths.empty() && media.position_paths.size() != media.pixel_paths.size()) {
    return UsageError("--pixel-positions needs one file per --pixel-values");
  }
  if (!media.audio_paths.empty() && !media.feature_paths.empty()) return UsageError("give clips as --audio or --audio-features, not both");
  if (!media.feature_mask_paths.empty() && media.feature_mask_paths.size() != media.feature_paths.size()) {
    return UsageError("--audio-mask needs one file per --audio-features");
  }
  if ((!media.image_paths.empty() || !media.pixel_paths.empty() || !media.audio_paths.empty() || !media.feature_paths.empty()) &&
      engine_options.mmproj_path.empty()) {
    return UsageError("images and audio need the model's towers: --mmproj FILE");
  }

  std::vector<int32_t> tokens;
  std::string error;
  if (!ParseTokenList(tokens_text, &tokens, &error)) return UsageError(error);

  auto engine = Engine::Load(model_path, engine_options);
  if (!engine.ok()) return Fail(engine.message());
  const int n_vocab = engine.value()->info().n_vocab;

  Result<Prompt> prompt = MediaPrompt(*engine.value(), tokens, media);
  if (!prompt.ok()) return Fail(prompt.message());

  SessionOptions options;
  options.n_ctx = ContextOrFit(ctx, static_cast<int>(tokens.size()) + decode);
  options.n_threads = threads;
  options.max_batch = batch;
  options.kv_cache_type = KvTypeOf(kv_type_name);
  auto session = Session::Create(engine.value(), options);
  if (!session.ok()) return Fail(session.message());

  std::FILE* out = std::fopen(out_path.c_str(), "wb");
  if (out == nullptr) return Fail("cannot open '" + out_path + "' for writing");
  auto write_rows = [&](const std::vector<float>& rows) {
    return std::fwrite(rows.data(), sizeof(float), rows.size(), out) == rows.size();
  };

  bool ok = true;
  if (decode == 0) {
    std::vector<float> logits(tokens.size() * static_cast<size_t>(n_vocab));
    Status s = session.value()->Evaluate(prompt.value(), logits.data(), /*all_logits=*/true);
    if (!s.ok()) {
      std::fclose(out);
      std::remove(out_path.c_str());
      return Fail(s.message());
    }
    ok = write_rows(logits);
  } else {
    std::vector<float> row(static_cast<size_t>(n_vocab));
    std::vector<int32_t> generated;
    Prompt next = prompt.value();
    for (int step = 0; step < decode && ok; ++step) {
      Status s = session.value()->Evaluate(next, row.data(), /*all_logits=*/false);
      if (!s.ok()) {
        std::fclose(out);
        std::remove(out_path.c_str());
        return Fail(s.message());
      }
      ok = write_rows(row);
      const int id = ArgMax(row.data(), n_vocab);  // greedy, never stopping at EOS
      generated.push_back(id);
      next = Prompt{{id}, {}};
    }
    std::printf("[");
    for (size_t i = 0; i < generated.size(); ++i) std::printf("%s%d", i ? "," : "", generated[i]);
    std::printf("]\n");
  }
  if (std::fclose(out) != 0 || !ok) {
    std::remove(out_path.c_str());
    return Fail("failed writing '" + out_path + "'");
  }
  return 0;
}

}  // namespace

GEMLET_COMMAND("logits", "write raw logits of a forward pass or of greedy decode steps", RunLogits);

}  // namespace gemlet::cli
