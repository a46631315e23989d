// Hugging Face tokenizer.json or SentencePiece tokenizer.model (+ tokenizer_config.json, config.json)
// -> the tokenizer.ggml.* keys that llama.cpp's convert_hf_to_gguf.py writes for Gemma 1/2/3
// ("llama") and Gemma 4 ("gemma4").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace gemlet {

class GgufWriter;

// The tokenizer metadata of one model, owning its strings, in the form it takes in a GGUF file.
struct TokenizerMetadata {
  std::string model;  // tokenizer.ggml.model: "llama" (Gemma 1/2/3) or "gemma4"
  std::string pre;    // tokenizer.ggml.pre; not written when empty
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // TokenType values
  // tokenizer.ggml.merges. Written only for "gemma4", as llama.cpp does; a "llama" vocabulary keeps
  // them here only when asked (ReadHfTokenizer's keep_merges), to encode by HF's ranks in memory.
  std::vector<std::string> merges;
  std::optional<uint32_t> bos, eos, unk, sep, pad, mask, eot;
  std::optional<bool> add_bos, add_eos, add_sep, add_space_prefix;
  bool add_bos_last = false;  // Gemma 4: add_bos_token is forced on after everything else
  std::optional<std::string> chat_template;
  std::vector<std::pair<std::string, std::string>> named_chat_templates;  // tokenizer.chat_template.NAME
};

// Reads HF_DIR/tokenizer.json, and tokenizer_config.json, config.json, added_tokens.json,
// chat_template.jinja / chat_template.json when present. `arch` is the GGUF architecture
// ("gemma", "gemma2", "gemma3", "gemma3n", "gemma4"); empty means: from config.json, else guessed
// from the vocabulary. Without tokenizer.model, the SentencePiece scores llama.cpp would copy from
// it are rebuilt from the merge ranks (score = -rank of the first merge producing the piece), which
// orders merges exactly as tokenizer.json does.
Result<TokenizerMetadata> ReadHfTokenizer(const std::string& hf_dir, const std::string& arch,
                                          bool keep_merges = false);
// Gemma 1/2/3 from SentencePiece's tokenizer.model, as llama.cpp's _set_vocab_sentencepiece: the
// ModelProto's pieces, scores and types; hf_dir's tokenizer_config.json (added_tokens_decoder,
// special tokens, chat template), config.json (vocabulary size, special ids), added_tokens.json and
// tokenizer.json (post-processor and added tokens, for special ids only) when present. Refuses a
// corrupt file, a unigram/word/char model, a normalizer beyond ' ' -> U+2581, and Gemma 4.
Result<TokenizerMetadata> ReadSpmTokenizer(const std::string& model_path, const std::string& hf_dir,
                                           const std::string& arch);
// A tokenizer.json or a tokenizer.model, told apart by content; hf_dir (default: the file's
// folder) supplies the other files; `arch` as for ReadHfTokenizer.
Result<TokenizerMetadata> ReadTokenizerFile(const std::string& path, const std::string& hf_dir, const std::string& arch,
                                            bool keep_merges = false);
// ReadTokenizerFile(path, its folder, arch from config.json).
Result<TokenizerMetadata> ReadHfTokenizerFile(const std::string& path, bool keep_merges = false);

void WriteTokenizerMetadata(const TokenizerMetadata& meta, GgufWriter& writer);

// ReadHfTokenizer + WriteTokenizerMetadata.
Status AddHfTokenizerMetadata(const std::string& hf_dir, const std::string& arch, GgufWriter& writer);
// ReadTokenizerFile + WriteTokenizerMetadata: what `gemlet convert` calls.
Status AddTokenizerMetadata(const std::string& path, const std::string& hf_dir, const std::string& arch,
                            GgufWriter& writer);

// A vocabulary straight from metadata, as if written to GGUF and loaded back.
Result<Vocab> VocabFromMetadata(const TokenizerMetadata& meta);

}  // namespace gemlet
