// `gemlet tokenize (-m MODEL.gguf | --tokenizer tokenizer.json|tokenizer.model)`: text on stdin -> token ids as JSON.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "command.h"
#include "gemlet/gemlet.hpp"
#include "gemlet/json_input.hpp"

namespace gemlet::cli {
namespace {

using json = nlohmann::json;

struct TokenizeFlags {
  bool add_special = false;
  bool pieces = false;
  bool parse_special = true;
};

// Ids as a JSON array, or {"ids": [...], "pieces": [...]} with --pieces.
std::string Render(const TextTokenizer& tok, const std::vector<int32_t>& ids, const TokenizeFlags& flags) {
  json out;
  if (flags.pieces) {
    json pieces = json::array();
    for (int32_t id : ids) pieces.push_back(tok.Piece(id));
    out = json{{"ids", ids}, {"pieces", pieces}};
  } else {
    out = ids;
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<int32_t> Tokenize(const TextTokenizer& tok, const std::string& text, const TokenizeFlags& flags) {
  return tok.Encode(text, {.add_special = flags.add_special, .parse_special = flags.parse_special});
}

int RunTokenize(int argc, char** argv) {
  CLI::App app{"Tokenize text read from stdin and print the token ids as a JSON array.", "gemlet tokenize"};
  std::string model_path, tokenizer_path;
  TokenizeFlags flags;
  bool jsonl = false, no_parse_special = false;
  auto* model_opt = app.add_option("-m,--model", model_path, "a GGUF model (its tokenizer.ggml.* metadata)");
  auto* tok_opt = app.add_option("--tokenizer", tokenizer_path,
                                 "a Hugging Face tokenizer.json or a SentencePiece tokenizer.model (Gemma 1-3); "
                                 "tokenizer_config.json and config.json are read from the same folder when present");
  model_opt->excludes(tok_opt);
  app.add_flag("--add-special", flags.add_special, "add BOS (and EOS) as the model's tokenizer does");
  app.add_flag("--pieces", flags.pieces, "print {\"ids\": [...], \"pieces\": [...]}");
  app.add_flag("--jsonl", jsonl, "read one JSON string per line, print one result per line");
  app.add_flag("--no-parse-special", no_parse_special,
               "treat control-token text such as <start_of_turn> as plain text");
  if (std::optional<int> code = ParseFlags(app, argc, argv)) return *code;
  flags.parse_special = !no_parse_special;
  if (model_path.empty() && tokenizer_path.empty()) return UsageError("tokenize: give -m MODEL.gguf or --tokenizer tokenizer.json|tokenizer.model");

  // A model's tokenizer comes from its GGUF metadata alone: the weights are not loaded.
  Result<std::unique_ptr<TextTokenizer>> opened = TextTokenizer::Open(model_path.empty() ? tokenizer_path : model_path);
  if (!opened.ok()) return Fail(opened.message());
  const std::unique_ptr<TextTokenizer>& tok = *opened;

  if (!jsonl) {
    const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    const std::string out = Render(*tok, Tokenize(*tok, text, flags), flags);
    std::printf("%s\n", out.c_str());
    return 0;
  }
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    if (line.empty() || line == "\r") continue;
    const json j = CheckJsonText(line, "stdin line").ok() ? json::parse(line, nullptr, /*allow_exceptions=*/false) : json();
    if (j.is_discarded() || !j.is_string()) {
      return Fail("tokenize: stdin line " + std::to_string(n) + " is not a JSON string");
    }
    const std::string out = Render(*tok, Tokenize(*tok, j.get<std::string>(), flags), flags);
    std::printf("%s\n", out.c_str());
  }
  return 0;
}

}  // namespace

GEMLET_COMMAND("tokenize", "tokenize stdin text with a model's (or a tokenizer.json's / tokenizer.model's) tokenizer",
               RunTokenize);

}  // namespace gemlet::cli
