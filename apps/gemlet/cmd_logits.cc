// `gemlet logits`: raw logits of a forward pass (or of greedy decode steps) for tests and acceptance,
// with images placed on the runs of image placeholders in --tokens (HF's processor output).
#include <CLI/CLI.hpp>

#include <cerrno>
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

// The images, in prompt order, on the runs of image placeholders in tokens: one run per image, as
// long as the image's soft tokens.
Result<Prompt> PlaceImages(const Engine& engine, std::vector<int32_t> tokens,
                           const std::vector<std::shared_ptr<const EncodedMedia>>& images) {
  Prompt prompt{std::move(tokens), {}};
  if (images.empty()) return prompt;
  const Result<int32_t> image_token = engine.MediaToken(MediaKind::kImage);
  if (!image_token.ok()) return image_token.status();
  const int32_t placeholder = image_token.value();
  const std::vector<int32_t>& t = prompt.tokens;
  for (size_t i = 0; i < t.size();) {
    if (t[i] != placeholder) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < t.size() && t[end] == placeholder) ++end;
    const size_t k = prompt.media.size();
    if (k == images.size()) {
      return Status::Error("--tokens holds more runs of the image placeholder (" + std::to_string(placeholder) +
                           ") than the " + std::to_string(images.size()) + " image(s) given");
    }
    if (static_cast<int>(end - i) != images[k]->n_tokens) {
      return Status::Error("image " + std::to_string(k + 1) + " has " + std::to_string(images[k]->n_tokens) +
                           " soft tokens, but its run of placeholders at position " + std::to_string(i) + " has " +
                           std::to_string(end - i));
    }
    prompt.media.push_back({static_cast<int>(i), images[k]});
    i = end;
  }
  if (prompt.media.size() != images.size()) {
    return Status::Error(std::to_string(images.size()) + " image(s) given, but --tokens holds " +
                         std::to_string(prompt.media.size()) + " run(s) of the image placeholder (" +
                         std::to_string(placeholder) + ")");
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
  std::vector<std::string> image_paths, pixel_paths, position_paths;
  int max_soft_tokens = 0;
  app.add_option("--mmproj", engine_options.mmproj_path, "the model's vision tower (llama.cpp mmproj GGUF)");
  app.add_option("--image", image_paths,
                 "an image file (PNG, JPEG, WebP, HEIC) for the next run of image placeholders in --tokens; "
                 "repeatable, in prompt order")
      ->check(CLI::ExistingFile);
  app.add_option("--pixel-values", pixel_paths,
                 "an image as HF's processor preprocessed it (raw float32), instead of --image; repeatable")
      ->check(CLI::ExistingFile);
  app.add_option("--pixel-positions", position_paths,
                 "Gemma 4: each --pixel-values' patch positions (raw int32 [rows, 2], HF's image_position_ids)")
      ->check(CLI::ExistingFile);
  app.add_option("--max-soft-tokens", max_soft_tokens, "Gemma 4: soft tokens per --image at most (0: the mmproj's)")
      ->check(NonNegative());
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (std::string err = Validate(engine_options.kernels); !err.empty()) return UsageError(err);
  if (!image_paths.empty() && !pixel_paths.empty()) return UsageError("give images as --image or --pixel-values, not both");
  if (!position_paths.empty() && position_paths.size() != pixel_paths.size()) {
    return UsageError("--pixel-positions needs one file per --pixel-values");
  }
  if ((!image_paths.empty() || !pixel_paths.empty()) && engine_options.mmproj_path.empty()) {
    return UsageError("images need the model's vision tower: --mmproj FILE");
  }

  std::vector<int32_t> tokens;
  std::string error;
  if (!ParseTokenList(tokens_text, &tokens, &error)) return UsageError(error);

  auto engine = Engine::Load(model_path, engine_options);
  if (!engine.ok()) return Fail(engine.message());
  const int n_vocab = engine.value()->info().n_vocab;

  std::vector<std::shared_ptr<const EncodedMedia>> images;
  ImageOptions image_options;
  image_options.max_soft_tokens = max_soft_tokens;
  for (const std::string& path : image_paths) {
    auto image = engine.value()->EncodeImageFile(path, image_options);
    if (!image.ok()) return Fail(image.message());
    images.push_back(image.value());
  }
  for (size_t i = 0; i < pixel_paths.size(); ++i) {
    auto values = ReadRawFile<float>(pixel_paths[i]);
    if (!values.ok()) return Fail(values.message());
    std::vector<int32_t> positions;
    if (!position_paths.empty()) {
      auto read = ReadRawFile<int32_t>(position_paths[i]);
      if (!read.ok()) return Fail(read.message());
      positions = std::move(read).value();
    }
    auto image = engine.value()->EncodeImagePixels(values.value(), positions);
    if (!image.ok()) return Fail(pixel_paths[i] + ": " + image.message());
    images.push_back(image.value());
  }
  auto prompt = PlaceImages(*engine.value(), tokens, images);
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
