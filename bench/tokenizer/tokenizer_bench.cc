// Tokenizer throughput: vocabulary load time and encode/decode MB/s on English, Chinese, code and the
// multilingual golden texts, for Gemma 4 (ranked merges, from GGUF) and Gemma 3 (SentencePiece
// scores, and HF merges).
//
//   gemlet_tokenizer_bench [--gguf GEMMA4.gguf] [--hf-dir GEMMA3_HF_DIR] [--testdata DIR] [--mb N]
//
// Without arguments the vocabularies come from the shared test data (unpacked with xz to a temp dir);
// the golden texts are read from DIR/tokenizer/gemma3_goldens.jsonl.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf_reader.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace gemlet;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
// Throughput is timed in CPU seconds of this (single) thread, so that other load on a shared machine
// distorts it less than wall time would.
double Cpu() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

const char* kEnglish =
    "The quick brown fox jumps over the lazy dog. In 2024, researchers released a family of open models "
    "that run on laptops and phones; they're small, fast, and surprisingly capable. Tokenization splits "
    "text into pieces: common words become single tokens, while rare words such as 'antidisestablishment' "
    "are broken into several sub-word units. Numbers like 3.14159 and 1,234,567 are split digit by digit.\n"
    "    Indented lines, tabs\tand  double  spaces all matter to a byte-exact tokenizer.\n\n";
const char* kChinese =
    "自然语言处理是人工智能的一个重要分支，它研究如何让计算机理解和生成人类语言。近年来，大规模预训练模型"
    "在翻译、问答、摘要等任务上取得了显著进展。分词器把文本切分成词元，常见的词语通常对应一个词元，而生僻字"
    "可能会退回到字节表示。我想在苹果公司工作一千三百一十四天～今天天气很好，我们去公园散步吧！\n";
const char* kCode =
    "#include <vector>\n\nint Sum(const std::vector<int>& xs) {\n  int total = 0;\n  for (int x : xs) {\n"
    "    total += x;  // accumulate\n  }\n  return total;\n}\n\ndef tokenize(text: str) -> list[int]:\n"
    "    ids = [vocab.get(ch, UNK) for ch in text]\n    if not ids:\n        raise ValueError(\"empty\")\n"
    "    return ids\n\nconst url = `https://example.com/api/v1/items?id=${id}&sort=desc`;\n";

std::string Repeat(const std::string& unit, size_t bytes) {
  std::string out;
  while (out.size() < bytes) out += unit;
  return out;
}

std::string Unpack(const std::string& xz, const std::string& out) {
  const std::string cmd = "xz -dc '" + xz + "' > '" + out + "'";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "cannot unpack %s\n", xz.c_str());
    std::exit(1);
  }
  return out;
}

// Encodes each text with its own Encode call (as a runtime encodes prompts; the word cache lives
// for one call), cycling through `texts` until `bytes` have been processed; then decodes the ids.
// Best of three runs.
void Measure(const char* vocab_name, const Tokenizer& tok, const char* text_name, const std::vector<std::string>& texts,
             size_t bytes) {
  size_t unit = 0;
  for (const std::string& t : texts) unit += t.size();
  const size_t reps = std::max<size_t>(1, bytes / std::max<size_t>(unit, 1));
  double best_enc = 1e9, best_dec = 1e9;
  size_t n_tokens = 0;
  bool roundtrip = true;
  std::vector<std::vector<int32_t>> ids(texts.size());
  for (int run = 0; run < 3; ++run) {
    n_tokens = 0;
    const double t0 = Cpu();
    for (size_t r = 0; r < reps; ++r) {
      for (size_t i = 0; i < texts.size(); ++i) {
        ids[i].clear();
        tok.Encode(texts[i], {}, &ids[i]);
        n_tokens += ids[i].size();
      }
    }
    const double t1 = Cpu();
    size_t decoded_bytes = 0;
    for (size_t r = 0; r < reps; ++r) {
      for (size_t i = 0; i < texts.size(); ++i) decoded_bytes += tok.Decode(ids[i]).size();
    }
    const double t2 = Cpu();
    best_enc = std::min(best_enc, t1 - t0);
    best_dec = std::min(best_dec, t2 - t1);
    if (run == 0) {
      for (size_t i = 0; i < texts.size(); ++i) roundtrip = roundtrip && tok.Decode(ids[i]) == texts[i];
    }
    (void)decoded_bytes;
  }
  const double mb = static_cast<double>(unit * reps) / 1e6;
  std::printf("%-20s %-18s %5.1f MB %8zu tokens  encode %7.2f MB/s  decode %8.2f MB/s%s\n", vocab_name, text_name, mb,
              n_tokens, mb / best_enc, mb / best_dec, roundtrip ? "" : "  (not every text round-trips)");
}

void RunAll(const char* name, const Tokenizer& tok, const std::vector<std::string>& goldens, size_t bytes) {
  Measure(name, tok, "english", {kEnglish}, bytes);
  Measure(name, tok, "chinese", {kChinese}, bytes);
  Measure(name, tok, "code", {kCode}, bytes);
  Measure(name, tok, "goldens (308 texts)", goldens, bytes);
  // One long document: repeated words are served by the per-call word cache.
  Measure(name, tok, "mixed, one 4MB call", {Repeat(std::string(kEnglish) + kChinese + kCode, 4 << 20)}, bytes);
}

// The Gemma 3 golden texts: every category (21 scripts and kinds of text), one Encode call each.
std::vector<std::string> ReadGoldenTexts(const std::string& path) {
  std::vector<std::string> texts;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("text") && j["text"].is_string()) texts.push_back(j["text"].get<std::string>());
  }
  return texts;
}

}  // namespace

int main(int argc, char** argv) {
  std::string gguf_path, hf_dir, testdata = GEMLET_TESTDATA_DIR;
  size_t bytes = 4 << 20;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--gguf") && i + 1 < argc) {
      gguf_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--hf-dir") && i + 1 < argc) {
      hf_dir = argv[++i];
    } else if (!std::strcmp(argv[i], "--testdata") && i + 1 < argc) {
      testdata = argv[++i];
    } else if (!std::strcmp(argv[i], "--mb") && i + 1 < argc) {
      bytes = static_cast<size_t>(std::atof(argv[++i]) * 1e6);
    } else {
      std::fprintf(stderr, "usage: %s [--gguf GEMMA4.gguf] [--hf-dir GEMMA3_HF_DIR] [--testdata DIR] [--mb N]\n",
                   argv[0]);
      return 1;
    }
  }
  namespace fs = std::filesystem;
  const fs::path tmp = fs::temp_directory_path() / ("gemlet-tokbench-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  const std::string data = testdata + "/tokenizer";
  if (gguf_path.empty()) {
    gguf_path = Unpack(data + "/gemma4/ggml-vocab-gemma-4.gguf.xz", (tmp / "gemma4.gguf").string());
  }
  if (hf_dir.empty()) {
    hf_dir = (tmp / "gemma3").string();
    fs::create_directories(hf_dir);
    Unpack(data + "/gemma3_tokenizer.json.xz", hf_dir + "/tokenizer.json");
    Unpack(data + "/gemma3_tokenizer_config.json.xz", hf_dir + "/tokenizer_config.json");
  }

  // Gemma 4 from GGUF: load time as a model load sees it (open + build).
  double t0 = Now();
  auto file = GgufFile::Open(gguf_path);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.message().c_str());
    return 1;
  }
  auto g4 = Tokenizer::FromGguf(**file);
  double t1 = Now();
  if (!g4.ok()) {
    std::fprintf(stderr, "%s\n", g4.message().c_str());
    return 1;
  }
  std::printf("gemma4 GGUF vocabulary: %d tokens, loaded in %.0f ms\n", g4->vocab_size(), (t1 - t0) * 1e3);

  t0 = Now();
  auto meta = ReadHfTokenizer(hf_dir, "gemma3", /*keep_merges=*/true);
  t1 = Now();
  if (!meta.ok()) {
    std::fprintf(stderr, "%s\n", meta.message().c_str());
    return 1;
  }
  auto g3_merges = VocabFromMetadata(*meta);
  meta->merges.clear();
  auto g3_scores = VocabFromMetadata(*meta);
  const double t2 = Now();
  std::printf("gemma3 tokenizer.json read in %.0f ms, vocabularies built in %.0f ms\n\n", (t1 - t0) * 1e3,
              (t2 - t1) * 1e3);
  const std::vector<std::string> goldens = ReadGoldenTexts(data + "/gemma3_goldens.jsonl");
  RunAll("gemma4 (merges)", *g4, goldens, bytes);
  RunAll("gemma3 (spm scores)", Tokenizer(std::move(*g3_scores)), goldens, bytes);
  RunAll("gemma3 (hf merges)", Tokenizer(std::move(*g3_merges)), goldens, bytes);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return 0;
}
