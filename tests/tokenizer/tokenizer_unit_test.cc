// Tokenizer behaviour on small hand-made vocabularies: merge order, byte fallback, added tokens,
// decoding rules, UTF-8 handling and GGUF loading errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace gemlet {
namespace {

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kByte = 6;

// A vocabulary under construction; Build() keeps the strings alive for the views in VocabSpec.
struct TestVocab {
  std::string model = "llama";
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  bool with_bytes = true;
  std::optional<bool> add_space_prefix = false;
  // Special ids are never guessed: a vocabulary that adds BOS must name it.
  std::optional<int64_t> bos, eos;
  std::optional<bool> add_bos = false;

  int32_t Add(const std::string& text, float score = 0, int32_t type = kNormal) {
    tokens.push_back(text);
    scores.push_back(score);
    types.push_back(type);
    return static_cast<int32_t>(tokens.size() - 1);
  }

  Tokenizer Build() {
    if (with_bytes) {
      static const char* hex = "0123456789ABCDEF";
      for (int b = 0; b < 256; ++b) Add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0, kByte);
    }
    std::vector<std::string_view> tv(tokens.begin(), tokens.end());
    std::vector<std::string_view> mv(merges.begin(), merges.end());
    VocabSpec spec;
    spec.model = model;
    spec.tokens = tv;
    spec.scores = scores;
    spec.types = types;
    spec.merges = mv;
    spec.add_space_prefix = add_space_prefix;
    spec.bos = bos;
    spec.eos = eos;
    spec.add_bos = add_bos;
    auto v = Vocab::Build(spec);
    EXPECT_TRUE(v.ok()) << v.message();
    return Tokenizer(std::move(*v));
  }
};

std::vector<int32_t> Ids(std::initializer_list<int32_t> ids) { return ids; }

TEST(Tokenizer, SentencePieceMergesByScoreLeftmostFirst) {
  TestVocab v;
  const int32_t pad = v.Add("<pad>", 0, kControl), bos = v.Add("<bos>", 0, kControl);
  const int32_t a = v.Add("a", -100), b = v.Add("b", -100), c = v.Add("c", -100);
  const int32_t ab = v.Add("ab", -5), bc = v.Add("bc", -1), abc = v.Add("abc", -2);
  (void)pad;
  (void)bos;
  Tokenizer tok = v.Build();
  // "bc" scores higher than "ab": a + bc, then a+bc = abc.
  EXPECT_EQ(tok.Encode("abc"), Ids({abc}));
  // Ties go to the leftmost pair: "aa" is not a token, "ab" twice with the same score.
  EXPECT_EQ(tok.Encode("abab"), Ids({ab, ab}));
  EXPECT_EQ(tok.Encode("ba"), Ids({b, a}));
  EXPECT_EQ(tok.Encode("cab"), Ids({c, ab}));
  (void)bc;
}

TEST(Tokenizer, RankedMergesFollowRanksNotScores) {
  TestVocab v;
  v.model = "gemma4";
  const int32_t a = v.Add("a"), b = v.Add("b"), c = v.Add("c");
  const int32_t ab = v.Add("ab"), bc = v.Add("bc");
  v.merges = {"a b", "b c"};  // "a b" first although "bc" would win on scores
  v.bos = v.Add("<bos>", 0, kControl);  // Gemma 4 always adds BOS, so it must be named
  Tokenizer tok = v.Build();
  EXPECT_TRUE(tok.vocab().has_merges());
  EXPECT_EQ(tok.Encode("abc"), Ids({ab, c}));
  EXPECT_EQ(tok.Encode("bc"), Ids({bc}));
  (void)a;
  (void)b;
}

TEST(Tokenizer, SpacesBecomeLowerOneEighthBlockAndDecodeBack) {
  TestVocab v;
  const int32_t sp = v.Add("\xE2\x96\x81", -1), h = v.Add("h", -1), i = v.Add("i", -1);
  const int32_t sph = v.Add("\xE2\x96\x81h", -0.5f), hi = v.Add("hi", -0.1f), sphi = v.Add("\xE2\x96\x81hi", -0.2f);
  Tokenizer tok = v.Build();
  EXPECT_EQ(tok.Encode("hi hi"), Ids({hi, sphi}));
  EXPECT_EQ(tok.Decode(tok.Encode("hi hi")), "hi hi");
  EXPECT_EQ(tok.Encode(" "), Ids({sp}));
  // A literal U+2581 is the same as a space and decodes to one.
  EXPECT_EQ(tok.Encode("\xE2\x96\x81hi"), Ids({sphi}));
  EXPECT_EQ(tok.Decode(Ids({sph, i})), " hi");
  (void)h;
}

TEST(Tokenizer, ByteFallbackAndUnknown) {
  TestVocab v;
  const int32_t a = v.Add("a", -1);
  Tokenizer tok = v.Build();
  const int32_t e4 = tok.vocab().ByteToken(0xE4), b8 = tok.vocab().ByteToken(0xB8), ad = tok.vocab().ByteToken(0xAD);
  EXPECT_EQ(tok.Encode("a\xE4\xB8\xAD" "a"), Ids({a, e4, b8, ad, a}));  // 中 is not in the vocabulary
  EXPECT_EQ(tok.Decode(tok.Encode("a中a")), "a中a");
  EXPECT_TRUE(tok.IsByte(e4));
  EXPECT_FALSE(tok.IsByte(a));
}

TEST(Tokenizer, UnknownTokenFusesWhenNoBytes) {
  TestVocab u;
  u.with_bytes = false;
  const int32_t unk = u.Add("<unk>", 0, 2);
  const int32_t x = u.Add("x", -1);
  std::vector<std::string_view> tv(u.tokens.begin(), u.tokens.end());
  VocabSpec spec;
  spec.model = "llama";
  spec.tokens = tv;
  spec.scores = u.scores;
  spec.types = u.types;
  spec.unk = unk;
  spec.add_space_prefix = false;
  spec.add_bos = false;
  auto vocab = Vocab::Build(spec);
  ASSERT_TRUE(vocab.ok()) << vocab.message();
  Tokenizer tok(std::move(*vocab));
  EXPECT_EQ(tok.Encode("x\xC3\xA9\xC3\xA9x"), Ids({x, unk, x}));  // "éé" fuse into one <unk>
}

TEST(Tokenizer, AddedTokensLeftmostLongestAndParseSpecial) {
  TestVocab v;
  const int32_t ctl = v.Add("<start_of_turn>", 0, kControl);
  const int32_t nl = v.Add("\n", 0, kUserDefined), nl2 = v.Add("\n\n", 0, kUserDefined);
  const int32_t ab = v.Add("ab", 0, kUserDefined), bcd = v.Add("bcd", 0, kUserDefined);
  const int32_t sp2 = v.Add("  ", 0, kUserDefined);  // llama.cpp stores "▁▁" as two spaces
  const int32_t a = v.Add("a", -1), b = v.Add("b", -1), c = v.Add("c", -1), d = v.Add("d", -1);
  for (const char* ch : {"<", ">", "s", "t", "r", "_", "o", "f", "u", "n"}) v.Add(ch, -1);
  Tokenizer tok = v.Build();
  // Leftmost wins over longest-anywhere: "ab" at 0 beats "bcd" at 1.
  EXPECT_EQ(tok.Encode("abcd"), Ids({ab, c, d}));
  EXPECT_EQ(tok.Encode("xbcd").back(), bcd);
  // Longest at the same place.
  EXPECT_EQ(tok.Encode("\n\n\n"), Ids({nl2, nl}));
  // Both spellings of a space run match: raw spaces and literal U+2581.
  EXPECT_EQ(tok.Encode("a  b"), Ids({a, sp2, b}));
  EXPECT_EQ(tok.Encode("a\xE2\x96\x81\xE2\x96\x81" "b"), Ids({a, sp2, b}));
  EXPECT_EQ(tok.Decode(Ids({a, sp2, b})), "a  b");
  // Control tokens only with parse_special.
  EXPECT_EQ(tok.Encode("<start_of_turn>a")[0], ctl);
  const std::vector<int32_t> plain = tok.Encode("<start_of_turn>a\n", {.parse_special = false});
  EXPECT_EQ(std::count(plain.begin(), plain.end(), ctl), 0);
  EXPECT_EQ(plain.back(), nl);
  EXPECT_EQ(tok.Decode(plain), "<start_of_turn>a\n");
}

TEST(Tokenizer, BosEosAndSpecialIds) {
  TestVocab v;
  v.Add("<pad>", 0, kControl);
  const int32_t bos = v.Add("<bos>", 0, kControl), eos = v.Add("<eos>", 0, kControl);
  const int32_t eot = v.Add("<end_of_turn>", 0, kControl), sot = v.Add("<start_of_turn>", 0, kControl);
  const int32_t a = v.Add("a", -1);
  v.bos = bos;
  v.eos = eos;
  v.add_bos = true;
  Tokenizer tok = v.Build();
  // bos and eos from the keys; eot/start_of_turn by text.
  EXPECT_EQ(tok.bos_id(), bos);
  EXPECT_EQ(tok.eos_id(), eos);
  EXPECT_EQ(tok.eot_id(), eot);
  EXPECT_EQ(tok.start_of_turn_id(), sot);
  EXPECT_EQ(tok.Encode("", {.add_bos = true}), Ids({1}));
  EXPECT_EQ(tok.Encode("a", {.add_bos = true, .add_eos = true}), Ids({1, a, 2}));
  EXPECT_EQ(tok.Decode(Ids({bos, a, eos})), "<bos>a<eos>");
  EXPECT_EQ(tok.Decode(Ids({bos, a, eos}), {.skip_special = true}), "a");
  EXPECT_EQ(tok.Decode(Ids({-1, 1 << 30, a})), "a");
  EXPECT_EQ(tok.TokenPiece(a), "a");
  EXPECT_EQ(tok.TokenPiece(-5), "");
}

// llama.cpp would take id 1 for a "llama" vocabulary without a bos_token_id key; in Gemma's
// vocabularies that is <eos>. We refuse instead, and a vocabulary that adds no BOS needs none.
TEST(Tokenizer, ABosThatIsAddedButNotNamedIsAnError) {
  for (std::optional<bool> add_bos : {std::optional<bool>(), std::optional<bool>(true)}) {
    std::vector<std::string_view> tokens = {"<pad>", "<eos>", "<bos>", "a"};
    std::vector<float> scores(tokens.size(), 0.0f);
    std::vector<int32_t> types = {kControl, kControl, kControl, kNormal};
    VocabSpec spec;
    spec.model = "llama";
    spec.tokens = tokens;
    spec.scores = scores;
    spec.types = types;
    spec.add_bos = add_bos;  // unset: SentencePiece vocabularies add BOS by default
    auto v = Vocab::Build(spec);
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.message().find("bos_token_id"), std::string::npos) << v.message();
    spec.bos = 2;
    auto named = Vocab::Build(spec);
    ASSERT_TRUE(named.ok()) << named.message();
    EXPECT_EQ(Tokenizer(std::move(*named)).Encode("a", {.add_bos = true}).front(), 2);
    spec.bos.reset();
    spec.add_bos = false;
    auto without = Vocab::Build(spec);
    ASSERT_TRUE(without.ok()) << without.message();
    EXPECT_EQ(Tokenizer(std::move(*without)).bos_id(), -1);
  }
}

TEST(Tokenizer, DecodeByteRunsLikeHf) {
  TestVocab v;
  const int32_t a = v.Add("a", -1);
  Tokenizer tok = v.Build();
  auto byte = [&](int b) { return tok.vocab().ByteToken(static_cast<uint8_t>(b)); };
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(tok.Decode(Ids({byte(0xE4), byte(0xB8), byte(0xAD)})), "中");
  // HF ByteFallback: a run that is invalid as a whole becomes one U+FFFD per byte.
  EXPECT_EQ(tok.Decode(Ids({byte(0xE4), byte(0xB8), byte(0xAD), byte(0xFF), a})), fffd + fffd + fffd + fffd + "a");
  EXPECT_EQ(tok.Decode(Ids({byte(0xE4), a, byte(0xB8)})), fffd + "a" + fffd);
}

TEST(Tokenizer, StreamDecoderSkipsSpecialAndHoldsBytes) {
  TestVocab v;
  const int32_t bos = v.Add("<bos>", 0, kControl);
  const int32_t a = v.Add("\xE2\x96\x81" "a", -1);
  Tokenizer tok = v.Build();
  auto byte = [&](int b) { return tok.vocab().ByteToken(static_cast<uint8_t>(b)); };
  StreamDecoder s(tok, {.skip_special = true});
  EXPECT_EQ(s.Push(bos), "");
  EXPECT_EQ(s.Push(byte(0xE4)), "");
  EXPECT_EQ(s.Push(bos), "");  // skipped: the character stays open
  EXPECT_EQ(s.Push(byte(0xB8)), "");
  EXPECT_EQ(s.Push(byte(0xAD)), "中");
  EXPECT_EQ(s.Push(a), " a");
  EXPECT_EQ(s.Flush(), "");
}

TEST(Tokenizer, DummyPrefixWhenTheVocabularyAsksForIt) {
  TestVocab v;
  v.add_space_prefix = std::nullopt;  // "llama" default: true, as SentencePiece's add_dummy_prefix
  const int32_t sp = v.Add("\xE2\x96\x81", -1), a = v.Add("a", -1), spa = v.Add("\xE2\x96\x81" "a", -0.5f);
  Tokenizer tok = v.Build();
  EXPECT_TRUE(tok.vocab().add_space_prefix());
  EXPECT_EQ(tok.Encode("a a"), Ids({spa, spa}));
  EXPECT_EQ(tok.Decode(Ids({spa, spa})), "a a");
  StreamDecoder s(tok);
  EXPECT_EQ(s.Push(spa), "a");
  EXPECT_EQ(s.Push(spa), " a");
  (void)sp;
  (void)a;
}

TEST(Tokenizer, Gemma4SplitsNewlineRuns) {
  TestVocab v;
  v.model = "gemma4";
  const int32_t nl = v.Add("\n"), nl2 = v.Add("\n\n"), a = v.Add("a"), anl = v.Add("a\n");
  v.merges = {"a \n", "\n \n"};
  v.bos = v.Add("<bos>", 0, kControl);
  Tokenizer tok = v.Build();
  // "a\n" is never formed: newline runs are split off first; a whole run that is a token is taken.
  EXPECT_EQ(tok.Encode("a\na"), Ids({a, nl, a}));
  EXPECT_EQ(tok.Encode("\n\n"), Ids({nl2}));
  EXPECT_EQ(tok.Encode("\n\n\n"), Ids({nl2, nl}));
  EXPECT_TRUE(tok.vocab().add_bos());  // forced on for Gemma 4, as llama.cpp does
  (void)anl;
}

TEST(Tokenizer, Utf8Validation) {
  EXPECT_TRUE(IsValidUtf8("abc中🦙"));
  EXPECT_FALSE(IsValidUtf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\x80"));      // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE4\xB8"));          // truncated
  EXPECT_EQ(ValidUtf8Prefix("ab\xE4\xB8"), 2u);
}

TEST(Tokenizer, InvalidUtf8InputStillEncodes) {
  TestVocab v;
  const int32_t a = v.Add("a", -1);
  Tokenizer tok = v.Build();
  const std::vector<int32_t> ids = tok.Encode("a\xFF\xE4" "a");
  EXPECT_EQ(ids, Ids({a, tok.vocab().ByteToken(0xFF), tok.vocab().ByteToken(0xE4), a}));
}

TEST(Vocab, RejectsBadMetadata) {
  std::vector<std::string_view> tokens = {"a", "b"};
  std::vector<float> scores = {0};
  VocabSpec spec;
  spec.model = "gpt2";
  spec.tokens = tokens;
  auto r = Vocab::Build(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("'gpt2'"), std::string::npos) << r.message();

  spec.model = "llama";
  spec.scores = scores;
  r = Vocab::Build(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("tokenizer.ggml.scores"), std::string::npos) << r.message();

  spec.scores = {};
  spec.model = "gemma4";
  r = Vocab::Build(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("tokenizer.ggml.merges"), std::string::npos) << r.message();

  std::vector<std::string_view> merges = {"ab"};
  spec.merges = merges;
  r = Vocab::Build(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("merges[0]"), std::string::npos) << r.message();

  spec.tokens = {};
  spec.model = "llama";
  spec.merges = {};
  r = Vocab::Build(spec);
  EXPECT_FALSE(r.ok());
}

TEST(Vocab, LoadsFromGgufKeys) {
  test::TempDir dir;
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>", "<unk>", "a", "b", "ab"});
  w.SetF32Array("tokenizer.ggml.scores", {0, 0, 0, 0, -2, -2, -1});
  w.SetI32Array("tokenizer.ggml.token_type", {3, 3, 3, 2, 1, 1, 1});
  w.SetU32("tokenizer.ggml.bos_token_id", 2);
  w.SetU32("tokenizer.ggml.eos_token_id", 1);
  w.SetU32("tokenizer.ggml.unknown_token_id", 3);
  w.SetU32("tokenizer.ggml.padding_token_id", 0);
  w.SetBool("tokenizer.ggml.add_space_prefix", false);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  ASSERT_TRUE(w.Write(dir.File("v.gguf")).ok());
  auto file = GgufFile::Open(dir.File("v.gguf"));
  ASSERT_TRUE(file.ok()) << file.message();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.message();
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_EQ(tok->unk_id(), 3);
  EXPECT_EQ(tok->pad_id(), 0);
  EXPECT_TRUE(tok->vocab().add_bos());
  EXPECT_EQ(tok->Encode("abab", {.add_bos = true}), Ids({2, 6, 6}));

  GgufWriter bad;
  bad.SetString("tokenizer.ggml.model", "llama");
  bad.SetStringArray("tokenizer.ggml.tokens", {"a"});
  bad.SetString("tokenizer.ggml.bos_token_id", "two");
  ASSERT_TRUE(bad.Write(dir.File("bad.gguf")).ok());
  auto bad_file = GgufFile::Open(dir.File("bad.gguf"));
  ASSERT_TRUE(bad_file.ok());
  auto bad_tok = Tokenizer::FromGguf(**bad_file);
  ASSERT_FALSE(bad_tok.ok());
  EXPECT_NE(bad_tok.message().find("tokenizer.ggml.bos_token_id"), std::string::npos) << bad_tok.message();

  GgufWriter none;
  none.SetString("general.architecture", "gemma3");
  ASSERT_TRUE(none.Write(dir.File("none.gguf")).ok());
  auto none_file = GgufFile::Open(dir.File("none.gguf"));
  ASSERT_TRUE(none_file.ok());
  auto none_tok = Tokenizer::FromGguf(**none_file);
  ASSERT_FALSE(none_tok.ok());
  EXPECT_NE(none_tok.message().find("tokenizer.ggml.model"), std::string::npos) << none_tok.message();
}

}  // namespace
}  // namespace gemlet

namespace gemlet {
namespace {

// A small HF folder exercising the converter's rules (llama.cpp _set_vocab_sentencepiece + SpecialVocab).
TEST(HfTokenizerJson, SmallSentencePieceFolder) {
  using json = nlohmann::json;
  const std::string sp = "\xE2\x96\x81";
  json vocab = {{"<pad>", 0}, {"<eos>", 1}, {"<bos>", 2}, {"<unk>", 3}, {"<unused0>", 4}, {sp + sp, 5},
                {sp, 6},      {"a", 7},     {"b", 8},     {"ab", 9},    {sp + "ab", 10},  {"<0x41>", 11}};
  json added = json::array();
  const std::vector<std::tuple<int, std::string, bool>> added_list = {
      {0, "<pad>", true}, {1, "<eos>", true}, {2, "<bos>", true}, {3, "<unk>", true},
      {4, "<unused0>", false}, {5, sp + sp, false}, {12, "<extra>", true}};
  for (const auto& [id, content, special] : added_list) {
    added.push_back({{"id", id}, {"content", content}, {"special", special}, {"normalized", false}});
  }
  const json tokenizer = {
      {"added_tokens", added},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({json{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
                                json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}},
      {"model",
       {{"type", "BPE"},
        {"unk_token", "<unk>"},
        {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", json::array({json::array({sp, sp}), json::array({"a", "b"}), json::array({sp, "ab"})})}}}};
  test::TempDir dir;
  std::ofstream(dir.File("tokenizer.json")) << tokenizer.dump();
  std::ofstream(dir.File("tokenizer_config.json"))
      << json{{"bos_token", "<bos>"}, {"eos_token", {{"content", "<eos>"}}}, {"pad_token", "<pad>"},
              {"unk_token", "<unk>"}, {"add_eos_token", false}}
             .dump();
  std::ofstream(dir.File("chat_template.jinja")) << "{{ messages }}";
  std::filesystem::create_directories(dir.File("additional_chat_templates"));
  std::ofstream(dir.File("additional_chat_templates/tool-use.jinja")) << "{{ tools }}";

  auto meta = ReadHfTokenizer(dir.path(), "gemma2");
  ASSERT_TRUE(meta.ok()) << meta.message();
  EXPECT_EQ(meta->model, "llama");
  ASSERT_EQ(meta->tokens.size(), 13u);  // no config.json: the added <extra> extends the vocabulary
  EXPECT_EQ(meta->tokens[5], "  ");
  EXPECT_EQ(meta->types[5], kUserDefined);
  EXPECT_EQ(meta->types[4], kControl);  // <unused0> looks special
  EXPECT_EQ(meta->types[11], kByte);
  EXPECT_EQ(meta->types[12], kControl);
  EXPECT_EQ(meta->scores[9], -1.0f);  // "ab": merge rank 1
  EXPECT_EQ(meta->scores[10], -2.0f);
  EXPECT_EQ(meta->scores[5], -1000.0f);
  EXPECT_EQ(meta->bos, 2u);
  EXPECT_EQ(meta->eos, 1u);
  EXPECT_EQ(meta->pad, 0u);
  EXPECT_EQ(meta->unk, 3u);
  EXPECT_EQ(meta->add_bos, true);  // from the TemplateProcessing post-processor
  EXPECT_EQ(meta->add_eos, false);
  EXPECT_EQ(meta->add_space_prefix, false);
  EXPECT_EQ(meta->chat_template, "{{ messages }}");
  ASSERT_EQ(meta->named_chat_templates.size(), 1u);
  EXPECT_EQ(meta->named_chat_templates[0].first, "tool_use");
  EXPECT_TRUE(meta->merges.empty());

  GgufWriter w;
  ASSERT_TRUE(AddHfTokenizerMetadata(dir.path(), "gemma3", w).ok());
  ASSERT_TRUE(w.Write(dir.File("t.gguf")).ok());
  auto file = GgufFile::Open(dir.File("t.gguf"));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*(*file)->GetString("tokenizer.chat_template.tool_use"), "{{ tools }}");
  EXPECT_EQ(*(*file)->GetStringArray("tokenizer.chat_templates"), std::vector<std::string_view>{"tool_use"});
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.message();
  EXPECT_EQ(tok->Encode("ab ab  ab", {.add_bos = true}), Ids({2, 9, 10, 5, 9}));
  EXPECT_EQ(tok->Decode(tok->Encode("ab ab  ab")), "ab ab  ab");

  GgufWriter w2;
  const Status bad_arch = AddHfTokenizerMetadata(dir.path(), "llama", w2);
  ASSERT_FALSE(bad_arch.ok());
  EXPECT_NE(bad_arch.message().find("'llama'"), std::string::npos) << bad_arch.message();
  const Status missing = AddHfTokenizerMetadata(dir.File("nope"), "gemma3", w2);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("tokenizer.json"), std::string::npos) << missing.message();
  std::ofstream(dir.File("tokenizer.json")) << "{ not json";
  const Status broken = AddHfTokenizerMetadata(dir.path(), "gemma3", w2);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.message().find("not valid JSON"), std::string::npos) << broken.message();
}

}  // namespace
}  // namespace gemlet
