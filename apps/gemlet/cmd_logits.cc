// `gemlet logits`: raw logits of a forward pass (or of greedy decode steps) for tests and acceptance.
#include <CLI/CLI.hpp>

#include <cerrno>
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
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  if (std::string err = Validate(engine_options.kernels); !err.empty()) return UsageError(err);

  std::vector<int32_t> tokens;
  std::string error;
  if (!ParseTokenList(tokens_text, &tokens, &error)) return UsageError(error);

  auto engine = Engine::Load(model_path, engine_options);
  if (!engine.ok()) return Fail(engine.message());
  const int n_vocab = engine.value()->info().n_vocab;

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
    Status s = session.value()->Evaluate(tokens, logits.data(), /*all_logits=*/true);
    if (!s.ok()) {
      std::fclose(out);
      std::remove(out_path.c_str());
      return Fail(s.message());
    }
    ok = write_rows(logits);
  } else {
    std::vector<float> row(static_cast<size_t>(n_vocab));
    std::vector<int32_t> generated;
    std::vector<int32_t> next = tokens;
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
      next.assign(1, id);
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
