// Reading HF tokenizer files into TokenizerMetadata, mirroring llama.cpp's converter for Gemma:
// _set_vocab_sentencepiece (Gemma 1/2/3), LlamaHfVocab (Gemma 4) and gguf-py's SpecialVocab.
#include "tokenizer/hf_tokenizer_json.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "base/json_input.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/spm_model.h"

namespace gemlet {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // U+2581 '▁'

// llama.cpp's gguf.TokenType / SentencePieceTokenTypes.
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

Result<std::optional<json>> ReadJsonIfExists(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::optional<json>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot open " + path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  ASSIGN_OR_RETURN(json j, ParseJson(buffer.str(), path.string(), {.max_bytes = kJsonLargeBytes}));
  return std::optional<json>(std::move(j));
}

bool IsBytePiece(std::string_view t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
  return t.size() == 6 && t.substr(0, 3) == "<0x" && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

// llama.cpp's does_token_look_special: added tokens some models forget to mark special.
bool LooksSpecial(std::string_view t) {
  auto wraps = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.substr(0, open.size()) == open &&
           t.substr(t.size() - close.size()) == close;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wraps("<|", "|>") ||
         wraps("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wraps("<unused", ">");
}

std::string ReplaceAll(std::string s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

// A special-token entry of tokenizer_config.json: "<bos>" or {"content": "<bos>", ...}.
std::optional<std::string> TokenContent(const json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string()) {
    return entry["content"].get<std::string>();
  }
  return std::nullopt;
}

struct AddedToken {
  int64_t id;
  std::string content;
  bool special;
};

// The parts of tokenizer.json the converter needs; views point into `root`.
struct HfTokenizerJson {
  json root;
  std::vector<std::string_view> vocab;  // by id, 0..n-1
  std::unordered_map<std::string_view, int32_t> index;
  std::vector<std::pair<std::string_view, std::string_view>> merges;
  std::vector<AddedToken> added;
  std::string unk_token;
};

Status ParseTokenizerJson(json root, HfTokenizerJson* out) {
  out->root = std::move(root);
  const json& model = out->root.at("model");
  if (model.value("type", std::string("BPE")) != "BPE") {
    return Status::Error("model.type is '" + model.value("type", std::string()) + "', expected 'BPE'");
  }
  const json& vocab = model.at("vocab");
  if (!vocab.is_object()) return Status::Error("model.vocab is not an object");
  out->vocab.assign(vocab.size(), std::string_view());
  out->index.reserve(vocab.size() * 2);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || static_cast<size_t>(id) >= out->vocab.size() || !out->vocab[id].empty()) {
      return Status::Error("model.vocab ids are not 0.." + std::to_string(vocab.size() - 1) + " (bad id " +
                           std::to_string(id) + ")");
    }
    out->vocab[id] = it.key();
    out->index.emplace(out->vocab[id], static_cast<int32_t>(id));
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) out->unk_token = model["unk_token"].get<std::string>();

  const json& merges = model.at("merges");
  out->merges.reserve(merges.size());
  for (const json& m : merges) {
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp = s.size() > 1 ? s.find(' ', 1) : std::string::npos;
      if (sp == std::string::npos) return Status::Error("merge '" + s + "' has no space");
      const std::string_view v(s);
      out->merges.emplace_back(v.substr(0, sp), v.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out->merges.emplace_back(m[0].get_ref<const std::string&>(), m[1].get_ref<const std::string&>());
    } else {
      return Status::Error("unknown merges format in model.merges");
    }
  }

  if (out->root.contains("added_tokens")) {
    for (const json& a : out->root["added_tokens"]) {
      out->added.push_back(AddedToken{a.at("id").get<int64_t>(), a.at("content").get<std::string>(),
                                      a.value("special", false)});
    }
  }
  return Status::Ok();
}

// hparams as llama.cpp sees them: config.json with text_config merged over the root.
std::optional<int64_t> HparamInt(const std::optional<json>& config, const char* key) {
  if (!config) return std::nullopt;
  if (config->contains("text_config") && (*config)["text_config"].is_object()) {
    const json& tc = (*config)["text_config"];
    if (tc.contains(key) && tc[key].is_number_integer()) return tc[key].get<int64_t>();
  }
  if (config->contains(key) && (*config)[key].is_number_integer()) return (*config)[key].get<int64_t>();
  return std::nullopt;
}

// `gemma4_vocab`: whether the vocabulary has Gemma 4's turn markers, for a folder without config.json.
std::string ArchFromConfig(const std::optional<json>& config, bool gemma4_vocab) {
  std::string type;
  if (config) {
    if (config->contains("model_type") && (*config)["model_type"].is_string()) {
      type = (*config)["model_type"].get<std::string>();
    }
    if (config->contains("text_config") && (*config)["text_config"].contains("model_type") &&
        (*config)["text_config"]["model_type"].is_string()) {
      type = (*config)["text_config"]["model_type"].get<std::string>();
    }
  }
  if (type.size() > 5 && type.substr(type.size() - 5) == "_text") type.resize(type.size() - 5);  // gemma3_text
  if (type == "gemma" || type == "gemma2" || type == "gemma3" || type == "gemma3n" || type == "gemma4") return type;
  // No usable config.json: Gemma 4's vocabulary has its turn markers, Gemma 1-3's has <start_of_turn>.
  return gemma4_vocab ? "gemma4" : "gemma3";
}

// gguf-py SpecialVocab: special ids and add_* flags from tokenizer.json's post-processor,
// tokenizer_config.json and config.json.
void ReadSpecialVocab(const HfTokenizerJson& tok, const std::optional<json>& tconfig, const std::optional<json>& config,
                      std::optional<size_t> n_vocab, TokenizerMetadata* meta) {
  auto config_token = [&](const char* typ) -> std::optional<std::string> {
    if (!tconfig) return std::nullopt;
    const std::string key = std::string(typ) + "_token";
    if (!tconfig->contains(key)) return std::nullopt;
    return TokenContent((*tconfig)[key]);
  };
  std::optional<std::string> bos = config_token("bos"), eos = config_token("eos"), cls = config_token("cls");
  // The ids TemplateProcessing itself gives its special tokens ("special_tokens": {"<bos>": {"ids":
  // [2]}}): what HF tokenizers adds when no other file names the token.
  std::map<std::string, int64_t> post_processor_ids;

  // Crude TemplateProcessing parse, as gguf-py does: a leading special token means "add BOS", a
  // trailing one "add EOS".
  if (tok.root.contains("post_processor") && tok.root["post_processor"].is_object()) {
    const json& pp = tok.root["post_processor"];
    std::vector<const json*> processors;
    if (pp.contains("processors") && pp["processors"].is_array()) {
      for (const json& p : pp["processors"]) processors.push_back(&p);
    } else {
      processors.push_back(&pp);
    }
    for (const json* p : processors) {
      if (p->value("type", std::string()) != "TemplateProcessing" || !p->contains("single")) continue;
      const json& single = (*p)["single"];
      if (p->contains("special_tokens") && (*p)["special_tokens"].is_object()) {
        for (const auto& [name, entry] : (*p)["special_tokens"].items()) {
          if (entry.is_object() && entry.contains("ids") && entry["ids"].is_array() && entry["ids"].size() == 1 &&
              entry["ids"][0].is_number_integer()) {
            post_processor_ids[name] = entry["ids"][0].get<int64_t>();
          }
        }
      }
      if (!single.is_array() || single.size() <= 1) continue;
      auto special_id = [](const json& item) -> std::optional<std::string> {
        if (item.contains("SpecialToken") && item["SpecialToken"].contains("id")) {
          return item["SpecialToken"]["id"].get<std::string>();
        }
        return std::nullopt;
      };
      if (auto first = special_id(single.front())) {
        if (!tconfig || !bos) bos = first;
        meta->add_bos = (*first == bos || *first == cls);
      }
      if (auto last = special_id(single.back())) {
        if (!tconfig || !eos) eos = last;
        meta->add_eos = (*last == eos);
      }
    }
  }
  auto set_id = [&](std::optional<uint32_t>* slot, int64_t id) {
    if (*slot || id < 0 || (n_vocab && static_cast<size_t>(id) >= *n_vocab)) return;
    *slot = static_cast<uint32_t>(id);
  };
  struct Typ {
    const char* name;
    std::optional<uint32_t>* id;  // nullptr: read but never written (cls has no GGUF key)
    std::optional<bool>* add;
  };
  std::optional<uint32_t> cls_id;
  const Typ typs[] = {{"bos", &meta->bos, &meta->add_bos}, {"eos", &meta->eos, &meta->add_eos},
                      {"unk", &meta->unk, nullptr},        {"sep", &meta->sep, &meta->add_sep},
                      {"pad", &meta->pad, nullptr},        {"cls", &cls_id, nullptr},
                      {"mask", &meta->mask, nullptr}};
  // Token names from tokenizer_config.json (gguf-py reads none without it), then config.json ids.
  for (const Typ& t : typs) {
    if (!tconfig) break;
    const std::string add_key = std::string("add_") + t.name + "_token";
    if (t.add && tconfig->contains(add_key) && (*tconfig)[add_key].is_boolean()) *t.add = (*tconfig)[add_key].get<bool>();
    std::optional<std::string> content = config_token(t.name);
    if (std::string_view(t.name) == "bos" && !content) content = bos;
    if (!content) continue;
    for (const AddedToken& a : tok.added) {
      if (a.content == *content) {
        set_id(t.id, a.id);
        break;
      }
    }
  }
  if (config) {
    for (const Typ& t : typs) {
      const std::string key = std::string(t.name) + "_token_id";
      const json* v = nullptr;
      if (config->contains(key)) {
        v = &(*config)[key];
      } else if (config->contains("text_config") && (*config)["text_config"].contains(key)) {
        v = &(*config)["text_config"][key];
      }
      if (v && v->is_number_integer()) set_id(t.id, v->get<int64_t>());
    }
  }
  // Last, the tokens the post-processor adds, by the ids it gives them, else by their added-token
  // entry (gguf-py stops before this; HF tokenizers does not, and neither does a bare tokenizer.json).
  auto from_post_processor = [&](const std::optional<std::string>& name, std::optional<uint32_t>* slot) {
    if (!name || *slot) return;
    if (auto it = post_processor_ids.find(*name); it != post_processor_ids.end()) {
      set_id(slot, it->second);
      return;
    }
    for (const AddedToken& a : tok.added) {
      if (a.content == *name) return set_id(slot, a.id);
    }
  };
  from_post_processor(bos, &meta->bos);
  from_post_processor(eos, &meta->eos);
}

// A vocabulary that adds BOS must say which token that is: no id is guessed (llama.cpp would take
// id 1, which is <eos> in Gemma's vocabularies).
Status CheckBosNamed(const TokenizerMetadata& meta, const fs::path& tokenizer_file, const fs::path& dir) {
  if (meta.bos || !meta.add_bos.value_or(true)) return Status::Ok();
  return Status::Error(tokenizer_file.string() +
                       ": no file names the BOS token: its post_processor adds none, and " + dir.string() +
                       " has no tokenizer_config.json (bos_token) or config.json (bos_token_id)");
}

// tokenizer_config.json "chat_template", else chat_template.jinja (+ additional_chat_templates/),
// else chat_template.json; a list of {name, template} gives the named templates.
Status ReadChatTemplate(const fs::path& dir, const std::optional<json>& tconfig, TokenizerMetadata* meta) {
  if (!tconfig) return Status::Ok();  // gguf-py looks for templates only next to a tokenizer_config.json
  json value;
  if (tconfig && tconfig->contains("chat_template")) {
    value = (*tconfig)["chat_template"];
  } else if (fs::is_regular_file(dir / "chat_template.jinja")) {
    std::ifstream in(dir / "chat_template.jinja", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    value = ss.str();
    std::error_code ec;
    std::vector<fs::path> extra;
    for (const auto& e : fs::directory_iterator(dir / "additional_chat_templates", ec)) {
      if (e.path().extension() == ".jinja") extra.push_back(e.path());
    }
    if (!extra.empty()) {
      json list = json::array({json{{"name", "default"}, {"template", value}}});
      std::sort(extra.begin(), extra.end());
      for (const fs::path& p : extra) {
        std::ifstream f(p, std::ios::binary);
        std::stringstream s;
        s << f.rdbuf();
        list.push_back(json{{"name", p.stem().string()}, {"template", s.str()}});
      }
      value = list;
    }
  } else {
    ASSIGN_OR_RETURN(std::optional<json> ct, ReadJsonIfExists(dir / "chat_template.json"));
    if (ct && ct->contains("chat_template")) value = (*ct)["chat_template"];
  }
  if (value.is_string()) {
    meta->chat_template = value.get<std::string>();
  } else if (value.is_array()) {
    std::set<std::string> seen;
    for (const json& choice : value) {
      if (!choice.is_object() || !choice.contains("template") || !choice["template"].is_string()) continue;
      std::string name = choice.value("name", std::string());
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      if (name.empty()) continue;
      if (name == "default") {
        meta->chat_template = choice["template"].get<std::string>();
      } else if (seen.insert(name).second) {
        meta->named_chat_templates.emplace_back(name, choice["template"].get<std::string>());
      }
    }
  }
  return Status::Ok();
}

// llama.cpp sizes a SentencePiece vocabulary from the model's hparams (Gemma 3: 262208, padded
// with [PADn]); nullopt when config.json does not say.
std::optional<size_t> HparamVocabSize(const std::string& arch, const std::optional<json>& config) {
  std::optional<int64_t> hp = arch == "gemma3n" ? std::nullopt : HparamInt(config, "vocab_size_per_layer_input");
  if (!hp) hp = HparamInt(config, "vocab_size");
  if (hp && *hp > 0) return static_cast<size_t>(*hp);
  return std::nullopt;
}

// added_tokens.json, then tokenizer_config.json's added_tokens_decoder (else `fallback`, the
// tokenizer.json list, when given) re-type and re-score pieces, as _create_vocab_sentencepiece does.
Status ApplyAddedTokens(const fs::path& dir, const std::optional<json>& tconfig, const std::vector<AddedToken>* fallback,
                        TokenizerMetadata* meta) {
  const size_t n_vocab = meta->tokens.size();
  ASSIGN_OR_RETURN(std::optional<json> added_json, ReadJsonIfExists(dir / "added_tokens.json"));
  if (added_json && added_json->is_object()) {
    for (auto it = added_json->begin(); it != added_json->end(); ++it) {
      if (!it.value().is_number_integer()) continue;
      const int64_t id = it.value().get<int64_t>();
      if (id < 0 || static_cast<size_t>(id) >= n_vocab) continue;
      meta->tokens[id] = it.key();
      meta->scores[id] = -1000.0f;
      meta->types[id] = kUserDefined;
    }
  }

  // Added tokens: tokenizer_config.json's added_tokens_decoder, or tokenizer.json's list.
  std::vector<AddedToken> added;
  if (tconfig && tconfig->contains("added_tokens_decoder") && (*tconfig)["added_tokens_decoder"].is_object()) {
    for (auto it = (*tconfig)["added_tokens_decoder"].begin(); it != (*tconfig)["added_tokens_decoder"].end(); ++it) {
      added.push_back(AddedToken{std::stoll(it.key()), it.value().at("content").get<std::string>(),
                                 it.value().value("special", false)});
    }
  } else if (fallback) {
    added = *fallback;
  }
  for (const AddedToken& a : added) {
    if (a.id < 0 || static_cast<size_t>(a.id) >= n_vocab) continue;
    if (a.special || LooksSpecial(a.content)) {
      meta->types[a.id] = kControl;
      meta->tokens[a.id] = a.content;
    } else {
      // llama.cpp pre-normalises user-defined spaces: "▁▁" is stored as two spaces.
      meta->types[a.id] = kUserDefined;
      meta->tokens[a.id] = ReplaceAll(a.content, kSpaceEscape, " ");
    }
    meta->scores[a.id] = -1000.0f;
  }
  return Status::Ok();
}

// The end of _set_vocab_sentencepiece and GemmaModel/Gemma2Model/Gemma3Model.set_vocab: special
// ids and flags (gguf-py SpecialVocab), chat template, Gemma 1's EOT, no space prefix.
Status FinishSentencePieceVocab(const fs::path& dir, const std::string& arch, const HfTokenizerJson& tok,
                                const std::optional<json>& tconfig, const std::optional<json>& config,
                                TokenizerMetadata* meta) {
  ReadSpecialVocab(tok, tconfig, config, meta->tokens.size(), meta);
  RETURN_IF_ERROR(ReadChatTemplate(dir, tconfig, meta));
  // Gemma 1 (CodeGemma): llama.cpp hard-codes <end_of_turn> = 107 as EOT.
  if (arch == "gemma") meta->eot = 107;
  meta->add_space_prefix = false;
  return Status::Ok();
}

// A "llama" (SentencePiece) vocabulary of n_vocab ids whose first n_pieces come from the tokenizer
// file: the rest are llama.cpp's "[PADn]" fillers, UNUSED, as the converter pads to vocab_size.
void StartSentencePieceVocab(size_t n_vocab, size_t n_pieces, TokenizerMetadata* meta) {
  meta->model = "llama";
  meta->pre = "default";
  meta->tokens.resize(n_vocab);
  meta->scores.assign(n_vocab, -10000.0f);
  meta->types.assign(n_vocab, kUnused);
  for (size_t i = n_pieces; i < n_vocab; ++i) meta->tokens[i] = "[PAD" + std::to_string(i) + "]";
}

// Gemma 1/2/3: llama.cpp's _set_vocab_sentencepiece, with scores rebuilt from the merge ranks.
Status BuildSentencePieceVocab(const fs::path& dir, const std::string& arch, const HfTokenizerJson& tok,
                               const std::optional<json>& tconfig, const std::optional<json>& config,
                               TokenizerMetadata* meta) {
  const size_t n_base = tok.vocab.size();
  size_t n_vocab = n_base;
  if (std::optional<size_t> hp = HparamVocabSize(arch, config)) {
    n_vocab = *hp;
  } else {
    for (const AddedToken& a : tok.added) n_vocab = std::max(n_vocab, static_cast<size_t>(a.id + 1));
  }

  // First merge rank producing each piece: HF ranks merges by the SentencePiece score of the
  // merged piece, so its negation is a score that orders SentencePiece merges the same way.
  std::vector<int64_t> first_rank(n_base, -1);
  std::string joined;
  for (size_t r = 0; r < tok.merges.size(); ++r) {
    joined.assign(tok.merges[r].first);
    joined.append(tok.merges[r].second);
    auto it = tok.index.find(joined);
    if (it != tok.index.end() && first_rank[it->second] < 0) first_rank[it->second] = static_cast<int64_t>(r);
  }

  const size_t n_known = std::min(n_base, n_vocab);  // a smaller vocab_size cuts the list
  StartSentencePieceVocab(n_vocab, n_known, meta);
  for (size_t i = 0; i < n_known; ++i) {
    const std::string_view text = tok.vocab[i];
    meta->tokens[i] = std::string(text);
    if (IsBytePiece(text)) {
      meta->types[i] = kByte;
      meta->scores[i] = 0.0f;
    } else if (!tok.unk_token.empty() && text == tok.unk_token) {
      meta->types[i] = kUnknown;
      meta->scores[i] = 0.0f;
    } else {
      meta->types[i] = kNormal;
      meta->scores[i] = -static_cast<float>(first_rank[i] >= 0 ? first_rank[i] : static_cast<int64_t>(tok.merges.size()));
    }
  }

  RETURN_IF_ERROR(ApplyAddedTokens(dir, tconfig, &tok.added, meta));
  return FinishSentencePieceVocab(dir, arch, tok, tconfig, config, meta);
}

// Gemma 1/2/3 from SentencePiece's tokenizer.model: _set_vocab_sentencepiece with the pieces,
// scores and types of the ModelProto. Three choices differ from llama.cpp, none for Google's Gemma
// files: a USER_DEFINED piece stays USER_DEFINED (llama.cpp makes it NORMAL and relies on
// tokenizer_config.json to re-type it; SentencePiece matches it whole before BPE, and so do we),
// special ids no HF file names fall back to the trainer_spec's, and add_space_prefix is the model's
// add_dummy_prefix (llama.cpp writes false for every Gemma; Gemma's models have it off).
Status BuildVocabFromSpmModel(const SpmModel& spm, const fs::path& dir, const std::string& arch,
                              const HfTokenizerJson& tok, const std::optional<json>& tconfig,
                              const std::optional<json>& config, TokenizerMetadata* meta) {
  const size_t n_pieces = spm.pieces.size();
  const size_t n_vocab = HparamVocabSize(arch, config).value_or(n_pieces);
  if (n_pieces > n_vocab) {
    // llama.cpp drops the extra pieces with a warning; BPE could still produce them.
    return Status::Error("it has " + std::to_string(n_pieces) + " pieces, more than config.json's vocab_size " +
                         std::to_string(n_vocab));
  }
  StartSentencePieceVocab(n_vocab, n_pieces, meta);
  for (size_t i = 0; i < n_pieces; ++i) {
    const SpmPiece& p = spm.pieces[i];
    meta->scores[i] = p.score;
    meta->types[i] = p.type;  // SentencePiece's type numbers are llama.cpp's
    // llama.cpp pre-normalises user-defined spaces, as for added tokens.
    meta->tokens[i] = p.type == kUserDefined ? ReplaceAll(p.text, kSpaceEscape, " ") : p.text;
  }
  RETURN_IF_ERROR(ApplyAddedTokens(dir, tconfig, /*fallback=*/nullptr, meta));

  // gguf-py resolves tokenizer_config.json's token names among tokenizer.json's added tokens; with
  // no tokenizer.json, among the pieces a converted tokenizer.json would list there.
  const HfTokenizerJson* special_source = &tok;
  HfTokenizerJson from_pieces;
  if (!tok.root.is_object()) {
    from_pieces.root = json::object();
    for (size_t i = 0; i < n_vocab; ++i) {
      const int32_t t = meta->types[i];
      if (t == kControl || t == kUnknown || t == kUserDefined) {
        from_pieces.added.push_back(AddedToken{static_cast<int64_t>(i), meta->tokens[i], t != kUserDefined});
      }
    }
    special_source = &from_pieces;
  }
  RETURN_IF_ERROR(FinishSentencePieceVocab(dir, arch, *special_source, tconfig, config, meta));
  auto fallback = [&](std::optional<uint32_t>* slot, int32_t id) {
    if (!*slot && id >= 0 && static_cast<size_t>(id) < n_pieces) *slot = static_cast<uint32_t>(id);
  };
  fallback(&meta->bos, spm.bos_id);
  fallback(&meta->eos, spm.eos_id);
  fallback(&meta->unk, spm.unk_id);
  fallback(&meta->pad, spm.pad_id);
  meta->add_space_prefix = spm.add_dummy_prefix;
  return Status::Ok();
}

// transformers' all_special_ids, approximated from the files: the tokens named in
// tokenizer_config.json / special_tokens_map.json, and the added tokens marked special.
std::unordered_set<int64_t> SpecialIds(const fs::path& dir, const HfTokenizerJson& tok, const std::optional<json>& tconfig) {
  std::unordered_set<std::string> names;
  auto collect = [&](const json& cfg) {
    for (const char* typ : {"bos", "eos", "unk", "sep", "pad", "cls", "mask"}) {
      const std::string key = std::string(typ) + "_token";
      if (cfg.contains(key)) {
        if (auto c = TokenContent(cfg[key])) names.insert(*c);
      }
    }
    for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
      if (!cfg.contains(key)) continue;
      for (const json& e : cfg[key]) {
        if (auto c = TokenContent(e)) names.insert(*c);
      }
    }
  };
  if (tconfig) collect(*tconfig);
  if (auto map = ReadJsonIfExists(dir / "special_tokens_map.json"); map.ok() && *map) collect(**map);
  std::unordered_set<int64_t> ids;
  for (const AddedToken& a : tok.added) {
    if (a.special || names.count(a.content)) ids.insert(a.id);
  }
  for (const std::string& n : names) {
    auto it = tok.index.find(n);
    if (it != tok.index.end()) ids.insert(it->second);
  }
  return ids;
}

// Gemma 4: llama.cpp's Gemma4Model.set_vocab (LlamaHfVocab + merges).
Status BuildGemma4Vocab(const fs::path& dir, const HfTokenizerJson& tok, const std::optional<json>& tconfig,
                        const std::optional<json>& config, TokenizerMetadata* meta) {
  const size_t n_base = tok.vocab.size();
  const std::unordered_set<int64_t> special = SpecialIds(dir, tok, tconfig);
  // Rendered as text so that the chat parser can read them (llama.cpp: USER_DEFINED).
  static const std::unordered_set<std::string_view> kVisible = {
      "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>"};

  std::vector<AddedToken> beyond;
  for (const AddedToken& a : tok.added) {
    if (a.id >= static_cast<int64_t>(n_base)) beyond.push_back(a);
  }
  std::sort(beyond.begin(), beyond.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  meta->model = "gemma4";
  meta->tokens.reserve(n_base + beyond.size());
  for (size_t i = 0; i < n_base; ++i) {
    const std::string_view text = tok.vocab[i];
    meta->tokens.emplace_back(text);
    int32_t type = IsBytePiece(text) ? kByte : special.count(static_cast<int64_t>(i)) ? kControl : kNormal;
    if (kVisible.count(text)) type = kUserDefined;
    meta->types.push_back(type);
  }
  for (const AddedToken& a : beyond) {
    if (a.id != static_cast<int64_t>(meta->tokens.size())) {
      return Status::Error("added token '" + a.content + "' has id " + std::to_string(a.id) + ", expected " +
                           std::to_string(meta->tokens.size()));
    }
    meta->tokens.push_back(a.content);
    meta->types.push_back(kVisible.count(a.content) ? kUserDefined : special.count(a.id) ? kControl : kUserDefined);
  }
  meta->scores.assign(meta->tokens.size(), -1000.0f);

  // gguf-py joins merge pairs with a space, shifting spaces inside a piece to U+0120.
  bool spaces = false;
  for (const auto& [l, r] : tok.merges) spaces = spaces || l.find(' ') != std::string_view::npos || r.find(' ') != std::string_view::npos;
  meta->merges.reserve(tok.merges.size());
  for (const auto& [l, r] : tok.merges) {
    if (spaces) {
      meta->merges.push_back(ReplaceAll(std::string(l), " ", "\xC4\xA0") + " " + ReplaceAll(std::string(r), " ", "\xC4\xA0"));
    } else {
      meta->merges.push_back(std::string(l) + " " + std::string(r));
    }
  }

  ReadSpecialVocab(tok, tconfig, config, std::nullopt, meta);
  RETURN_IF_ERROR(ReadChatTemplate(dir, tconfig, meta));
  meta->add_space_prefix = false;
  // Gemma4Model.set_vocab ends with add_add_bos_token(True).
  if (!meta->add_bos) meta->add_bos_last = true;
  meta->add_bos = true;
  return Status::Ok();
}

Result<TokenizerMetadata> ReadFromPaths(const fs::path& tokenizer_json, const fs::path& dir, std::string arch,
                                        bool keep_merges) {
  ASSIGN_OR_RETURN(std::optional<json> root, ReadJsonIfExists(tokenizer_json));
  if (!root) return Status::Error(tokenizer_json.string() + " not found");
  ASSIGN_OR_RETURN(std::optional<json> tconfig, ReadJsonIfExists(dir / "tokenizer_config.json"));
  ASSIGN_OR_RETURN(std::optional<json> config, ReadJsonIfExists(dir / "config.json"));

  TokenizerMetadata meta;
  try {
    HfTokenizerJson tok;
    RETURN_IF_ERROR(ParseTokenizerJson(std::move(*root), &tok).WithContext(tokenizer_json.string()));
    if (arch.empty()) arch = ArchFromConfig(config, tok.index.count("<|turn>") > 0);
    if (arch == "gemma4") {
      RETURN_IF_ERROR(BuildGemma4Vocab(dir, tok, tconfig, config, &meta));
    } else if (arch == "gemma" || arch == "gemma2" || arch == "gemma3" || arch == "gemma3n") {
      RETURN_IF_ERROR(BuildSentencePieceVocab(dir, arch, tok, tconfig, config, &meta));
      if (keep_merges) {
        meta.merges.reserve(tok.merges.size());
        for (const auto& [l, r] : tok.merges) meta.merges.push_back(std::string(l) + " " + std::string(r));
      }
    } else {
      return Status::Error("no tokenizer conversion for architecture '" + arch + "' (Gemma 1-4 only)");
    }
  } catch (const std::exception& e) {  // nlohmann's type errors, std::stoll on a bad id
    return Status::Error(tokenizer_json.string() + ": unexpected JSON structure: " + e.what());
  }
  RETURN_IF_ERROR(CheckBosNamed(meta, tokenizer_json, dir));
  return meta;
}

// tokenizer.json's post-processor and added tokens, which SpecialVocab reads even when the pieces
// come from tokenizer.model; an empty HfTokenizerJson (root not an object) when there is none.
Result<HfTokenizerJson> ReadTokenizerJsonSpecials(const fs::path& path) {
  HfTokenizerJson tok;
  ASSIGN_OR_RETURN(std::optional<json> root, ReadJsonIfExists(path));
  if (!root) return tok;
  if (!root->is_object()) return Status::Error(path.string() + ": not a JSON object");
  tok.root = std::move(*root);
  if (tok.root.contains("added_tokens") && tok.root["added_tokens"].is_array()) {
    for (const json& a : tok.root["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string()) {
        return Status::Error(path.string() + ": an added_tokens entry lacks an integer id or a string content");
      }
      tok.added.push_back(AddedToken{a["id"].get<int64_t>(), a["content"].get<std::string>(),
                                     a.value("special", false)});
    }
  }
  return tok;
}

Result<TokenizerMetadata> ReadFromSpmModel(const fs::path& model_path, const fs::path& dir, std::string arch) {
  ASSIGN_OR_RETURN(SpmModel spm, ReadSpmModelFile(model_path.string()));
  if (Status st = CheckSpmModelSupported(spm); !st.ok()) {
    return Status::Error(model_path.string() + ": unsupported SentencePiece model: " + st.message());
  }
  TokenizerMetadata meta;
  try {
    ASSIGN_OR_RETURN(std::optional<json> tconfig, ReadJsonIfExists(dir / "tokenizer_config.json"));
    ASSIGN_OR_RETURN(std::optional<json> config, ReadJsonIfExists(dir / "config.json"));
    if (arch.empty()) arch = ArchFromConfig(config, /*gemma4_vocab=*/false);
    if (arch == "gemma4") {
      return Status::Error(model_path.string() +
                           ": Gemma 4's tokenizer is BPE with ranked merges, which tokenizer.model does not hold; "
                           "convert it from tokenizer.json");
    }
    if (arch != "gemma" && arch != "gemma2" && arch != "gemma3" && arch != "gemma3n") {
      return Status::Error("no tokenizer conversion for architecture '" + arch + "' (Gemma 1-4 only)");
    }
    ASSIGN_OR_RETURN(HfTokenizerJson tok, ReadTokenizerJsonSpecials(dir / "tokenizer.json"));
    RETURN_IF_ERROR(BuildVocabFromSpmModel(spm, dir, arch, tok, tconfig, config, &meta).WithContext(model_path.string()));
  } catch (const std::exception& e) {  // nlohmann's type errors, std::stoll on a bad id
    return Status::Error(dir.string() + ": unexpected JSON structure: " + e.what());
  }
  RETURN_IF_ERROR(CheckBosNamed(meta, model_path, dir));
  return meta;
}

// tokenizer.json opens with '{' (after whitespace or a BOM); a ModelProto with its field-1 tag 0x0A.
Result<bool> IsJsonFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot open " + path.string());
  char head[64] = {};
  in.read(head, sizeof(head));
  std::string_view h(head, static_cast<size_t>(in.gcount()));
  if (h.substr(0, 3) == "\xEF\xBB\xBF") h.remove_prefix(3);
  while (!h.empty() && (h[0] == ' ' || h[0] == '\t' || h[0] == '\r' || h[0] == '\n')) h.remove_prefix(1);
  return !h.empty() && h[0] == '{';
}

}  // namespace

Result<TokenizerMetadata> ReadSpmTokenizer(const std::string& model_path, const std::string& hf_dir,
                                           const std::string& arch) {
  return ReadFromSpmModel(fs::path(model_path), fs::path(hf_dir.empty() ? "." : hf_dir), arch);
}

Result<TokenizerMetadata> ReadTokenizerFile(const std::string& path, const std::string& hf_dir, const std::string& arch,
                                            bool keep_merges) {
  fs::path dir(hf_dir);
  if (hf_dir.empty()) dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  ASSIGN_OR_RETURN(bool is_json, IsJsonFile(path));
  if (is_json) return ReadFromPaths(path, dir, arch, keep_merges);
  return ReadFromSpmModel(path, dir, arch);
}

Result<TokenizerMetadata> ReadHfTokenizer(const std::string& hf_dir, const std::string& arch, bool keep_merges) {
  return ReadFromPaths(fs::path(hf_dir) / "tokenizer.json", fs::path(hf_dir), arch, keep_merges);
}

Result<TokenizerMetadata> ReadHfTokenizerFile(const std::string& path, bool keep_merges) {
  return ReadTokenizerFile(path, "", "", keep_merges);
}

void WriteTokenizerMetadata(const TokenizerMetadata& meta, GgufWriter& writer) {
  writer.SetString("tokenizer.ggml.model", meta.model);
  if (!meta.pre.empty()) writer.SetString("tokenizer.ggml.pre", meta.pre);
  writer.SetStringArray("tokenizer.ggml.tokens", meta.tokens);
  writer.SetF32Array("tokenizer.ggml.scores", meta.scores);
  writer.SetI32Array("tokenizer.ggml.token_type", meta.types);
  if (meta.model != "llama" && !meta.merges.empty()) writer.SetStringArray("tokenizer.ggml.merges", meta.merges);
  const std::pair<const char*, const std::optional<uint32_t>*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &meta.bos},     {"tokenizer.ggml.eos_token_id", &meta.eos},
      {"tokenizer.ggml.unknown_token_id", &meta.unk}, {"tokenizer.ggml.seperator_token_id", &meta.sep},
      {"tokenizer.ggml.padding_token_id", &meta.pad}, {"tokenizer.ggml.mask_token_id", &meta.mask},
  };
  for (const auto& [key, id] : ids) {
    if (*id) writer.SetU32(key, **id);
  }
  if (meta.add_bos && !meta.add_bos_last) writer.SetBool("tokenizer.ggml.add_bos_token", *meta.add_bos);
  if (meta.add_eos) writer.SetBool("tokenizer.ggml.add_eos_token", *meta.add_eos);
  if (meta.add_sep) writer.SetBool("tokenizer.ggml.add_sep_token", *meta.add_sep);
  std::vector<std::string> names;
  for (const auto& [name, tmpl] : meta.named_chat_templates) {
    writer.SetString("tokenizer.chat_template." + name, tmpl);
    names.push_back(name);
  }
  if (!names.empty()) writer.SetStringArray("tokenizer.chat_templates", names);
  if (meta.chat_template) writer.SetString("tokenizer.chat_template", *meta.chat_template);
  if (meta.eot) writer.SetU32("tokenizer.ggml.eot_token_id", *meta.eot);
  if (meta.add_space_prefix) writer.SetBool("tokenizer.ggml.add_space_prefix", *meta.add_space_prefix);
  if (meta.add_bos && meta.add_bos_last) writer.SetBool("tokenizer.ggml.add_bos_token", *meta.add_bos);
}

Status AddHfTokenizerMetadata(const std::string& hf_dir, const std::string& arch, GgufWriter& writer) {
  ASSIGN_OR_RETURN(TokenizerMetadata meta, ReadHfTokenizer(hf_dir, arch));
  WriteTokenizerMetadata(meta, writer);
  return Status::Ok();
}

Status AddTokenizerMetadata(const std::string& path, const std::string& hf_dir, const std::string& arch,
                            GgufWriter& writer) {
  ASSIGN_OR_RETURN(TokenizerMetadata meta, ReadTokenizerFile(path, hf_dir, arch));
  WriteTokenizerMetadata(meta, writer);
  return Status::Ok();
}

Result<Vocab> VocabFromMetadata(const TokenizerMetadata& meta) {
  std::vector<std::string_view> tokens(meta.tokens.begin(), meta.tokens.end());
  std::vector<std::string_view> merges(meta.merges.begin(), meta.merges.end());
  VocabSpec spec;
  spec.model = meta.model;
  spec.tokens = tokens;
  spec.scores = meta.scores;
  spec.types = meta.types;
  spec.merges = merges;
  auto id = [](const std::optional<uint32_t>& v) { return v ? std::optional<int64_t>(*v) : std::nullopt; };
  spec.bos = id(meta.bos);
  spec.eos = id(meta.eos);
  spec.eot = id(meta.eot);
  spec.unk = id(meta.unk);
  spec.pad = id(meta.pad);
  spec.mask = id(meta.mask);
  spec.add_bos = meta.add_bos;
  spec.add_eos = meta.add_eos;
  spec.add_space_prefix = meta.add_space_prefix;
  return Vocab::Build(spec);
}

}  // namespace gemlet
