#include "flows/language.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace gemlet::flows {
namespace {

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

// The next code point of UTF-8 text (a malformed byte counts as itself and is skipped).
uint32_t NextCodePoint(std::string_view s, size_t* i) {
  const unsigned char c = static_cast<unsigned char>(s[*i]);
  const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  if (n == 1 || *i + n > s.size()) {
    ++*i;
    return c;
  }
  uint32_t cp = c & (0x7F >> n);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[*i + k]) & 0x3F);
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

}  // namespace

const char* LanguageTag(Language language) {
  switch (language) {
    case Language::kEnglish: return "en";
    case Language::kChineseSimplified: return "zh-Hans";
    case Language::kChineseTraditional: return "zh-Hant";
    case Language::kMixed: return "mixed";
    case Language::kUnknown: break;
  }
  return "unknown";
}

LanguageGuess DetectLanguage(std::string_view text) {
  static const std::vector<uint32_t> simplified = SortedCodePoints(kSimplifiedOnly);
  static const std::vector<uint32_t> traditional = SortedCodePoints(kTraditionalOnly);
  LanguageGuess g;
  int simplified_hits = 0, traditional_hits = 0;
  for (size_t i = 0; i < text.size();) {
    const uint32_t cp = NextCodePoint(text, &i);
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) {
      ++g.latin;
    } else if (IsHan(cp)) {
      ++g.han;
      if (std::binary_search(simplified.begin(), simplified.end(), cp)) ++simplified_hits;
      if (std::binary_search(traditional.begin(), traditional.end(), cp)) ++traditional_hits;
    }
  }
  g.traditional = traditional_hits > simplified_hits;
  if (g.han == 0) {
    g.language = g.latin > 0 ? Language::kEnglish : Language::kUnknown;
  } else if (g.latin >= kMixedLatinShare * (g.han + g.latin)) {
    g.language = Language::kMixed;
  } else {
    g.language = g.traditional ? Language::kChineseTraditional : Language::kChineseSimplified;
  }
  return g;
}

}  // namespace gemlet::flows
