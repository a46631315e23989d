// SentencePiece tokenizer.model: the ModelProto reader on small hand-built and corrupt files, and
// the demo model's 8,192-piece vocabulary read from tokenizer.model against its tokenizer.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/spm_proto.h"
#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/spm_model.h"
#include "tokenizer/tokenizer.h"

namespace gemlet {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::ProtoBytes;
using test::SpmModelBytes;
using test::SpmTestModel;

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6;

// The demo model's tokenizer (tests/data/demo_tokenizer) and its tokenizer.json, unpacked at build time.
const std::string kDemoDir = GEMLET_DEMO_TOKENIZER_DIR;
const std::string kDemoModel = kDemoDir + "/tokenizer.model";
const std::string kDemoJson = std::string(GEMLET_TOKDATA_DIR) + "/demo/tokenizer.json";
const std::string kDemoGguf = std::string(GEMLET_SOURCE_DIR) + "/models/gemlet-demo.gguf";

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

SpmTestModel SmallModel() {
  SpmTestModel m = test::GemmaLikeSpmModel({"ab", "\xE2\x96\x81" "a", "\xE2\x96\x81" "ab", "abc", "\xE2\x96\x81", "a", "b", "c"});
  m.pieces.push_back({"\xE2\x96\x81\xE2\x96\x81", 0.0f, kUserDefined});  // "▁▁": user-defined run of two spaces
  return m;
}

// ---- the wire-format reader ------------------------------------------------------------------

TEST(SpmModel, ParsesPiecesTrainerAndNormalizer) {
  SpmTestModel src = SmallModel();
  src.pad_id = -1;  // negative int32: a ten-byte varint
  const std::string bytes = SpmModelBytes(src);
  Result<SpmModel> m = ParseSpmModel(bytes);
  ASSERT_TRUE(m.ok()) << m.message();
  ASSERT_EQ(m->pieces.size(), src.pieces.size());
  for (size_t i = 0; i < src.pieces.size(); ++i) {
    EXPECT_EQ(m->pieces[i].text, src.pieces[i].text) << i;
    EXPECT_EQ(m->pieces[i].score, src.pieces[i].score) << i;
    EXPECT_EQ(m->pieces[i].type, src.pieces[i].type) << i;
  }
  EXPECT_EQ(m->model_type, kSpmBpe);
  EXPECT_EQ(m->unk_id, 3);
  EXPECT_EQ(m->bos_id, 2);
  EXPECT_EQ(m->eos_id, 1);
  EXPECT_EQ(m->pad_id, -1);
  EXPECT_TRUE(m->byte_fallback);
  EXPECT_EQ(m->normalizer_name, "identity");
  EXPECT_FALSE(m->add_dummy_prefix);
  EXPECT_FALSE(m->remove_extra_whitespaces);
  EXPECT_TRUE(m->escape_whitespaces);  // absent: the .proto default
  EXPECT_TRUE(CheckSpmModelSupported(*m).ok());

  // Unknown fields of every wire type are skipped, at every level, as protobuf does.
  ProtoBytes extra;
  extra.Raw(bytes).Int(200, 7).Bytes(201, "x").Float(202, 1.0f).Tag(203, 1).Raw(std::string(8, '\0'));
  extra.Message(1, ProtoBytes().Bytes(1, "zz").Int(99, 1).Float(2, -50.0f));
  extra.Message(2, ProtoBytes().Int(41, 5).Bytes(300, "later field"));  // repeated message fields merge
  Result<SpmModel> m2 = ParseSpmModel(extra.str());
  ASSERT_TRUE(m2.ok()) << m2.message();
  EXPECT_EQ(m2->pieces.back().text, "zz");
  EXPECT_EQ(m2->pieces.back().score, -50.0f);
  EXPECT_EQ(m2->bos_id, 5);
  EXPECT_EQ(m2->eos_id, 1);
}

TEST(SpmModel, EveryTruncationIsRejected) {
  const std::string bytes = SpmModelBytes(SmallModel());
  ASSERT_TRUE(ParseSpmModel(bytes).ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    Result<SpmModel> m = ParseSpmModel(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(m.ok()) << "prefix of " << n << " of " << bytes.size() << " bytes parsed";
    EXPECT_FALSE(m.message().empty());
  }
  std::printf("all %zu truncations of a %zu-byte model rejected\n", bytes.size(), bytes.size());
}

TEST(SpmModel, DemoFileCutShortIsRejected) {
  const std::string bytes = ReadFile(kDemoModel);
  ASSERT_EQ(bytes.size(), 115649u);
  ASSERT_TRUE(ParseSpmModel(bytes).ok());
  size_t checked = 0;
  for (size_t n = 0; n < bytes.size(); n += (n < 64 || n + 64 > bytes.size()) ? 1 : 997) {
    ASSERT_FALSE(ParseSpmModel(std::string_view(bytes).substr(0, n)).ok()) << n;
    ++checked;
  }
  std::printf("%zu cut points of the demo tokenizer.model rejected\n", checked);
}

TEST(SpmModel, HandMadeCorruptionIsRejectedWithAMessage) {
  const std::string good = SpmModelBytes(SmallModel());
  const std::string piece_ok = ProtoBytes().Bytes(1, "q").Float(2, -1.0f).Int(3, 1).str();
  SpmTestModel specs_only = SmallModel();
  specs_only.pieces.clear();
  const std::string tail = SpmModelBytes(specs_only);  // trainer_spec and normalizer_spec
  auto with_piece = [&](const std::string& piece) { return ProtoBytes().Bytes(1, piece).Raw(tail).str(); };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* name;
    std::string bytes;
    const char* expect;
  };
  const Case cases[] = {
      {"empty file", "", "no pieces"},
      {"JSON text", "{\"model\": {}}", "field"},
      // Field 4 (self_test_data) is skipped whatever its wire type, so its value is read as such.
      {"varint of 11 bytes", std::string(1, '\x20') + std::string(10, '\xFF') + "\x01", "varint"},
      {"varint overflowing 64 bits", std::string(1, '\x20') + std::string(9, '\xFF') + "\x7F", "overflows"},
      {"length past the end", std::string("\x0A\xFF\x01", 3) + "abc", "runs past the end"},
      {"huge length", std::string("\x0A\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x7F", 10), "runs past the end"},
      {"group wire type", std::string("\x0B", 1) + good, "group"},
      {"wire type 7", std::string("\x0F", 1) + good, "wire type 7"},
      {"field number 0", std::string("\x02\x00", 2) + good, "field number 0"},
      {"pieces as a varint", std::string("\x08\x01", 2) + good, "pieces (field 1) has wire type 0"},
      {"score as a varint", with_piece(ProtoBytes().Bytes(1, "q").Int(2, 1).str()), "score"},
      {"piece type 9", with_piece(ProtoBytes().Bytes(1, "q").Int(3, 9).str()), "unknown piece type 9"},
      {"piece type 0", with_piece(ProtoBytes().Bytes(1, "q").Int(3, 0).str()), "unknown piece type 0"},
      {"empty piece", with_piece(ProtoBytes().Bytes(1, "").Float(2, 0.0f).str()), "empty piece"},
      {"piece without text", with_piece(ProtoBytes().Float(2, 0.0f).str()), "empty piece"},
      {"NaN score", with_piece(ProtoBytes().Bytes(1, "q").Float(2, nan).str()), "non-finite"},
      {"infinite score", with_piece(ProtoBytes().Bytes(1, "q").Float(2, -INFINITY).str()), "non-finite"},
      {"duplicate piece", ProtoBytes().Bytes(1, piece_ok).Bytes(1, piece_ok).Raw(tail).str(), "duplicate"},
      {"piece cut inside its score", with_piece(piece_ok.substr(0, 5)), "fixed32"},
      {"trailing half varint", good + "\x80", "varint"},
      {"trailing tag without value", good + "\x20", "varint"},
      {"trailing fixed64 cut short", good + "\x21\x01\x02", "fixed64"},
      {"trailing fixed32 cut short", good + "\x25\x01", "fixed32"},
      {"no trainer_spec", ProtoBytes().Bytes(1, piece_ok).Message(3, ProtoBytes().Bytes(1, "identity")).str(),
       "no trainer_spec"},
      {"no normalizer_spec", ProtoBytes().Bytes(1, piece_ok).Message(2, ProtoBytes().Int(3, 2)).str(),
       "no normalizer_spec"},
      {"trainer_spec.model_type as a string", ProtoBytes().Bytes(1, piece_ok).Message(2, ProtoBytes().Bytes(3, "BPE")).str(),
       "model_type"},
  };
  for (const Case& c : cases) {
    Result<SpmModel> m = ParseSpmModel(c.bytes);
    ASSERT_FALSE(m.ok()) << c.name;
    EXPECT_NE(m.message().find(c.expect), std::string::npos) << c.name << ": " << m.message();
  }
}

TEST(SpmModel, RandomCorruptionNeverCrashes) {
  const std::string good = SpmModelBytes(SmallModel());
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<char>(rng() & 0xFF);
    Result<SpmModel> m = ParseSpmModel(b);
    rejected += !m.ok();
    if (m.ok()) {  // what parses is self-consistent
      for (const SpmPiece& p : m->pieces) {
        EXPECT_FALSE(p.text.empty());
        EXPECT_TRUE(std::isfinite(p.score));
        EXPECT_GE(p.type, 1);
        EXPECT_LE(p.type, 6);
      }
    }
  }
  std::printf("random corruption: %d of 20000 rejected, the rest parsed consistently\n", rejected);
}

TEST(SpmModel, UnsupportedModelsAreRefusedClearly) {
  struct Case {
    const char* name;
    SpmTestModel model;
    const char* expect;
  };
  std::vector<Case> cases;
  auto add = [&](const char* name, const char* expect, auto change) {
    SpmTestModel m = SmallModel();
    change(m);
    cases.push_back({name, m, expect});
  };
  add("unigram", "unigram model", [](SpmTestModel& m) { m.model_type = 1; });
  add("word", "word model", [](SpmTestModel& m) { m.model_type = 3; });
  add("char", "char model", [](SpmTestModel& m) { m.model_type = 4; });
  add("model type 9", "model_type 9", [](SpmTestModel& m) { m.model_type = 9; });
  add("NFKC", "rewrites text", [](SpmTestModel& m) {
    m.normalizer_name = "nmt_nfkc";
    m.charsmap = std::string(64, '\x01');
  });
  add("remove_extra_whitespaces (the .proto default)", "removes extra whitespace",
      [](SpmTestModel& m) { m.write_remove_extra_whitespaces = false; });
  for (const Case& c : cases) {
    test::TempDir dir;
    WriteFile(dir.File("tokenizer.model"), SpmModelBytes(c.model));
    Result<TokenizerMetadata> meta = ReadSpmTokenizer(dir.File("tokenizer.model"), dir.path(), "gemma3");
    ASSERT_FALSE(meta.ok()) << c.name;
    EXPECT_NE(meta.message().find(c.expect), std::string::npos) << c.name << ": " << meta.message();
    EXPECT_NE(meta.message().find("tokenizer.model"), std::string::npos) << meta.message();
  }

  Result<SpmModel> suffix = ParseSpmModel(
      ProtoBytes().Raw(SpmModelBytes(SmallModel())).Message(2, ProtoBytes().Int(24, 1)).str());
  ASSERT_TRUE(suffix.ok());
  EXPECT_NE(CheckSpmModelSupported(*suffix).message().find("treat_whitespace_as_suffix"), std::string::npos);
  Result<SpmModel> no_escape = ParseSpmModel(
      ProtoBytes().Raw(SpmModelBytes(SmallModel())).Message(3, ProtoBytes().Int(5, 0)).str());
  ASSERT_TRUE(no_escape.ok());
  EXPECT_NE(CheckSpmModelSupported(*no_escape).message().find("does not escape"), std::string::npos);
}

// ---- tokenizer.model -> TokenizerMetadata ----------------------------------------------------------

TEST(SpmTokenizer, SmallModelWithoutHfFiles) {
  test::TempDir dir;
  WriteFile(dir.File("tokenizer.model"), SpmModelBytes(SmallModel()));
  Result<TokenizerMetadata> meta = ReadSpmTokenizer(dir.File("tokenizer.model"), dir.path(), "");
  ASSERT_TRUE(meta.ok()) << meta.message();
  const size_t n = SmallModel().pieces.size();
  EXPECT_EQ(meta->model, "llama");
  EXPECT_EQ(meta->pre, "default");
  ASSERT_EQ(meta->tokens.size(), n);  // no config.json: the model's own size
  EXPECT_EQ(meta->types[0], kControl);
  EXPECT_EQ(meta->types[3], kUnknown);
  EXPECT_EQ(meta->types[4], kUserDefined);  // llama.cpp would say NORMAL; SentencePiece matches it whole
  EXPECT_EQ(meta->types[7], kByte);
  EXPECT_EQ(meta->types[263], kNormal);
  EXPECT_EQ(meta->scores[264], -1.0f);
  EXPECT_EQ(meta->tokens.back(), "  ");  // user-defined "▁▁", pre-normalised as llama.cpp does
  // No tokenizer_config.json or config.json: the trainer_spec's ids.
  EXPECT_EQ(meta->bos, 2u);
  EXPECT_EQ(meta->eos, 1u);
  EXPECT_EQ(meta->unk, 3u);
  EXPECT_EQ(meta->pad, 0u);
  EXPECT_FALSE(meta->add_bos.has_value());  // nothing says; the loader's SentencePiece default (on) applies
  EXPECT_EQ(meta->add_space_prefix, false);
  EXPECT_FALSE(meta->eot.has_value());
  EXPECT_TRUE(meta->merges.empty());

  // Through a GGUF file and back, and encoding.
  GgufWriter w;
  WriteTokenizerMetadata(*meta, w);
  ASSERT_TRUE(w.Write(dir.File("t.gguf")).ok());
  auto file = GgufFile::Open(dir.File("t.gguf"));
  ASSERT_TRUE(file.ok()) << file.message();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.message();
  const int32_t ab = 263, sp_ab = 265, abc = 266, sp = 267, c = 270, two_spaces = static_cast<int32_t>(n - 1);
  EXPECT_EQ(tok->Encode("ab abc", {.add_bos = tok->vocab().add_bos()}), (std::vector<int32_t>{2, ab, sp_ab, c}));
  EXPECT_EQ(tok->Encode("abc"), (std::vector<int32_t>{abc}));  // "ab" first (score 0), then "ab"+"c"
  EXPECT_EQ(tok->Encode("   ab"), (std::vector<int32_t>{two_spaces, sp_ab}));
  EXPECT_EQ(tok->Encode("<start_of_turn>x\n"), (std::vector<int32_t>{4, 7 + 'x', 6}));  // 'x': byte fallback
  EXPECT_EQ(tok->Decode(tok->Encode("ab abc   x")), "ab abc   x");
  EXPECT_EQ(tok->Encode(" "), (std::vector<int32_t>{sp}));

  // Gemma 4 has no SentencePiece model; config.json smaller than the model is refused.
  Result<TokenizerMetadata> g4 = ReadSpmTokenizer(dir.File("tokenizer.model"), dir.path(), "gemma4");
  ASSERT_FALSE(g4.ok());
  EXPECT_NE(g4.message().find("tokenizer.json"), std::string::npos) << g4.message();
  WriteFile(dir.File("config.json"), R"({"model_type": "gemma2", "vocab_size": 100})");
  Result<TokenizerMetadata> small = ReadSpmTokenizer(dir.File("tokenizer.model"), dir.path(), "");
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.message().find("vocab_size 100"), std::string::npos) << small.message();
  WriteFile(dir.File("config.json"), R"({"model_type": "gemma", "vocab_size": 300, "pad_token_id": 5})");
  Result<TokenizerMetadata> padded = ReadSpmTokenizer(dir.File("tokenizer.model"), dir.path(), "");
  ASSERT_TRUE(padded.ok()) << padded.message();
  ASSERT_EQ(padded->tokens.size(), 300u);
  EXPECT_EQ(padded->tokens[299], "[PAD299]");
  EXPECT_EQ(padded->scores[299], -10000.0f);
  EXPECT_EQ(padded->pad, 5u);   // config.json before the trainer_spec
  EXPECT_EQ(padded->eot, 107u);  // Gemma 1, as llama.cpp

  // A dummy prefix (not Gemma's) is kept, so '▁' goes before the text as SentencePiece puts it.
  SpmTestModel prefixed = SmallModel();
  prefixed.add_dummy_prefix = true;
  WriteFile(dir.File("prefixed.model"), SpmModelBytes(prefixed));
  Result<TokenizerMetadata> with_prefix = ReadSpmTokenizer(dir.File("prefixed.model"), dir.path(), "gemma3");
  ASSERT_TRUE(with_prefix.ok()) << with_prefix.message();
  EXPECT_EQ(with_prefix->add_space_prefix, true);
  auto prefix_vocab = VocabFromMetadata(*with_prefix);
  ASSERT_TRUE(prefix_vocab.ok()) << prefix_vocab.message();
  const Tokenizer prefix_tok(std::move(*prefix_vocab));
  EXPECT_EQ(prefix_tok.Encode("ab"), (std::vector<int32_t>{sp_ab}));
  EXPECT_EQ(prefix_tok.Decode(prefix_tok.Encode("ab")), "ab");

  // A missing or corrupt file is an error naming it.
  Result<TokenizerMetadata> missing = ReadSpmTokenizer(dir.File("nope.model"), dir.path(), "");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("nope.model"), std::string::npos);
  WriteFile(dir.File("bad.model"), SpmModelBytes(SmallModel()).substr(0, 100));
  Result<TokenizerMetadata> bad = ReadTokenizerFile(dir.File("bad.model"), dir.path(), "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("not a valid SentencePiece model"), std::string::npos) << bad.message();
}

struct DemoMeta {
  TokenizerMetadata from_json;         // tokenizer.json + tokenizer_config.json + config.json
  TokenizerMetadata from_json_merges;  // the same with HF's ranked merges kept
  TokenizerMetadata from_model;        // tokenizer.model + the same JSON side files, no tokenizer.json
};

const DemoMeta& Demo() {
  static const DemoMeta* demo = [] {
    auto* d = new DemoMeta;
    auto json_meta = ReadTokenizerFile(kDemoJson, kDemoDir, "");
    auto json_merges = ReadTokenizerFile(kDemoJson, kDemoDir, "", /*keep_merges=*/true);
    auto model_meta = ReadTokenizerFile(kDemoModel, kDemoDir, "");
    EXPECT_TRUE(json_meta.ok()) << json_meta.message();
    EXPECT_TRUE(json_merges.ok()) << json_merges.message();
    EXPECT_TRUE(model_meta.ok()) << model_meta.message();
    if (json_meta.ok()) d->from_json = std::move(json_meta).value();
    if (json_merges.ok()) d->from_json_merges = std::move(json_merges).value();
    if (model_meta.ok()) d->from_model = std::move(model_meta).value();
    return d;
  }();
  return *demo;
}

// Everything but the scores of NORMAL pieces must be identical.
void ExpectSameExceptNormalScores(const TokenizerMetadata& a, const TokenizerMetadata& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.pre, b.pre);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.types, b.types);
  EXPECT_EQ(a.bos, b.bos);
  EXPECT_EQ(a.eos, b.eos);
  EXPECT_EQ(a.unk, b.unk);
  EXPECT_EQ(a.sep, b.sep);
  EXPECT_EQ(a.pad, b.pad);
  EXPECT_EQ(a.mask, b.mask);
  EXPECT_EQ(a.eot, b.eot);
  EXPECT_EQ(a.add_bos, b.add_bos);
  EXPECT_EQ(a.add_eos, b.add_eos);
  EXPECT_EQ(a.add_sep, b.add_sep);
  EXPECT_EQ(a.add_space_prefix, b.add_space_prefix);
  EXPECT_EQ(a.add_bos_last, b.add_bos_last);
  EXPECT_EQ(a.chat_template, b.chat_template);
  EXPECT_EQ(a.named_chat_templates, b.named_chat_templates);
  ASSERT_EQ(a.scores.size(), b.scores.size());
  for (size_t i = 0; i < a.scores.size(); ++i) {
    if (a.types[i] != kNormal) {
      EXPECT_EQ(a.scores[i], b.scores[i]) << "piece " << i << " '" << a.tokens[i] << "'";
    }
  }
}

// Test (1): the GGUF tokenizer metadata from tokenizer.model equals the one from tokenizer.json.
TEST(SpmTokenizer, DemoModelMetadataEqualsTokenizerJsons) {
  const TokenizerMetadata& j = Demo().from_json;
  const TokenizerMetadata& m = Demo().from_model;
  ASSERT_EQ(m.tokens.size(), 8192u);
  ExpectSameExceptNormalScores(j, m);
  EXPECT_EQ(m.bos, 2u);
  EXPECT_EQ(m.eos, 1u);
  EXPECT_EQ(m.unk, 3u);
  EXPECT_EQ(m.pad, 0u);
  EXPECT_EQ(m.add_bos, true);
  EXPECT_EQ(m.add_eos, false);
  EXPECT_EQ(m.types[4], kControl);       // <start_of_turn>: special in added_tokens_decoder
  EXPECT_EQ(m.types[6], kUserDefined);   // "\n"
  EXPECT_EQ(m.scores[4], -1000.0f);
  ASSERT_TRUE(m.chat_template.has_value());
  EXPECT_NE(m.chat_template->find("<start_of_turn>"), std::string::npos);

  // The one difference, by construction: NORMAL scores. tokenizer.model holds SentencePiece's own
  // (0, -1, -2, ... in piece order); tokenizer.json holds none, so that reader rebuilds them as
  // -(rank of the first merge producing the piece), and -(number of merges) for pieces no merge
  // produces (single characters, never a merge result, whose score the encoder never reads). Both
  // order every merge the same way, which is all the encoder uses: sorting the mergeable pieces by
  // the model's score gives strictly falling rebuilt scores.
  float floor = 0.0f;
  for (float s : j.scores) floor = std::min(floor, s);
  std::vector<int32_t> mergeable;
  size_t normal = 0, differ = 0;
  for (size_t i = 0; i < m.tokens.size(); ++i) {
    if (m.types[i] != kNormal) continue;
    ++normal;
    differ += m.scores[i] != j.scores[i];
    if (j.scores[i] > floor) mergeable.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(mergeable.begin(), mergeable.end(), [&](int32_t a, int32_t b) { return m.scores[a] > m.scores[b]; });
  for (size_t k = 1; k < mergeable.size(); ++k) {
    ASSERT_GT(m.scores[mergeable[k - 1]], m.scores[mergeable[k]]) << "tied SentencePiece scores";
    ASSERT_GT(j.scores[mergeable[k - 1]], j.scores[mergeable[k]])
        << "merge order differs at '" << m.tokens[mergeable[k]] << "'";
  }
  EXPECT_GT(mergeable.size(), 5000u);
  std::printf("%zu NORMAL pieces (%zu with other score values), %zu produced by merges in the same order\n",
              normal, differ, mergeable.size());

  // The bundled demo GGUF (converted from tokenizer.json) has the same tokens and types.
  auto gguf = GgufFile::Open(kDemoGguf);
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  const std::vector<std::string_view>* tokens = (*gguf)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), m.tokens.size());
  for (size_t i = 0; i < m.tokens.size(); ++i) ASSERT_EQ((*tokens)[i], m.tokens[i]) << i;
  auto types = (*gguf)->GetI32Array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok());
  EXPECT_EQ(*types, m.types);
}

// With tokenizer.json beside tokenizer.model (as in a real Gemma folder, and llama.cpp's flow), the
// special ids come from tokenizer.json's added tokens; the result is the same.
TEST(SpmTokenizer, DemoModelWithTokenizerJsonBeside) {
  test::TempDir dir;
  for (const char* f : {"tokenizer.model", "tokenizer_config.json", "config.json", "special_tokens_map.json"}) {
    fs::copy_file(kDemoDir + "/" + f, dir.File(f));
  }
  fs::copy_file(kDemoJson, dir.File("tokenizer.json"));
  Result<TokenizerMetadata> both = ReadSpmTokenizer(dir.File("tokenizer.model"), dir.path(), "");
  ASSERT_TRUE(both.ok()) << both.message();
  ExpectSameExceptNormalScores(Demo().from_model, *both);
  EXPECT_EQ(both->scores, Demo().from_model.scores);

  // Only tokenizer.model, no JSON at all: ids from the trainer_spec, types from the model (so the
  // turn markers are user-defined rather than control), no chat template.
  fs::remove(dir.File("tokenizer.json"));
  fs::remove(dir.File("tokenizer_config.json"));
  fs::remove(dir.File("special_tokens_map.json"));
  Result<TokenizerMetadata> bare = ReadSpmTokenizer(dir.File("tokenizer.model"), dir.path(), "");
  ASSERT_TRUE(bare.ok()) << bare.message();
  EXPECT_EQ(bare->tokens, Demo().from_model.tokens);
  EXPECT_EQ(bare->bos, 2u);
  EXPECT_EQ(bare->eos, 1u);
  EXPECT_EQ(bare->unk, 3u);
  EXPECT_EQ(bare->pad, 0u);
  EXPECT_EQ(bare->types[4], kUserDefined);
  EXPECT_FALSE(bare->chat_template.has_value());
}

std::vector<std::string> EncodeTexts() {
  std::vector<std::string> texts = {
      "",
      " ",
      "Hello world",
      "  two leading spaces, trailing three   ",
      "a  b   c    d     e      f",
      "line one\nline two\n\nline four\n\n\n\nend\n",
      "\ttabs\tand spaces \t mixed\r\nwith CRLF\r\n",
      "你好，世界！",
      "床前明月光，疑是地上霜。举头望明月，低头思故乡。",
      "龘靐齉爩 rare characters fall back to bytes",
      "emoji 😀👍🏽 flags 🇫🇷 and ZWJ 👩‍👩‍👧",
      "<start_of_turn>user\nWho are you?<end_of_turn>\n<start_of_turn>model\n",
      "<start_of_turn>user\n你好，你是谁？<end_of_turn>\n<start_of_turn>model\nI am gemlet-demo.",
      "Mixed English 和中文 text, digits 1234567890 and 3.14159",
      "<bos>literal <eos> <pad> <unk> markers",
      "\xE2\x96\x81 a literal U+2581 \xE2\x96\x81\xE2\x96\x81",
      "Ünïcödé façade naïve café — “quotes” and ‘apostrophes’",
      "And God said, Let there be light: and there was light.",
      std::string(300, 'x') + " " + std::string(40, ' ') + "end",
  };
  std::ifstream in(test::TestdataDir() + "/tokenizer/gemma3_goldens.jsonl");
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) texts.push_back(json::parse(line)["text"].get<std::string>());
  }
  return texts;
}

// Test (2): the same ids from the tokenizer loaded from either file, by every route.
TEST(SpmTokenizer, DemoModelEncodesLikeTokenizerJson) {
  auto json_scores = VocabFromMetadata(Demo().from_json);
  auto json_ranks = VocabFromMetadata(Demo().from_json_merges);
  auto model_vocab = VocabFromMetadata(Demo().from_model);
  ASSERT_TRUE(json_scores.ok() && json_ranks.ok() && model_vocab.ok());
  ASSERT_TRUE(json_ranks->has_merges());
  ASSERT_FALSE(model_vocab->has_merges());
  const Tokenizer by_json_scores(std::move(*json_scores)), by_json_ranks(std::move(*json_ranks)),
      by_model(std::move(*model_vocab));

  // tokenizer.model's metadata through a GGUF file, as `gemlet convert` writes it.
  test::TempDir dir;
  GgufWriter w;
  WriteTokenizerMetadata(Demo().from_model, w);
  ASSERT_TRUE(w.Write(dir.File("t.gguf")).ok());
  auto file = GgufFile::Open(dir.File("t.gguf"));
  ASSERT_TRUE(file.ok());
  auto by_gguf = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(by_gguf.ok()) << by_gguf.message();
  auto demo_file = GgufFile::Open(kDemoGguf);
  ASSERT_TRUE(demo_file.ok());
  auto by_demo = Tokenizer::FromGguf(**demo_file);
  ASSERT_TRUE(by_demo.ok());

  const std::vector<std::string> texts = EncodeTexts();
  size_t ids = 0, byte_tokens = 0;
  for (const std::string& text : texts) {
    for (const EncodeOptions& o : {EncodeOptions{}, EncodeOptions{.add_bos = true, .parse_special = true},
                                   EncodeOptions{.add_bos = false, .parse_special = false}}) {
      const std::vector<int32_t> want = by_json_ranks.Encode(text, o);
      ASSERT_EQ(by_model.Encode(text, o), want) << text;
      ASSERT_EQ(by_json_scores.Encode(text, o), want) << text;
      ASSERT_EQ(by_gguf->Encode(text, o), want) << text;
      ASSERT_EQ(by_demo->Encode(text, o), want) << text;
      ASSERT_EQ(by_model.Decode(want), by_json_ranks.Decode(want));
      ids += want.size();
      for (int32_t id : want) byte_tokens += by_model.IsByte(id);
    }
  }
  // Sanity: the cases above hit the features they name.
  EXPECT_EQ(by_model.Encode("<start_of_turn>user\n")[0], 4);
  EXPECT_EQ(by_model.Encode("a\n\nb")[1], 7);
  EXPECT_GT(byte_tokens, 50u);
  std::printf("%zu texts x 3 option sets: %zu ids (%zu byte-fallback) identical from tokenizer.model, "
              "tokenizer.json (scores and ranked merges), its GGUF and gemlet-demo.gguf\n",
              texts.size(), ids, byte_tokens);
}

}  // namespace
}  // namespace gemlet
