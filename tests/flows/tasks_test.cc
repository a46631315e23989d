// The task prompts: chosen by the input's language, filled in (style, target, schema, glossary),
// bad requests refused; the cleanup that leaves only the result; text split for summaries.
#include "flows/tasks.h"

#include <gtest/gtest.h>

namespace gemlet::flows {
namespace {

TEST(Tasks, ThePromptFollowsTheInputsLanguage) {
  Result<TaskPrompt> en = BuildTaskPrompt({.task = "polish", .text = "  please send me the notes  \n"});
  ASSERT_TRUE(en.ok()) << en.message();
  EXPECT_EQ(en->user, "please send me the notes");
  EXPECT_EQ(en->answer_language, "en");
  EXPECT_NE(en->system.find("Write in English."), std::string::npos) << en->system;

  Result<TaskPrompt> zh = BuildTaskPrompt({.task = "polish", .text = "请把会议纪要发给我"});
  ASSERT_TRUE(zh.ok());
  EXPECT_EQ(zh->answer_language, "zh-Hans");
  EXPECT_NE(zh->system.find("用简体中文书写"), std::string::npos) << zh->system;

  Result<TaskPrompt> hant = BuildTaskPrompt({.task = "summarize", .text = "請把會議紀要發給我"});
  ASSERT_TRUE(hant.ok());
  EXPECT_EQ(hant->answer_language, "zh-Hant");
  EXPECT_NE(hant->system.find("繁體中文"), std::string::npos);

  // Mixed lines get the Chinese prompt and a Chinese answer.
  Result<TaskPrompt> mixed = BuildTaskPrompt({.task = "rewrite", .text = "明天的 meeting 改到 3pm", .style = "casual"});
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->answer_language, "zh-Hans");
  EXPECT_NE(mixed->system.find("轻松口语化"), std::string::npos) << mixed->system;
  for (const auto* p : {&*en, &*zh, &*hant, &*mixed}) EXPECT_EQ(p->system.find('{'), std::string::npos) << p->system;

  // Any other detected language: the English prompt, naming that language (issue #42: French was
  // answered in English).
  Result<TaskPrompt> fr = BuildTaskPrompt({.task = "polish", .text = "Bonjour, pouvez-vous m'aider ?"});
  ASSERT_TRUE(fr.ok());
  EXPECT_EQ(fr->input.tag, "fr");
  EXPECT_EQ(fr->answer_language, "fr");
  EXPECT_NE(fr->system.find("Write in French."), std::string::npos) << fr->system;
  Result<TaskPrompt> ja = BuildTaskPrompt({.task = "rewrite", .text = "明日の会議は午後三時に変更になりました。"});
  ASSERT_TRUE(ja.ok());
  EXPECT_EQ(ja->answer_language, "ja");
  EXPECT_NE(ja->system.find("Japanese"), std::string::npos) << ja->system;
  // Without letters there is no language to follow: English.
  Result<TaskPrompt> digits = BuildTaskPrompt({.task = "polish", .text = "2024-05-01 12:00"});
  ASSERT_TRUE(digits.ok());
  EXPECT_EQ(digits->answer_language, "en");
}

TEST(Tasks, TargetsSchemasAndBadRequests) {
  Result<TaskPrompt> t = BuildTaskPrompt({.task = "translate", .text = "see you tomorrow", .to = "zh"});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->answer_language, "zh-Hans");
  EXPECT_NE(t->system.find("into Simplified Chinese"), std::string::npos) << t->system;
  Result<TaskPrompt> sql = BuildTaskPrompt({.task = "sql", .text = "每个月的销售额", .schema = "CREATE TABLE sales(day DATE, amount INT);"});
  ASSERT_TRUE(sql.ok());
  EXPECT_NE(sql->system.find("CREATE TABLE sales"), std::string::npos) << sql->system;

  EXPECT_NE(BuildTaskPrompt({.task = "poem", .text = "x"}).message().find("unknown task 'poem'"), std::string::npos);
  EXPECT_NE(BuildTaskPrompt({.task = "polish", .text = " \n "}).message().find("empty"), std::string::npos);
  EXPECT_NE(BuildTaskPrompt({.task = "translate", .text = "hi"}).message().find("--to"), std::string::npos);
  EXPECT_NE(BuildTaskPrompt({.task = "translate", .text = "hi", .to = "xx"}).message().find("unknown language 'xx'"), std::string::npos);
  EXPECT_NE(BuildTaskPrompt({.task = "rewrite", .text = "hi", .style = "pirate"}).message().find("unknown style"), std::string::npos);
}

// describe takes an image, transcribe a clip, translate either; the media may be the whole input.
TEST(Tasks, MediaTasksTakeTheirMediaAndNoOtherTaskDoes) {
  Result<TaskPrompt> describe = BuildTaskPrompt({.task = "describe", .media = "image"});
  ASSERT_TRUE(describe.ok()) << describe.message();
  EXPECT_EQ(describe->user, "Describe this image.");
  EXPECT_EQ(describe->answer_language, "en");
  Result<TaskPrompt> describe_zh = BuildTaskPrompt({.task = "describe", .to = "zh", .media = "image"});
  ASSERT_TRUE(describe_zh.ok());
  EXPECT_EQ(describe_zh->user, "描述这张图片。");
  EXPECT_NE(describe_zh->system.find("用简体中文书写"), std::string::npos) << describe_zh->system;
  // The user's own words lead, in their language.
  Result<TaskPrompt> asked = BuildTaskPrompt({.task = "describe", .text = "这张登机牌上的登机口是几号？", .media = "image"});
  ASSERT_TRUE(asked.ok());
  EXPECT_EQ(asked->user, "这张登机牌上的登机口是几号？");
  EXPECT_EQ(asked->answer_language, "zh-Hans");

  // Transcribing keeps the language spoken unless --to asks for a translation.
  Result<TaskPrompt> as_spoken = BuildTaskPrompt({.task = "transcribe", .media = "audio"});
  ASSERT_TRUE(as_spoken.ok());
  EXPECT_EQ(as_spoken->answer_language, "as spoken");
  EXPECT_NE(as_spoken->system.find("in the language they are spoken in"), std::string::npos) << as_spoken->system;
  Result<TaskPrompt> into_zh = BuildTaskPrompt({.task = "transcribe", .to = "zh", .media = "audio"});
  ASSERT_TRUE(into_zh.ok());
  EXPECT_EQ(into_zh->answer_language, "zh-Hans");
  EXPECT_NE(into_zh->system.find("用简体中文：如果说的是别的语言，就翻译过来"), std::string::npos) << into_zh->system;
  Result<TaskPrompt> boarding = BuildTaskPrompt({.task = "translate", .to = "zh", .media = "image"});
  ASSERT_TRUE(boarding.ok());
  EXPECT_EQ(boarding->user, "翻译这张图片中的文字。");
  for (const auto* p : {&*describe, &*describe_zh, &*as_spoken, &*into_zh, &*boarding}) {
    EXPECT_EQ(p->system.find('{'), std::string::npos) << p->system;
  }

  EXPECT_NE(BuildTaskPrompt({.task = "describe", .text = "hi"}).message().find("needs an image"), std::string::npos);
  EXPECT_NE(BuildTaskPrompt({.task = "describe", .media = "audio"}).message().find("needs an image"), std::string::npos);
  EXPECT_NE(BuildTaskPrompt({.task = "transcribe", .media = "image"}).message().find("needs an audio clip"), std::string::npos);
  EXPECT_NE(BuildTaskPrompt({.task = "polish", .text = "hi", .media = "image"}).message().find("takes text, not images"),
            std::string::npos);
}

TEST(Tasks, GlossaryTermsInTheTextAreListed) {
  const std::string glossary = "# term\trendering\tnote\n毛肚\tbeef tripe\thotpot\n钵钵鸡\tbobo chicken\nGemlet\tGemlet\tproduct name\n\nunused\tnever\n";
  Result<std::vector<GlossaryEntry>> parsed = ParseGlossary(glossary);
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EXPECT_EQ(parsed->size(), 4u);
  Result<TaskPrompt> t = BuildTaskPrompt({.task = "translate", .text = "今晚吃毛肚和钵钵鸡，用 gemlet 记下来", .to = "en", .glossary_tsv = glossary});
  ASSERT_TRUE(t.ok()) << t.message();
  ASSERT_EQ(t->terms.size(), 3u);  // "gemlet" matches "Gemlet": ASCII case is folded
  EXPECT_NE(t->system.find("- 毛肚 → beef tripe (hotpot)"), std::string::npos) << t->system;
  EXPECT_NE(t->system.find("- 钵钵鸡 → bobo chicken"), std::string::npos);
  EXPECT_EQ(t->system.find("unused"), std::string::npos);
  Result<TaskPrompt> p = BuildTaskPrompt({.task = "polish", .text = "今晚吃毛肚", .glossary_tsv = glossary});
  ASSERT_TRUE(p.ok());
  EXPECT_NE(p->system.find("这些术语原样保留：\n- 毛肚 (hotpot)"), std::string::npos) << p->system;
  EXPECT_NE(ParseGlossary("a\tb\tc\td\n").message().find("glossary line 1"), std::string::npos);
}

TEST(Tasks, TheGlossaryHoldsOnTheAnswer) {
  const std::vector<GlossaryEntry> terms = {{"毛肚", "beef tripe", ""}, {"钵钵鸡", "Bobo Chicken", ""}, {"iPhone 15", "", ""},
                                            {"Gemlet", "Gemlet", "product"}};
  // Polish keeps each term verbatim: another ASCII case or spacing is put right, nothing else moves.
  GlossaryOutcome polish = HoldGlossary("今晚吃毛肚和钵钵鸡，用 GEMLET 在 iphone  15 上记下来。gemlet 好用。", terms, "polish");
  EXPECT_EQ(polish.text, "今晚吃毛肚和钵钵鸡，用 Gemlet 在 iPhone 15 上记下来。Gemlet 好用。");
  EXPECT_EQ(polish.repaired, (std::vector<std::string>{"iPhone 15", "Gemlet"}));
  EXPECT_TRUE(polish.missing.empty());
  // A term the answer lost (毛肚 became 毛豆) is reported, never invented; nor is a word that only
  // contains the term's letters ("gemlets", "xiphone 15") taken for it.
  GlossaryOutcome lost = HoldGlossary("今晚吃毛豆和钵钵鸡，gemlets 和 xiphone 15。", terms, "rewrite");
  EXPECT_EQ(lost.text, "今晚吃毛豆和钵钵鸡，gemlets 和 xiphone 15。");
  EXPECT_EQ(lost.missing, (std::vector<std::string>{"毛肚", "iPhone 15", "Gemlet"}));
  EXPECT_TRUE(lost.repaired.empty());
  // Translate renders as given: a term left untranslated becomes its rendering, another case of the
  // rendering becomes the rendering; a term without a rendering must appear itself.
  GlossaryOutcome translated = HoldGlossary("Tonight: 毛肚 and bobo chicken, noted in Gemlet on an iPhone 15.", terms, "translate");
  EXPECT_EQ(translated.text, "Tonight: beef tripe and Bobo Chicken, noted in Gemlet on an iPhone 15.");
  EXPECT_EQ(translated.repaired, (std::vector<std::string>{"beef tripe", "Bobo Chicken"}));
  EXPECT_TRUE(translated.missing.empty());
  GlossaryOutcome tripe = HoldGlossary("Tonight: tripe.", {terms[0]}, "translate");
  EXPECT_EQ(tripe.missing, (std::vector<std::string>{"beef tripe"}));
  // The other tasks only list the terms: a summary may leave them out.
  for (const char* task : {"summarize", "explain", "sql"}) {
    GlossaryOutcome other = HoldGlossary("- 周三上线", terms, task);
    EXPECT_EQ(other.text, "- 周三上线");
    EXPECT_TRUE(other.missing.empty() && other.repaired.empty()) << task;
  }
  EXPECT_EQ(RequiredGlossaryForm(terms[0], "translate"), "beef tripe");
  EXPECT_EQ(RequiredGlossaryForm(terms[2], "translate"), "iPhone 15");
  EXPECT_EQ(RequiredGlossaryForm(terms[0], "polish"), "毛肚");
}

TEST(Tasks, CleanupLeavesOnlyTheResult) {
  EXPECT_EQ(CleanTaskOutput("  Please send me the notes.\n"), "Please send me the notes.");
  EXPECT_EQ(CleanTaskOutput("Here is the polished message:\n\nPlease send me the notes."), "Please send me the notes.");
  EXPECT_EQ(CleanTaskOutput("以下是润色后的内容：\n请把会议纪要发给我。"), "请把会议纪要发给我。");
  EXPECT_EQ(CleanTaskOutput("```sql\nSELECT 1;\n```"), "SELECT 1;");
  EXPECT_EQ(CleanTaskOutput("“请把会议纪要发给我。”"), "请把会议纪要发给我。");
  // Only a whole-answer wrapper goes: quotes inside, and a first line that is content, stay.
  EXPECT_EQ(CleanTaskOutput("\"a\" and \"b\""), "\"a\" and \"b\"");
  EXPECT_EQ(CleanTaskOutput("Agenda:\n- one"), "Agenda:\n- one");
}

TEST(Tasks, TextSplitsAtSentenceEndsWithinTheLimit) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "第" + std::to_string(i) + "句话讲一件事。";
  const std::vector<std::string> parts = SplitText(text, 200);
  ASSERT_GT(parts.size(), 1u);
  std::string joined;
  for (const std::string& p : parts) {
    EXPECT_LE(p.size(), 200u);
    EXPECT_TRUE(p.size() >= 3 && p.substr(p.size() - 3) == "。") << p;  // cut after a full stop
    joined += p;
  }
  EXPECT_EQ(joined, text);
  // No sentence end at all: cut on a character boundary.
  const std::vector<std::string> raw = SplitText(std::string(100, 'x') + "中文中文中文中文中文中文中文中文中文中文", 101);
  for (const std::string& p : raw) EXPECT_LE(p.size(), 101u);
  EXPECT_EQ(raw[0], std::string(100, 'x'));
}

}  // namespace
}  // namespace gemlet::flows
