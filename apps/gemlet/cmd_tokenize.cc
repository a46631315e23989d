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
#include "gguf/gguf_reader.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace gemlet::cli {
namespace {

using json = nlohmann::json;

struct TokenizeFlags {
  bool add_special = false;
  bool pieces = false;
  bool parse_special = true;
};

// Ids as a JSON array, or {"ids": [...], "pieces": [...]} with --pieces.
std::string Render(const Tokenizer& tok, const std::vector<int32_t>& ids, const TokenizeFlags& flags) {
  json out;
  if (flags.pieces) {
    json pieces = json::array();
    for (int32_t id : ids) pieces.push_back(std::string(tok.TokenPiece(id)));
    out = json{{"ids", ids}, {"pieces", pieces}};
  } else {
    out = ids;
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<int32_t> Tokenize(const Tokenizer& tok, const std::string& text, const TokenizeFlags& flags) {
  EncodeOptions options;
  options.add_bos = flags.add_special && tok.vocab().add_bos();
  options.add_eos = flags.add_special && tok.vocab().add_eos();
  options.parse_special = flags.parse_special;
  return tok.Encode(text, options);
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

  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Tokenizer> tok;
  if (!model_path.empty()) {
    Result<std::unique_ptr<GgufFile>> f = GgufFile::Open(model_path);
    if (!f.ok()) return Fail(f.message());
    file = std::move(*f);
    Result<Tokenizer> t = Tokenizer::FromGguf(*file);
    if (!t.ok()) return Fail(model_path + ": " + t.message());
    tok = std::make_unique<Tokenizer>(std::move(*t));
  } else {
    Result<TokenizerMetadata> meta = ReadHfTokenizerFile(tokenizer_path, /*keep_merges=*/true);
    if (!meta.ok()) return Fail(meta.message());
    Result<Vocab> vocab = VocabFromMetadata(*meta);
    if (!vocab.ok()) return Fail(tokenizer_path + ": " + vocab.message());
    tok = std::make_unique<Tokenizer>(std::move(*vocab));
  }

  if (!jsonl) {
    const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    const std::string out = Render(*tok, Tokenize(*tok, text, flags), flags);
    std::printf("%s\n", out.c_str());
    return 0;
  }
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    if (line.empty() || line == "\r") continue;
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
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
