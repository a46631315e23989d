#include "flows/language.h"

#include <cstdio>  // first: CLD2's header uses FILE without including it
#include <cld2/public/compact_lang_det.h>
#include <cld2/public/encodings.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gemlet::flows {
namespace {

// kModel*: the character n-gram model tools/langid_set/make_model.py trains on Debian's message
// catalogs (tests/data/langid/README.md names which), for the close languages CLD2 cannot tell apart
// on a few words; kGroup*: the regression it trains between Bosnian, Croatian, Serbian and Slovenian.
#include "flows/langid_model.inc"

enum class Script { kOther, kLatin, kCyrillic, kGreek, kArabic, kDevanagari, kThai, kHangul, kKana, kHan };

struct LanguageRow {
  LanguageInfo info;
  Script script;
  // The letters beyond a-z it writes (Latin), or its whole alphabet (Cyrillic), lower case: a text
  // with a letter outside them is not in this language ("échec" is not English, "ы" not Bulgarian),
  // which settles what CLD2 gets wrong on a few words. Empty for a script that is one language here.
  std::string_view letters;
};

// CLD2's 83 languages hold many more; these are the ones the presets name. Order breaks ties: the
// more widely written language of a close pair first.
constexpr LanguageRow kRows[] = {
    {{"en", "English", "英文"}, Script::kLatin, ""},
    {{"zh-Hans", "Simplified Chinese", "简体中文"}, Script::kHan, ""},
    {{"zh-Hant", "Traditional Chinese", "繁體中文"}, Script::kHan, ""},
    {{"ja", "Japanese", "日文"}, Script::kKana, ""},
    {{"ko", "Korean", "韩文"}, Script::kHangul, ""},
    {{"fr", "French", "法文"}, Script::kLatin, "àâæçéèêëîïôœùûüÿ"},
    {{"de", "German", "德文"}, Script::kLatin, "äöüßé"},
    {{"es", "Spanish", "西班牙文"}, Script::kLatin, "áéíñóúü"},
    {{"pt", "Portuguese", "葡萄牙文"}, Script::kLatin, "áâãàçéêíóôõúü"},
    {{"it", "Italian", "意大利文"}, Script::kLatin, "àèéìíîòóùú"},
    {{"ru", "Russian", "俄文"}, Script::kCyrillic, "абвгдеёжзийклмнопрстуфхцчшщъыьэюя"},
    {{"vi", "Vietnamese", "越南文"}, Script::kLatin, "àáâãèéêìíòóôõùúýăđĩũơư"},  // and U+1EA0-1EF9
    {{"nl", "Dutch", "荷兰文"}, Script::kLatin, "áàéèëïóöüíú"},
    {{"sv", "Swedish", "瑞典文"}, Script::kLatin, "åäöé"},
    {{"da", "Danish", "丹麦文"}, Script::kLatin, "æøåé"},
    {{"nb", "Norwegian Bokmål", "挪威文"}, Script::kLatin, "æøåéèêóòô"},
    {{"fi", "Finnish", "芬兰文"}, Script::kLatin, "äöåšž"},
    {{"pl", "Polish", "波兰文"}, Script::kLatin, "ąćęłńóśźż"},
    {{"cs", "Czech", "捷克文"}, Script::kLatin, "áčďéěíňóřšťúůýž"},
    {{"sk", "Slovak", "斯洛伐克文"}, Script::kLatin, "áäčďéíĺľňóôŕšťúýž"},
    {{"hu", "Hungarian", "匈牙利文"}, Script::kLatin, "áéíóöőúüű"},
    {{"ro", "Romanian", "罗马尼亚文"}, Script::kLatin, "ăâîșțşţ"},
    {{"hr", "Croatian", "克罗地亚文"}, Script::kLatin, "čćđšž"},
    {{"sr", "Serbian", "塞尔维亚文"}, Script::kCyrillic, "абвгдђежзијклљмнњопрстћуфхцчџш"},
    {{"sr", "Serbian", "塞尔维亚文"}, Script::kLatin, "čćđšž"},  // Serbian is written in both scripts
    {{"bs", "Bosnian", "波斯尼亚文"}, Script::kLatin, "čćđšž"},
    {{"sl", "Slovenian", "斯洛文尼亚文"}, Script::kLatin, "čšžćđ"},
    {{"el", "Greek", "希腊文"}, Script::kGreek, ""},
    {{"bg", "Bulgarian", "保加利亚文"}, Script::kCyrillic, "абвгдежзийклмнопрстуфхцчшщъьюяѝ"},
    {{"uk", "Ukrainian", "乌克兰文"}, Script::kCyrillic, "абвгґдеєжзиіїйклмнопрстуфхцчшщьюя"},
    {{"tr", "Turkish", "土耳其文"}, Script::kLatin, "çğıöşüâîû"},
    {{"id", "Indonesian", "印度尼西亚文"}, Script::kLatin, "é"},
    {{"ms", "Malay", "马来文"}, Script::kLatin, ""},
    {{"ar", "Arabic", "阿拉伯文"}, Script::kArabic, ""},
    {{"hi", "Hindi", "印地文"}, Script::kDevanagari, ""},
    {{"th", "Thai", "泰文"}, Script::kThai, ""},
    {{"gl", "Galician", "加利西亚文"}, Script::kLatin, "áéíñóúüç"},
    {{"ca", "Catalan", "加泰罗尼亚文"}, Script::kLatin, "àçéèíïóòúü·"},
    {{"et", "Estonian", "爱沙尼亚文"}, Script::kLatin, "äöõüšž"},
    {{"lv", "Latvian", "拉脱维亚文"}, Script::kLatin, "āčēģīķļņšūž"},
    {{"lt", "Lithuanian", "立陶宛文"}, Script::kLatin, "ąčęėįšųūž"},
};

// Common characters that only one script writes. Characters both use (后, 里, 干, 台, 面, 周 ...)
// are left out of both: they say nothing about the script.
constexpr std::string_view kSimplifiedOnly =
    "这们个说为会来对国学时还过经发点现与将体开问当关应见长头东车门马鸟鱼语话请让记认识读写书买卖钱银铁钟错"
    "阳阴电视听声乐节样总数万亿两举义习乡乱争亚产亲仅从价众优伞伟传伤侧债储兰兴养册军农决况冻净凉减击刘"
    "则刚创删别制剂剧劝办务动励劳势区医华协单卢卫历压县变叙号叹吗启员响团园围图圆圣场坏块坚坛坟垫墙壮处"
    "备复够夸夺奋奖妇妈娱婴孙宁宝实审宪宽宾寻导寿尔尘尝层岁岛岭币师帐带帮庆库庙废异弃张弯弹强归录彻径忆"
    "忧怀态恋恶惊惯愤愿戏战执扩扫扬扰护报担拥拦择挂挡挤挥损换据摄摆摇敌斋断无旧显晋晒晓暂术机杀杂权条杨"
    "极构枪标树档桥梦检楼横欢欧残毁毕气汇汉汤沟没泪泽洁浅测济浓涌涛润涨渐湾湿满滚滤灭灯灵炉炼烂烟烦烧热"
    "爱爷牵独猎献环画疗监盖盘矿码础确礼祸离种积称稳穷竞笔筑签简粮紧纠红约级纪纯纲纳纵纷纸纹线练组细织终"
    "绍结绕绘给络绝统继绩续绳维综绿缓编缘缩网罗罚职联肃肠肤肿胀胆胜脉脏脑脚脸艰艺药获营虑虚补装观规览觉"
    "计订认讨训议讯讲许论设访证评诉词译试诗诚询该详误诸课谁调谈谋谢谦谱贝负贡财责贤败账货质贫购贯贴贵贷"
    "贸费资赏赔赚赛赞赶趋跃践轨轮软轻载较辆辈辑输边达迁运进远违连迟适选递遗邮邻释鉴针钢锁锅键镇镜闪闭闲"
    "间闹闻阅队阵阶际陆陈险随隐难静韩页顶项顺须顾顿预领频题颜额风飞饭饮馆驱驶验骑鲜鸡齐龄龙么严务";
constexpr std::string_view kTraditionalOnly =
    "這們個說為會來對國學時還過經發點現與將體開問當關應見長頭東車門馬鳥魚語話請讓記認識讀寫書買賣錢銀鐵鐘錯"
    "陽陰電視聽聲樂節樣總數萬億兩舉義習鄉亂爭亞產親僅從價眾優傘偉傳傷側債儲蘭興養冊軍農決況凍淨涼減擊劉"
    "則剛創刪別製劑劇勸辦務動勵勞勢區醫華協單盧衛歷壓縣變敘號嘆嗎啟員響團園圍圖圓聖場壞塊堅壇墳墊牆壯處"
    "備復夠誇奪奮獎婦媽娛嬰孫寧寶實審憲寬賓尋導壽爾塵嘗層歲島嶺幣師帳帶幫慶庫廟廢異棄張彎彈強歸錄徹徑憶"
    "憂懷態戀惡驚慣憤願戲戰執擴掃揚擾護報擔擁攔擇掛擋擠揮損換據攝擺搖敵齋斷無舊顯晉曬曉暫術機殺雜權條楊"
    "極構槍標樹檔橋夢檢樓橫歡歐殘毀畢氣匯漢湯溝沒淚澤潔淺測濟濃湧濤潤漲漸灣濕滿滾濾滅燈靈爐煉爛煙煩燒熱"
    "愛爺牽獨獵獻環畫療監蓋盤礦碼礎確禮禍離種積稱穩窮競筆築簽簡糧緊糾紅約級紀純綱納縱紛紙紋線練組細織終"
    "紹結繞繪給絡絕統繼績續繩維綜綠緩編緣縮網羅罰職聯肅腸膚腫脹膽勝脈臟腦腳臉艱藝藥獲營慮虛補裝觀規覽覺"
    "計訂認討訓議訊講許論設訪證評訴詞譯試詩誠詢該詳誤諸課誰調談謀謝謙譜貝負貢財責賢敗賬貨質貧購貫貼貴貸"
    "貿費資賞賠賺賽讚趕趨躍踐軌輪軟輕載較輛輩輯輸邊達遷運進遠違連遲適選遞遺郵鄰釋鑑針鋼鎖鍋鍵鎮鏡閃閉閒"
    "間鬧聞閱隊陣階際陸陳險隨隱難靜韓頁頂項順須顧頓預領頻題顏額風飛飯飲館驅駛驗騎鮮雞齊齡龍麼嚴務週裡";


// The next code point of UTF-8 text; a malformed or truncated sequence gives kBad and skips one byte.
constexpr uint32_t kBad = 0xFFFFFFFF;
uint32_t NextCodePoint(std::string_view s, size_t* i) {
  const unsigned char c = static_cast<unsigned char>(s[*i]);
  const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 1) {
    ++*i;
    return c;
  }
  if (n == 0 || *i + n > s.size()) {
    ++*i;
    return kBad;
  }
  uint32_t cp = c & (0x7F >> n);
  for (int k = 1; k < n; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[*i + k]);
    if ((cc >> 6) != 0x2) {
      ++*i;
      return kBad;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are malformed too (CLD2 needs valid UTF-8).
  constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
    ++*i;
    return kBad;
  }
  *i += n;
  return cp;
}

std::vector<uint32_t> SortedCodePoints(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) out.push_back(NextCodePoint(s, &i));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool IsHan(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0xF900 && cp <= 0xFAFF) ||
         (cp >= 0x20000 && cp <= 0x2FA1F);
}

Script ScriptOf(uint32_t cp) {
  if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= 0xC0 && cp <= 0x24F && cp != 0xD7 && cp != 0xF7) ||
      (cp >= 0x1E00 && cp <= 0x1EFF)) {
    return Script::kLatin;
  }
  if (cp >= 0x400 && cp <= 0x4FF) return Script::kCyrillic;
  if ((cp >= 0x370 && cp <= 0x3FF) || (cp >= 0x1F00 && cp <= 0x1FFF)) return Script::kGreek;
  if ((cp >= 0x600 && cp <= 0x6FF) || (cp >= 0x750 && cp <= 0x77F) || (cp >= 0xFB50 && cp <= 0xFDFF) ||
      (cp >= 0xFE70 && cp <= 0xFEFF)) {
    return Script::kArabic;
  }
  if (cp >= 0x900 && cp <= 0x97F) return Script::kDevanagari;
  if (cp >= 0xE00 && cp <= 0xE7F) return Script::kThai;
  if ((cp >= 0xAC00 && cp <= 0xD7AF) || (cp >= 0x1100 && cp <= 0x11FF) || (cp >= 0x3130 && cp <= 0x318F)) return Script::kHangul;
  // Hiragana, katakana (not U+30FB, the middle dot Chinese uses too), half-width katakana.
  if ((cp >= 0x3041 && cp <= 0x30FF && cp != 0x30FB) || (cp >= 0x31F0 && cp <= 0x31FF) || (cp >= 0xFF66 && cp <= 0xFF9F)) {
    return Script::kKana;
  }
  if (IsHan(cp)) return Script::kHan;
  return Script::kOther;
}

// Lower case for the letters kRows lists (Latin-1, Latin Extended-A, ș ț, Cyrillic).
uint32_t Lower(uint32_t cp) {
  if ((cp >= 'A' && cp <= 'Z') || (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) || (cp >= 0x410 && cp <= 0x42F)) return cp + 0x20;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;
  if (cp == 0x130) return 'i';  // Turkish İ: its lower case is plain i
  if ((cp >= 0x100 && cp <= 0x137) || (cp >= 0x14A && cp <= 0x177) || (cp >= 0x218 && cp <= 0x21B) ||
      (cp >= 0x460 && cp <= 0x4FF)) {
    return cp | 1;  // upper case even, lower case odd
  }
  if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return cp + (cp & 1);  // upper case odd
  return cp;
}

// Whether every letter of `letters` (lower case, beyond a-z) is one `row` writes.
bool Writes(const LanguageRow& row, const std::vector<uint32_t>& letters) {
  static const auto alphabets = [] {
    std::array<std::vector<uint32_t>, std::size(kRows)> out;
    for (size_t i = 0; i < std::size(kRows); ++i) out[i] = SortedCodePoints(kRows[i].letters);
    return out;
  }();
  const std::vector<uint32_t>& alphabet = alphabets[&row - kRows];
  for (uint32_t cp : letters) {
    const bool vietnamese = row.info.tag == "vi" && cp >= 0x1EA0 && cp <= 0x1EF9;
    if (!vietnamese && !std::binary_search(alphabet.begin(), alphabet.end(), cp)) return false;
  }
  return true;
}

// CLD2's languages for `text`, best first (up to three), as tags; its hint boosts the languages named.
std::vector<std::string> Cld2Guesses(std::string_view text, const std::string& hint) {
  CLD2::CLDHints hints = {hint.empty() ? nullptr : hint.c_str(), nullptr, CLD2::UNKNOWN_ENCODING, CLD2::UNKNOWN_LANGUAGE};
  CLD2::Language language3[3];
  int percent3[3], text_bytes = 0;
  double score3[3];
  bool reliable = false;
  // Best effort: without it CLD2 says nothing about text under ~200 bytes, the messages users polish.
  const CLD2::Language top = CLD2::ExtDetectLanguageSummary(text.data(), static_cast<int>(text.size()), /*is_plain_text=*/true,
                                                            &hints, CLD2::kCLDFlagBestEffort, language3, percent3, score3,
                                                            nullptr, &text_bytes, &reliable);
  std::vector<std::string> out;
  for (CLD2::Language l : {top, language3[0], language3[1], language3[2]}) {
    if (l == CLD2::UNKNOWN_LANGUAGE) continue;
    std::string tag = CLD2::LanguageCode(l);
    if (tag == "no" || tag == "nn") tag = "nb";  // CLD2's Norwegian is Bokmål's model
    if (std::find(out.begin(), out.end(), tag) == out.end()) out.push_back(tag);
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {  // letters are in the BMP
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// What make_model.py's features() computes (the two must agree, or the costs mean nothing): each
// word of Latin or Cyrillic letters, lower-cased, as "<word>"; its n-grams of 1-4 code points but "<"
// and ">" alone; "<word>" whole when it is longer than that.
std::vector<std::string> ModelFeatures(std::string_view text) {
  std::vector<std::vector<uint32_t>> words(1);
  for (size_t i = 0; i < text.size();) {
    const uint32_t cp = NextCodePoint(text, &i);
    const Script s = cp == kBad ? Script::kOther : ScriptOf(cp);
    if (s == Script::kLatin || s == Script::kCyrillic) {
      words.back().push_back(Lower(cp));
    } else if (!words.back().empty()) {
      words.emplace_back();
    }
  }
  constexpr size_t kMaxN = 4;
  constexpr uint32_t kStart = '<', kEnd = '>';
  std::vector<std::string> out;
  for (std::vector<uint32_t>& w : words) {
    if (w.empty()) continue;
    w.insert(w.begin(), kStart);
    w.push_back(kEnd);
    for (size_t n = 1; n <= kMaxN; ++n) {
      for (size_t i = 0; i + n <= w.size(); ++i) {
        if (n == 1 && (w[i] == kStart || w[i] == kEnd)) continue;
        std::string g;
        for (size_t k = i; k < i + n; ++k) AppendUtf8(w[k], &g);
        out.push_back(std::move(g));
      }
    }
    if (w.size() > kMaxN) {
      std::string whole;
      for (uint32_t cp : w) AppendUtf8(cp, &whole);
      out.push_back(std::move(whole));
    }
  }
  return out;
}

// A generated table's rows, "FEATURE CODES\n" sorted by bytes: feature -> its (language, value) pairs.
using TableRows = std::vector<std::pair<std::string_view, std::string_view>>;

TableRows ParseTable(std::string_view rows) {
  TableRows out;
  for (size_t start = 0; start < rows.size();) {  // make_model.py writes the lines sorted by bytes
    const size_t end = rows.find('\n', start), space = rows.find(' ', start);
    out.emplace_back(rows.substr(start, space - start), rows.substr(space + 1, end - space - 1));
    start = end + 1;
  }
  return out;
}

// The (language, value) pairs of `feature`, or an empty view when no language kept it.
std::string_view FindRow(const TableRows& rows, std::string_view feature) {
  const auto it = std::lower_bound(rows.begin(), rows.end(), feature,
                                   [](const auto& row, std::string_view key) { return row.first < key; });
  return it == rows.end() || it->first != feature ? std::string_view() : it->second;
}

std::vector<std::string_view> SplitWords(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t start = 0; start < s.size();) {
    const size_t end = std::min(s.find(' ', start), s.size());
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

struct NgramModel {
  std::vector<std::string_view> languages;
  std::array<int, 128> value{};  // kModelCodes' character -> its value
  std::vector<int> floors;       // per language
  TableRows rows;                // feature -> (language, cost) pairs
  std::vector<std::string_view> group;  // the group model's languages (kGroupLanguages)
  TableRows group_rows;                 // feature -> (group language, weight in two characters)
  int Language(std::string_view tag) const {
    const auto it = std::find(languages.begin(), languages.end(), tag);
    return it == languages.end() ? -1 : static_cast<int>(it - languages.begin());
  }
  int Value(char c) const { return value[static_cast<unsigned char>(c)]; }
};

const NgramModel& Model() {
  static const NgramModel model = [] {
    NgramModel m;
    for (size_t i = 0; i < kModelCodes.size(); ++i) m.value[static_cast<unsigned char>(kModelCodes[i])] = static_cast<int>(i);
    m.languages = SplitWords(kModelLanguages);
    for (char c : kModelFloors) m.floors.push_back(m.Value(c));
    m.rows = ParseTable(std::string_view(kModel, sizeof(kModel) - 1));
    m.group = SplitWords(kGroupLanguages);
    m.group_rows = ParseTable(std::string_view(kGroupModel, sizeof(kGroupModel) - 1));
    return m;
  }();
  return model;
}

// A whole word says more than one of its n-grams ("ili" is Bosnian and Croatian, "<ili>" a word of
// both but not of Slovenian), and CLD2's answer is a second opinion worth a few nats: both tried on
// dev.tsv (weights 1-8; bonus 0-8 nats), where these were best; with the model of 20,000 features a
// language, CLD2's bonus fell from 4 nats to 2 (766 -> 769 of 800, as 0 and 1 did; 3 gave 767). English is what gemlet's users
// write most, and its training text is programs' messages, not conversation: without a prior, "Let's
// go hiking this weekend." read as Dutch (6 nats cost one line of dev.tsv). Two or three letters
// ("ok", "etc") are too few for the model: CLD2 alone decides them.
constexpr int kWholeWordWeight = 4;
constexpr double kCld2BonusNats = 2;
constexpr double kEnglishPriorNats = 6;
constexpr size_t kMinModelLetters = 4;

// Naive Bayes counts every feature Bosnian, Croatian and Serbian share as evidence, and their small
// differences in frequency outweigh the few words that tell them apart; the group model (a softmax
// regression over the same features, make_model.py) weighs those. When naive Bayes chooses a
// language of the group, the group's candidates are scored again: the regression's score plus
// kGroupNbWeight times naive Bayes' log-likelihood (CLD2's bonus in it), chosen by cross-validation
// over the training catalogs (bench/RESULTS.md).
constexpr double kGroupNbWeight = 0.03;

const LanguageRow* RescoreGroup(std::vector<std::string> features, const std::vector<const LanguageRow*>& candidates,
                                const std::vector<int>& cost, const LanguageRow* chosen) {
  const NgramModel& m = Model();
  auto group_index = [&](const LanguageRow* row) {
    if (row->script != Script::kLatin) return -1;  // the group model knows Latin Serbian alone
    const auto it = std::find(m.group.begin(), m.group.end(), row->info.tag);
    return it == m.group.end() ? -1 : static_cast<int>(it - m.group.begin());
  };
  std::vector<size_t> in_group;
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (group_index(candidates[c]) >= 0) in_group.push_back(c);
  }
  if (group_index(chosen) < 0 || in_group.size() < 2) return chosen;
  std::vector<double> score(m.group.size());
  for (size_t g = 0; g < score.size(); ++g) score[g] = kGroupBias[g];
  std::sort(features.begin(), features.end());  // the regression asks whether a feature is there, not how often
  features.erase(std::unique(features.begin(), features.end()), features.end());
  for (const std::string& f : features) {
    const std::string_view pairs = FindRow(m.group_rows, f);
    for (size_t k = 0; k + 2 < pairs.size(); k += 3) {  // language, then the weight in two characters
      const int code = m.Value(pairs[k + 1]) * static_cast<int>(kModelCodes.size()) + m.Value(pairs[k + 2]);
      score[m.Value(pairs[k])] += (code - kGroupZero) * kGroupStep;
    }
  }
  const LanguageRow* best = nullptr;
  double best_score = 0;
  for (size_t c : in_group) {
    const double s = score[group_index(candidates[c])] - kGroupNbWeight * cost[c] * kModelStep;
    if (best == nullptr || s > best_score) best = candidates[c], best_score = s;
  }
  return best;
}

// The candidate with the lowest naive Bayes cost (-log P(text | language), in the model's steps),
// CLD2's choice less its bonus; ties go to the first in kRows' order; then RescoreGroup's word where
// that is a language of the group. nullptr when a candidate is not in the model or the text has too
// few letters for it.
const LanguageRow* ChooseByModel(std::string_view text, const std::vector<const LanguageRow*>& candidates,
                                 const LanguageRow* cld2) {
  const NgramModel& m = Model();
  const std::vector<std::string> features = ModelFeatures(text);
  size_t letters = 0;  // each letter is one feature of one code point ("<" and ">" alone are none)
  for (const std::string& f : features) {
    letters += std::count_if(f.begin(), f.end(), [](char c) { return (c & 0xC0) != 0x80; }) == 1;
  }
  if (letters < kMinModelLetters) return nullptr;
  std::vector<int> index, cost(candidates.size(), 0);
  for (const LanguageRow* row : candidates) {
    const bool cyrillic_serbian = row->info.tag == "sr" && row->script == Script::kCyrillic;  // make_model.py says why
    index.push_back(m.Language(cyrillic_serbian ? "sr-Cyrl" : row->info.tag));
    if (index.back() < 0) return nullptr;
  }
  for (const std::string& f : features) {
    const std::string_view pairs = FindRow(m.rows, f);
    if (pairs.empty()) continue;  // no language kept it: it says nothing
    const int weight = f.size() > 2 && f.front() == '<' && f.back() == '>' ? kWholeWordWeight : 1;
    for (size_t c = 0; c < candidates.size(); ++c) {
      int step = m.floors[index[c]];
      for (size_t k = 0; k + 1 < pairs.size(); k += 2) {
        if (m.Value(pairs[k]) == index[c]) {
          step = m.Value(pairs[k + 1]);
          break;
        }
      }
      cost[c] += weight * step;
    }
  }
  size_t best = 0;
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (candidates[c] == cld2) cost[c] -= static_cast<int>(kCld2BonusNats / kModelStep + 0.5);
    if (candidates[c]->info.tag == "en") cost[c] -= static_cast<int>(kEnglishPriorNats / kModelStep + 0.5);
    if (cost[c] < cost[best]) best = c;
  }
  return RescoreGroup(features, candidates, cost, candidates[best]);
}

// Among the languages written in `script` whose letters the text's are: the n-gram model's choice
// with CLD2's as a second opinion; where the model lacks a candidate, CLD2's first choice, then its
// choice when told which those are, then the first of them in kRows' order.
std::string_view ChooseInScript(std::string_view text, Script script, const std::vector<uint32_t>& letters) {
  std::vector<const LanguageRow*> candidates;
  for (const LanguageRow& row : kRows) {
    if (row.script == script && Writes(row, letters)) candidates.push_back(&row);
  }
  if (candidates.empty()) {  // a letter no language here writes: the script alone narrows it
    for (const LanguageRow& row : kRows) {
      if (row.script == script) candidates.push_back(&row);
    }
  }
  auto pick = [&](const std::vector<std::string>& guesses) -> const LanguageRow* {
    for (const std::string& g : guesses) {
      for (const LanguageRow* row : candidates) {
        if (row->info.tag == g) return row;
      }
    }
    return nullptr;
  };
  if (candidates.size() == 1) return candidates.front()->info.tag;
  const LanguageRow* cld2 = pick(Cld2Guesses(text, ""));
  if (const LanguageRow* row = ChooseByModel(text, candidates, cld2)) return row->info.tag;
  if (cld2 != nullptr) return cld2->info.tag;
  std::string hint;
  for (const LanguageRow* row : candidates) {
    if (!hint.empty()) hint += ',';
    hint += row->info.tag == "nb" ? "no" : row->info.tag;  // CLD2's code for Bokmål
  }
  if (const LanguageRow* row = pick(Cld2Guesses(text, hint))) return row->info.tag;
  return candidates.front()->info.tag;
}

}  // namespace

std::span<const LanguageInfo> SupportedLanguages() {
  static const std::vector<LanguageInfo> languages = [] {
    std::vector<LanguageInfo> out;
    for (const LanguageRow& row : kRows) {
      const bool listed = std::any_of(out.begin(), out.end(), [&](const LanguageInfo& l) { return l.tag == row.info.tag; });
      if (!listed) out.push_back(row.info);  // Serbian has a row per script
    }
    return out;
  }();
  return languages;
}

const LanguageInfo* FindLanguageInfo(std::string_view tag) {
  for (const LanguageRow& row : kRows) {
    if (row.info.tag == tag) return &row.info;
  }
  return nullptr;
}

LanguageGuess DetectLanguage(std::string_view text) {
  static const std::vector<uint32_t> simplified = SortedCodePoints(kSimplifiedOnly);
  static const std::vector<uint32_t> traditional = SortedCodePoints(kTraditionalOnly);
  LanguageGuess g;
  int simplified_hits = 0, traditional_hits = 0;
  std::array<int, static_cast<size_t>(Script::kHan) + 1> count{};
  std::vector<uint32_t> letters;  // beyond a-z, lower case, once each
  std::string valid;              // the text with its malformed bytes as spaces, for CLD2
  valid.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    const uint32_t cp = NextCodePoint(text, &i);
    if (cp == kBad) {
      valid += ' ';
      continue;
    }
    valid.append(text.substr(start, i - start));
    const Script script = ScriptOf(cp);
    ++count[static_cast<size_t>(script)];
    if (cp < 0x80 && script == Script::kLatin) ++g.latin;
    if (cp >= 0x80 && (script == Script::kLatin || script == Script::kCyrillic)) letters.push_back(Lower(cp));
    if (script == Script::kHan) {
      ++g.han;
      if (std::binary_search(simplified.begin(), simplified.end(), cp)) ++simplified_hits;
      if (std::binary_search(traditional.begin(), traditional.end(), cp)) ++traditional_hits;
    }
  }
  std::sort(letters.begin(), letters.end());
  letters.erase(std::unique(letters.begin(), letters.end()), letters.end());
  g.traditional = traditional_hits > simplified_hits;
  auto n = [&](Script s) { return count[static_cast<size_t>(s)]; };
  // Kana is Japanese's alone, however many kanji share the line; Hangul is Korean's (hanja too).
  if (n(Script::kKana) > 0 && n(Script::kKana) >= n(Script::kHangul)) {
    g.tag = "ja";
  } else if (n(Script::kHangul) > 0) {
    g.tag = "ko";
  } else if (g.han > 0) {
    // CLD2 cannot tell the two Chinese scripts apart by characters; the tables above can.
    g.tag = g.latin >= kMixedLatinShare * (g.han + g.latin) ? "mixed" : g.traditional ? "zh-Hant" : "zh-Hans";
  } else {
    // The script most of the letters are in; where only one language here writes it, that one.
    Script main = Script::kOther;
    for (Script s : {Script::kLatin, Script::kCyrillic, Script::kGreek, Script::kArabic, Script::kDevanagari, Script::kThai}) {
      if (n(s) > n(main) || (main == Script::kOther && n(s) > 0)) main = s;
    }
    if (main == Script::kLatin || main == Script::kCyrillic) {
      std::vector<uint32_t> own;  // the letters of the main script alone
      for (uint32_t cp : letters) {
        if (ScriptOf(cp) == main) own.push_back(cp);
      }
      g.tag = ChooseInScript(valid, main, own);
    } else if (main != Script::kOther) {
      for (const LanguageRow& row : kRows) {
        if (row.script == main) g.tag = row.info.tag;
      }
    }
  }
  return g;
}

}  // namespace gemlet::flows
