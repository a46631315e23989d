// Malformed input: every truncation and thousands of seeded mutations of a valid file parse or fail cleanly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "gguf_test_util.h"

namespace gemlet {
namespace {

using testing::ParseExact;
using testing::Parsed;

// A small file with everything the parser walks: scalars, strings, arrays of each kind, nested arrays,
// a non-default alignment, tensors of three types.
const std::vector<uint8_t>& SmallValidFile() {
  static const std::vector<uint8_t> bytes = [] {
    GgufWriter w;
    w.SetString("general.architecture", "gemma");
    w.SetU32("general.alignment", 64);
    w.SetU32("gemma.block_count", 2);
    w.SetF32("gemma.attention.layer_norm_rms_epsilon", 1e-6f);
    w.SetBool("tokenizer.ggml.add_bos_token", true);
    w.SetStringArray("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>", "你好", ""});
    w.SetF32Array("tokenizer.ggml.scores", {0, -1, -2, -3, -4});
    w.SetI32Array("tokenizer.ggml.token_type", {3, 3, 3, 1, 1});
    w.SetBoolArray("gemma.attention.sliding_window_pattern", {true, false});
    w.SetU32Array("gemma.feed_forward_length", {64, 128});
    GgufValue inner;
    inner.type = GgufType::kArray;
    inner.elem_type = GgufType::kString;
    inner.strings = {"x", "yz"};
    inner.count = 2;
    GgufValue nested;
    nested.type = GgufType::kArray;
    nested.elem_type = GgufType::kArray;
    nested.arrays = {inner, inner};
    nested.count = 2;
    EXPECT_TRUE(w.SetValue("test.nested", nested).ok());
    static const float f32[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    static uint8_t q8[34 * 2];
    for (size_t i = 0; i < sizeof q8; ++i) q8[i] = static_cast<uint8_t>(i);
    static const uint16_t f16[3] = {0x3C00, 0x4000, 0xC000};
    EXPECT_TRUE(w.AddTensorData("token_embd.weight", DType::kF32, {4, 2}, f32).ok());
    EXPECT_TRUE(w.AddTensorData("blk.0.attn_q.weight", DType::kQ8_0, {32, 2}, q8).ok());
    EXPECT_TRUE(w.AddTensorData("output_norm.weight", DType::kF16, {3}, f16).ok());
    const std::string path = testing::TempPath("small_valid.gguf");
    Status s = w.Write(path);
    EXPECT_TRUE(s.ok()) << s.message();
    std::vector<uint8_t> out = testing::ReadBytes(path);
    std::remove(path.c_str());
    return out;
  }();
  return bytes;
}

// What a caller may do with a parsed file: none of it may read outside the buffer (ASan checks).
void Exercise(const Parsed& p) {
  const GgufFile& f = *p.file.value();
  const uint8_t* begin = p.copy.get();
  const uint8_t* end = begin + p.size;
  ASSERT_LE(f.data_offset(), p.size + f.alignment());
  volatile uint8_t sink = 0;
  for (const GgufTensor& t : f.tensors()) {
    ASSERT_GT(t.nbytes, 0u);
    ASSERT_GE(t.data, begin + f.data_offset()) << t.name;
    ASSERT_LE(t.nbytes, static_cast<size_t>(end - t.data)) << t.name;
    sink = sink ^ t.data[0] ^ t.data[t.nbytes - 1];
    ASSERT_EQ(f.FindTensor(t.name), &t);
    sink = sink ^ static_cast<uint8_t>(t.ShapeString().size());
  }
  for (const auto& [key, value] : f.metadata()) {
    sink = sink ^ static_cast<uint8_t>(value.ToString().size());
    (void)f.GetU32(key);
    (void)f.GetF32(key);
    (void)f.GetBool(key);
    (void)f.GetString(key);
    (void)f.GetF32Array(key);
    (void)f.GetI32Array(key);
    (void)f.GetBoolArray(key);
    (void)f.GetStringArray(key);
    if (value.type == GgufType::kArray) (void)f.GetU32PerLayer(key, static_cast<uint32_t>(value.count));
  }
  (void)sink;
}

TEST(GgufMalformed, TheSmallFileIsValid) {
  const auto& bytes = SmallValidFile();
  Parsed p = ParseExact(bytes);
  ASSERT_TRUE(p.file.ok()) << p.file.message();
  EXPECT_EQ((*p.file)->alignment(), 64u);
  EXPECT_EQ((*p.file)->tensors().size(), 3u);
  EXPECT_EQ((*p.file)->metadata().size(), 11u);
  Exercise(p);
}

TEST(GgufMalformed, EveryTruncationFailsWithAMessage) {
  const auto& bytes = SmallValidFile();
  ASSERT_GT(bytes.size(), 500u);
  for (size_t len = 0; len < bytes.size(); ++len) {
    Parsed p = ParseExact(bytes.data(), len);
    ASSERT_FALSE(p.file.ok()) << "a file cut to " << len << " of " << bytes.size() << " bytes parsed";
    ASSERT_FALSE(p.file.message().empty()) << len;
    // The message names the file and says more than the prefix.
    ASSERT_GT(p.file.message().size(), std::string("'test.gguf' is not a valid GGUF file: ").size()) << len;
  }
}

// Values that break parsers: zero, one, sign bits, powers of two, all ones, just past a boundary.
uint64_t Interesting(std::mt19937_64& rng) {
  static const uint64_t kValues[] = {0,          1,           2,          3,          4,         5,
                                     7,          8,           9,          12,         13,        31,
                                     32,         33,          63,         64,         255,       256,
                                     0x7f,       0x80,        0xff,       0xffff,     0x7fffffff, 0x80000000,
                                     0xffffffff, 0x100000000, 1ULL << 62, 1ULL << 63, ~0ULL,     ~0ULL - 1,
                                     (1ULL << 63) - 1};
  if (rng() % 4 == 0) return rng();
  uint64_t v = kValues[rng() % std::size(kValues)];
  return rng() % 8 == 0 ? v + (rng() % 64) : v;
}

// One random edit: bit flips, byte sets, an interesting u8/u32/u64 at a random spot (mostly in the
// header and directory, where the fields are), or a splice that shifts everything after it.
std::vector<uint8_t> Mutate(const std::vector<uint8_t>& in, size_t directory_end, std::mt19937_64& rng) {
  std::vector<uint8_t> b = in;
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits && !b.empty(); ++e) {
    const size_t limit = (rng() % 5 != 0 && directory_end < b.size()) ? directory_end : b.size();
    const size_t pos = static_cast<size_t>(rng() % limit);
    switch (rng() % 6) {
      case 0: b[pos] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
      case 1: b[pos] = static_cast<uint8_t>(rng()); break;
      case 2: b[pos] = static_cast<uint8_t>(Interesting(rng)); break;
      case 3: {
        const uint32_t v = static_cast<uint32_t>(Interesting(rng));
        std::memcpy(b.data() + pos, &v, std::min<size_t>(4, b.size() - pos));
        break;
      }
      case 4: {
        const uint64_t v = Interesting(rng);
        std::memcpy(b.data() + pos, &v, std::min<size_t>(8, b.size() - pos));
        break;
      }
      default: {
        const size_t n = 1 + static_cast<size_t>(rng() % 16);
        if (rng() % 2) {
          b.erase(b.begin() + static_cast<std::ptrdiff_t>(pos), b.begin() + static_cast<std::ptrdiff_t>(std::min(b.size(), pos + n)));
        } else {
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(pos), n, static_cast<uint8_t>(rng()));
        }
      }
    }
  }
  return b;
}

TEST(GgufMalformed, SeededMutationsParseOrFailCleanly) {
  const auto& base = SmallValidFile();
  Parsed valid = ParseExact(base);
  ASSERT_TRUE(valid.file.ok());
  const size_t directory_end = (*valid.file)->data_offset();
  // GEMLET_GGUF_DUMP_CORPUS=dir writes a sample of the mutants there (seeds for the fuzzer).
  const char* dump_dir = std::getenv("GEMLET_GGUF_DUMP_CORPUS");
  if (dump_dir) {
    std::ofstream(std::string(dump_dir) + "/valid.gguf", std::ios::binary)
        .write(reinterpret_cast<const char*>(base.data()), static_cast<std::streamsize>(base.size()));
  }

  constexpr int kIterations = 20000;
  std::mt19937_64 rng(20261130);
  int parsed = 0, failed = 0;
  for (int i = 0; i < kIterations; ++i) {
    const std::vector<uint8_t> mutant = Mutate(base, directory_end, rng);
    Parsed p = ParseExact(mutant);
    if (p.file.ok()) {
      ++parsed;
      Exercise(p);
      if (HasFatalFailure()) {
        ADD_FAILURE() << "iteration " << i;
        return;
      }
    } else {
      ++failed;
      ASSERT_FALSE(p.file.message().empty()) << "iteration " << i;
    }
    if (dump_dir && i % 200 == 0) {
      std::ofstream(std::string(dump_dir) + "/mutant_" + std::to_string(i) + ".gguf", std::ios::binary)
          .write(reinterpret_cast<const char*>(mutant.data()), static_cast<std::streamsize>(mutant.size()));
    }
  }
  // Both outcomes must be common, or the mutations are not exercising the parser.
  EXPECT_GT(parsed, kIterations / 20);
  EXPECT_GT(failed, kIterations / 4);
  std::printf("%d mutants parsed, %d rejected\n", parsed, failed);
}

// Every single-byte value at every header/directory position: exhaustive where the fields live.
TEST(GgufMalformed, EveryByteOfTheDirectorySetToEdgeValues) {
  const auto& base = SmallValidFile();
  Parsed valid = ParseExact(base);
  ASSERT_TRUE(valid.file.ok());
  const size_t directory_end = (*valid.file)->data_offset();
  std::vector<uint8_t> b = base;
  for (size_t pos = 0; pos < directory_end; ++pos) {
    for (uint8_t v : {0x00, 0x01, 0x07, 0x08, 0x09, 0x0d, 0x20, 0x40, 0x7f, 0x80, 0xff}) {
      const uint8_t saved = b[pos];
      b[pos] = v;
      Parsed p = ParseExact(b);
      if (p.file.ok()) {
        Exercise(p);
        ASSERT_FALSE(HasFatalFailure()) << "byte " << pos << " = " << int{v};
      } else {
        ASSERT_FALSE(p.file.message().empty());
      }
      b[pos] = saved;
    }
  }
}

}  // namespace
}  // namespace gemlet
