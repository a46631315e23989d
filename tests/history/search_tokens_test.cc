// The history store's tokens: CJK bigrams and characters, folded words, and queries tokenized alike.
#include "history/search_tokens.h"

#include <gtest/gtest.h>

#include "history/search_index.h"

namespace gemlet::history {
namespace {

using Tokens = std::vector<std::string>;

TEST(SearchTokens, ChineseRunsBecomeOverlappingBigramsAndCharacters) {
  const IndexTokens t = TokenizeForIndex("今天天气很好。");
  EXPECT_EQ(t.grams, (Tokens{"今天", "天天", "天气", "气很", "很好"}));
  EXPECT_EQ(t.chars, (Tokens{"今", "天", "天", "气", "很", "好"}));
}

TEST(SearchTokens, WordsAreCaseFoldedAndSplitAtPunctuation) {
  const IndexTokens t = TokenizeForIndex("What's the WEATHER like? Ünïcode—Straße, ПРИВЕТ 2024");
  EXPECT_EQ(t.grams, (Tokens{"what", "s", "the", "weather", "like", "ünïcode", "straße", "привет", "2024"}));
  EXPECT_TRUE(t.chars.empty());
}

TEST(SearchTokens, MixedScriptsSplitWhereTheScriptChanges) {
  const IndexTokens t = TokenizeForIndex("用Gemma模型写诗，ＧＥＭＭＡ也行");
  EXPECT_EQ(t.grams, (Tokens{"gemma", "模型", "型写", "写诗", "gemma", "也行"}));
  EXPECT_EQ(t.chars, (Tokens{"用", "模", "型", "写", "诗", "也", "行"}));
}

TEST(SearchTokens, JapaneseAndKoreanAreBigrammedToo) {
  EXPECT_EQ(TokenizeForIndex("東京タワー").grams, (Tokens{"東京", "京タ", "タワ", "ワー"}));
  EXPECT_EQ(TokenizeForIndex("안녕하세요").grams, (Tokens{"안녕", "녕하", "하세", "세요"}));
}

TEST(SearchTokens, InvalidUtf8AndEmojiSeparateButLoseNothingElse) {
  const IndexTokens t = TokenizeForIndex(std::string("ab\xff\xfe" "cd 天\xc3" "气 😀好人"));
  EXPECT_EQ(t.grams, (Tokens{"ab", "cd", "好人"}));
  EXPECT_EQ(t.chars, (Tokens{"天", "气", "好", "人"}));
}

TEST(SearchTokens, LongWordsAreCutAtACharacterBoundary) {
  const IndexTokens t = TokenizeForIndex(std::string(100, 'x') + " " + std::string(kMaxWordBytes - 1, 'y') + "éz");
  ASSERT_EQ(t.grams.size(), 2u);
  EXPECT_EQ(t.grams[0], std::string(kMaxWordBytes, 'x'));
  EXPECT_EQ(t.grams[1], std::string(kMaxWordBytes - 1, 'y'));  // é does not fit, and nothing after it joins
}

TEST(SearchTokens, QueriesKeepOneTermPerRun) {
  const std::vector<QueryTerm> q = TokenizeQuery("天气 Weather 好 北京天气");
  ASSERT_EQ(q.size(), 4u);
  EXPECT_EQ(q[0].tokens, (Tokens{"天气"}));
  EXPECT_FALSE(q[0].single_char);
  EXPECT_EQ(q[1].tokens, (Tokens{"weather"}));
  EXPECT_EQ(q[2].tokens, (Tokens{"好"}));
  EXPECT_TRUE(q[2].single_char);
  EXPECT_EQ(q[3].tokens, (Tokens{"北京", "京天", "天气"}));
  EXPECT_EQ(q[3].text, "北京天气");
  EXPECT_TRUE(TokenizeQuery(" ?！。…").empty());
}

TEST(SearchTokens, MatchExpressionsArePhrasesJoinedByAnd) {
  EXPECT_EQ(MatchExpression(TokenizeQuery("北京天气 rain 雨"), nullptr),
            "grams : \"北京 京天 天气\" AND grams : \"rain\" AND chars : \"雨\"");
}

}  // namespace
}  // namespace gemlet::history
