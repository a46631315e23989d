// Gemma 3's pan-and-scan prompt (AppendMedia of an image with crops) against Gemma3Processor's ids
// (tests/data/hf-mm/gemma3_pan_and_scan, tools/mm_reference/pan_and_scan_goldens.py). The golden's
// tokenizer is word-level (whitespace split, "\n\n" an added token, the expansion's words at ids of
// their own), so PanAndScanText's pieces are tokenized here the way it tokenizes them; the layout
// around them (markers, placeholders, spans) is AppendMedia's.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "runtime/media_prompt.h"

namespace gemlet::runtime {
namespace {

const std::string kGolden = std::string(GEMLET_SOURCE_DIR) + "/tests/data/hf-mm/gemma3_pan_and_scan";

struct WordTokenizer {
  std::map<std::string, int32_t> words;
  int32_t newlines = -1;
  // The golden's pre-tokenization: the added token "\n\n" split out, the rest split at whitespace.
  std::vector<int32_t> operator()(const std::string& text) const {
    std::vector<int32_t> ids;
    size_t at = 0;
    while (at <= text.size()) {
      const size_t nl = std::min(text.find("\n\n", at), text.size());
      std::istringstream words_in(text.substr(at, nl - at));
      for (std::string w; words_in >> w;) ids.push_back(words.at(w));
      if (nl == text.size()) break;
      ids.push_back(newlines);
      at = nl + 2;
    }
    return ids;
  }
};

TEST(PanAndScanPrompt, MatchesGemma3ProcessorIds) {
  const nlohmann::json g = test::ReadJson(kGolden + "/input_ids.json");
  const std::vector<int32_t> want = g["input_ids"].get<std::vector<int32_t>>();
  const std::vector<std::string> tokens = g["tokens"].get<std::vector<std::string>>();
  WordTokenizer tok;
  tok.words = g["expansion_words"].get<std::map<std::string, int32_t>>();
  int32_t boi = -1, eoi = -1, soft = -1;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == "\n\n") tok.newlines = want[i];
    if (tokens[i] == "<start_of_image>") boi = want[i];
    if (tokens[i] == "<end_of_image>") eoi = want[i];
    if (tokens[i] == "<image_soft_token>") soft = want[i];
  }
  ASSERT_TRUE(tok.newlines >= 0 && boi >= 0 && eoi >= 0 && soft >= 0);

  // Gemma 3's markup as FindMediaMarkup builds it, the pieces through the golden's tokenizer.
  MediaMarkup markup;
  markup.before = {tok.newlines, boi};
  markup.placeholder = soft;
  markup.after = {eoi, tok.newlines};
  markup.original = tok(PanAndScanText::kOriginal);
  markup.crops_intro = tok(PanAndScanText::kCropsIntro);
  markup.between_crops = tok(PanAndScanText::kBetweenCrops);
  markup.last = tok(PanAndScanText::kLast);

  const nlohmann::json meta = test::ReadJson(kGolden + "/meta.json");
  const int n_soft = meta["mm_tokens_per_image"].get<int>();
  const int n_crops = meta["pixel_values_shape"][0].get<int>() - 1;
  const auto image = [&] {
    auto m = std::make_shared<EncodedMedia>();
    m->n_tokens = n_soft;
    m->two_way = true;
    return m;
  };
  auto whole = image();
  for (int i = 0; i < n_crops; ++i) whole->crops.push_back(image());

  // The golden's text around the image: "<bos>w245 w279 w130 " <image> "w115 w296 w8 w366 ".
  size_t first = 0;
  while (tokens[first] != "Here") ++first;
  size_t rest = want.size();
  while (tokens[rest - 1] != "\n\n") --rest;
  Prompt prompt;
  prompt.tokens.assign(want.begin(), want.begin() + static_cast<long>(first));
  AppendMedia(markup, whole, &prompt);
  prompt.tokens.insert(prompt.tokens.end(), want.begin() + static_cast<long>(rest), want.end());
  EXPECT_EQ(prompt.tokens, want);

  // A span on each image's placeholders: the whole image first, then the crops.
  ASSERT_EQ(prompt.media.size(), static_cast<size_t>(1 + n_crops));
  EXPECT_EQ(prompt.media[0].media, whole);
  for (size_t i = 0; i < prompt.media.size(); ++i) {
    const MediaSpan& s = prompt.media[i];
    if (i > 0) {
      EXPECT_EQ(s.media, whole->crops[i - 1]);
    }
    EXPECT_EQ(prompt.tokens[static_cast<size_t>(s.position) - 1], boi);
    for (int k = 0; k < n_soft; ++k) EXPECT_EQ(prompt.tokens[static_cast<size_t>(s.position + k)], soft);
    EXPECT_EQ(prompt.tokens[static_cast<size_t>(s.position + n_soft)], eoi);
  }

  // Without crops the image keeps the plain markup.
  Prompt plain;
  AppendMedia(markup, image(), &plain);
  std::vector<int32_t> expected = {tok.newlines, boi};
  expected.insert(expected.end(), static_cast<size_t>(n_soft), soft);
  expected.insert(expected.end(), {eoi, tok.newlines});
  EXPECT_EQ(plain.tokens, expected);
}

}  // namespace
}  // namespace gemlet::runtime
