// MatMul of every table (reference and each compiled Highway target) for every computable weight
// type, on odd row lengths, odd row counts and odd token counts (GEMV and GEMM paths, token tails),
// with one thread and with three.
//
// Expected values are exact (double) dot products of the dequantized weights with x. A SIMD result
// may differ by
//   (1) float rounding: every path computes a sum of n terms whose pieces are bounded by
//       |x_i| * A_i, A_i = 3 max|w| over i's 32-block (a block's scale * q and its offset/min term
//       are each below 2 max|w| for blocks the quantizers produce) or |w_i| for float weights; any
//       evaluation order errs by at most (n + 16) u sum_i |x_i| A_i, and we allow twice that;
//   (2) the 8-bit activation rounding of the integer paths: each x_i moves by at most half a step
//       d_b = max|x| / 127 over its activation block b (32 values, 256 for the K types), so the
//       result moves by at most sum_b d_b / 2 * sum_{i in b} |w_i|.
// With activations that are exact multiples of their block's step, (2) vanishes and the bound is
// float rounding alone.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <tuple>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/packed_weights.h"
#include "tensor/dtype.h"

namespace gemlet {
namespace {

using test::kU;

const DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1,
                        DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,
                        DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

bool IsFloat(DType t) { return GetDTypeInfo(t).block_size == 1; }
int ActBlock(DType t) { return IsFloat(t) ? 1 : GetDTypeInfo(t).block_size == 256 ? 256 : 32; }

struct Matrix {
  DType type;
  int64_t n_in, n_out;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // [n_out, n_in] dequantized
  WeightMatrix view() const {
    WeightMatrix w;
    w.type = type;
    w.data = bytes.data();
    w.n_in = n_in;
    w.n_out = n_out;
    w.row_bytes = RowBytes(type, n_in);
    return w;
  }
};

Matrix MakeMatrix(DType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  Matrix m{type, n_in, n_out, {}, {}};
  const size_t row_bytes = RowBytes(type, n_in);
  m.bytes.resize(row_bytes * n_out);
  m.deq.resize(static_cast<size_t>(n_in * n_out));
  const auto w = test::RandomFloats(static_cast<size_t>(n_in * n_out), seed, 0.05f);
  for (int64_t r = 0; r < n_out; ++r) {
    QuantizeRow(type, &w[r * n_in], &m.bytes[r * row_bytes], n_in);
    DequantizeRow(type, &m.bytes[r * row_bytes], &m.deq[r * n_in], n_in);
  }
  return m;
}

// Activations that 8-bit quantization represents exactly: k * 2^-7 with |k| <= 127 and a +-127 in
// every block of 32, so each block's step is exactly 2^-7.
std::vector<float> ExactActivations(int64_t n_tokens, int64_t n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> k(-127, 127);
  std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
  for (size_t i = 0; i < x.size(); ++i) {
    const int v = (i % n_in) % 32 == 0 ? ((rng() & 1) ? 127 : -127) : k(rng);
    x[i] = static_cast<float>(v) / 128.0f;
  }
  return x;
}

// The allowed |got - exact| for output (token t, row o), per the file comment.
double Bound(const Matrix& m, const float* x, int64_t o, bool with_act_rounding) {
  const int64_t n = m.n_in;
  const float* w = &m.deq[o * n];
  double magnitude = 0, act_rounding = 0;
  const int ab = ActBlock(m.type);
  for (int64_t b0 = 0; b0 < n; b0 += std::max(ab, 32)) {
    const int64_t b1 = std::min(n, b0 + std::max(ab, 32));
    double wmax = 0;
    for (int64_t i = b0; i < b1; ++i) wmax = std::max(wmax, std::fabs(static_cast<double>(w[i])));
    for (int64_t i = b0; i < b1; ++i) magnitude += std::fabs(x[i]) * (IsFloat(m.type) ? std::fabs(w[i]) : 3 * wmax);
  }
  if (with_act_rounding && !IsFloat(m.type)) {
    for (int64_t b0 = 0; b0 < n; b0 += ab) {
      double xmax = 0, wsum = 0;
      for (int64_t i = b0; i < b0 + ab; ++i) {
        xmax = std::max(xmax, std::fabs(static_cast<double>(x[i])));
        wsum += std::fabs(w[i]);
      }
      act_rounding += (xmax / 127.0) * (0.5 + 1e-4) * wsum;
    }
  }
  return 2 * (n + 16) * kU * magnitude + act_rounding + 1e-30;
}

void CheckMatMul(const KernelTable& k, const Matrix& m, const std::vector<float>& x, int64_t n_tokens,
                 KernelContext& ctx, bool exact_acts, PackedWeights* packed = nullptr) {
  std::vector<float> y(static_cast<size_t>(n_tokens * m.n_out), NAN);
  WeightMatrix w = m.view();
  w.packed = packed;
  k.matmul(w, x.data(), n_tokens, y.data(), ctx);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = &x[t * m.n_in];
    for (int64_t o = 0; o < m.n_out; ++o) {
      double exact = 0;
      for (int64_t i = 0; i < m.n_in; ++i) exact += static_cast<double>(m.deq[o * m.n_in + i]) * xt[i];
      ASSERT_NEAR(y[t * m.n_out + o], exact, Bound(m, xt, o, !exact_acts))
          << k.name << " " << DTypeName(m.type) << " n_in=" << m.n_in << " n_out=" << m.n_out
          << " n_tokens=" << n_tokens << " t=" << t << " o=" << o << (exact_acts ? " exact acts" : "")
          << (packed != nullptr && packed->bytes() > 0 ? " packed" : "");
    }
  }
}

std::vector<int64_t> RowLengths(DType type) {
  if (IsFloat(type)) return {1, 7, 31, 33, 255, 257, 1000};
  const int bs = GetDTypeInfo(type).block_size;
  if (bs == 256) return {256, 3 * 256, 5 * 256};
  return {32, 3 * 32, 7 * 32, 33 * 32};
}

// A row length for the batch tests: a few blocks of the type (odd for float rows).
int64_t BatchRowLength(DType type) {
  if (IsFloat(type)) return 333;
  return GetDTypeInfo(type).block_size == 256 ? 3 * 256 : 7 * 32;
}

class MatMulTest : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(MatMulTest, MatchesExactDotWithinDerivedBounds) {
  const KernelTable* k = test::TableNamed(std::get<0>(GetParam()));
  ASSERT_NE(k, nullptr);
  const DType type = std::get<1>(GetParam());
  // Three threads with the default tuning; one thread with prefetching and the VNNI GEMM off (the
  // per-row tiles): every path stays within the bounds.
  KernelContext one(1, k, KernelOptions{.pack_weights = true, .prefetch_bytes = 0, .vnni_gemm = false}), three(3, k);
  uint32_t seed = 1;
  for (int64_t n_in : RowLengths(type)) {
    for (int64_t n_out : {1, 7, 33}) {
      const Matrix m = MakeMatrix(type, n_in, n_out, seed++);
      for (int64_t n_tokens : {1, 2, 3, 5, 9}) {
        KernelContext& ctx = (n_out + n_tokens) % 2 ? three : one;
        CheckMatMul(*k, m, test::RandomFloats(static_cast<size_t>(n_tokens * n_in), seed++), n_tokens, ctx, false);
        if (n_in % 32 == 0) CheckMatMul(*k, m, ExactActivations(n_tokens, n_in, seed++), n_tokens, ctx, true);
      }
    }
  }
}

// The towers' matmul (kernels.h TowerMatMul: many tokens through float matrices) within the same
// bounds, on token counts below, at and past its chunks, rows past its tiles and its threads' tasks
// (197 rows: two tiles a task on one thread, one on three) and k past its blocks; and a token's
// result bit for bit the same whichever chunk it falls in and however many threads run.
TEST_P(MatMulTest, TowerMatMulMatchesExactDotAndIgnoresItsChunks) {
  const KernelTable* k = test::TableNamed(std::get<0>(GetParam()));
  ASSERT_NE(k, nullptr);
  const DType type = std::get<1>(GetParam());
  if (!IsFloat(type)) GTEST_SKIP() << "the towers' matrices are float";
  KernelContext one(1, k), three(3, k);
  uint32_t seed = 7;
  for (int64_t n_in : {1, 7, 33, 257}) {
    for (int64_t n_out : {1, 5, 33, 197}) {
      const Matrix m = MakeMatrix(type, n_in, n_out, seed++);
      for (int64_t n_tokens : {1, 31, 33, 47, 49, 100}) {
        const std::vector<float> x = test::RandomFloats(static_cast<size_t>(n_tokens * n_in), seed++);
        std::vector<float> y(static_cast<size_t>(n_tokens * n_out), NAN), y3(y.size(), NAN);
        TowerMatMul(m.view(), x.data(), n_tokens, y.data(), one);
        TowerMatMul(m.view(), x.data(), n_tokens, y3.data(), three);
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t o = 0; o < n_out; ++o) {
            double exact = 0;
            for (int64_t i = 0; i < n_in; ++i) exact += static_cast<double>(m.deq[o * n_in + i]) * x[t * n_in + i];
            ASSERT_NEAR(y[t * n_out + o], exact, Bound(m, &x[t * n_in], o, false))
                << k->name << " " << DTypeName(type) << " n_in=" << n_in << " n_out=" << n_out << " n_tokens=" << n_tokens;
          }
        }
        ASSERT_EQ(std::memcmp(y.data(), y3.data(), y.size() * sizeof(float)), 0) << "threads changed a result";
        if (n_tokens == 100) {  // the same tokens five places later in their chunks
          std::vector<float> shifted(static_cast<size_t>(95 * n_out), NAN);
          TowerMatMul(m.view(), x.data() + 5 * n_in, 95, shifted.data(), three);
          EXPECT_EQ(std::memcmp(shifted.data(), y.data() + 5 * n_out, shifted.size() * sizeof(float)), 0)
              << k->name << " " << DTypeName(type) << " n_in=" << n_in << " n_out=" << n_out;
        }
      }
    }
  }
}

// n floats ending right where an unreadable page begins: a kernel that reads past them faults.
class GuardedFloats {
 public:
  explicit GuardedFloats(const std::vector<float>& values) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t bytes = values.size() * sizeof(float);
    data_pages_ = (bytes + page - 1) / page * page;
    size_ = data_pages_ + page;
    base_ = static_cast<uint8_t*>(mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) base_ = nullptr;
    if (base_ == nullptr) return;
    mprotect(base_ + data_pages_, page, PROT_NONE);
    data_ = reinterpret_cast<float*>(base_ + data_pages_ - bytes);
    std::memcpy(data_, values.data(), bytes);
  }
  ~GuardedFloats() {
    if (base_ != nullptr) munmap(base_, size_);
  }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;
  const float* data() const { return data_; }

 private:
  uint8_t* base_ = nullptr;
  size_t size_ = 0, data_pages_ = 0;
  float* data_ = nullptr;
};

// The towers' matmul reads nothing past the last token (a last chunk of one token, of half a chunk,
// of a vector and one): the activations end at an unreadable page.
TEST_P(MatMulTest, TowerMatMulReadsNoTokenPastTheLast) {
  const KernelTable* k = test::TableNamed(std::get<0>(GetParam()));
  ASSERT_NE(k, nullptr);
  const DType type = std::get<1>(GetParam());
  if (!IsFloat(type)) GTEST_SKIP() << "the towers' matrices are float";
  KernelContext two(2, k);
  const Matrix m = MakeMatrix(type, 64, 24, 91);
  const TowerClamp clamp{-1.0f, 1.0f, -2.0f, 2.0f};
  for (int64_t n_tokens : {33, 40, 48, 49, 65, 81}) {
    const std::vector<float> x = test::RandomFloats(static_cast<size_t>(n_tokens * m.n_in), 92);
    const GuardedFloats guarded(x);
    ASSERT_NE(guarded.data(), nullptr);
    std::vector<float> y(static_cast<size_t>(n_tokens * m.n_out)), y_ref(y.size());
    TowerMatMul(m.view(), guarded.data(), n_tokens, y.data(), two);
    TowerMatMul(m.view(), x.data(), n_tokens, y_ref.data(), two);
    EXPECT_EQ(std::memcmp(y.data(), y_ref.data(), y.size() * sizeof(float)), 0) << "n_tokens=" << n_tokens;
    TowerMatMul(m.view(), guarded.data(), n_tokens, y.data(), &clamp, two);
  }
}

// The towers' clipped linears: TowerMatMul with bounds on its input and output is the reference's
// clamp, matmul, clamp, within the same bounds (on the clamped input); on both of its paths (few
// tokens, the GEMM), whatever the thread count. Input bounds alone, output bounds alone, both.
TEST_P(MatMulTest, TowerMatMulClampsInputAndOutput) {
  const KernelTable* k = test::TableNamed(std::get<0>(GetParam()));
  ASSERT_NE(k, nullptr);
  const DType type = std::get<1>(GetParam());
  if (!IsFloat(type)) GTEST_SKIP() << "the towers' matrices are float";
  KernelContext one(1, k), three(3, k);
  const float inf = std::numeric_limits<float>::infinity();
  const TowerClamp bounds[] = {{-0.5f, 0.7f, -inf, inf}, {-inf, inf, -0.2f, 0.3f}, {-0.5f, 0.7f, -0.2f, 0.3f}};
  uint32_t seed = 70;
  for (const TowerClamp& clamp : bounds) {
    for (int64_t n_tokens : {5, 40}) {
      const int64_t n_in = 37, n_out = 29;
      const Matrix m = MakeMatrix(type, n_in, n_out, seed++);
      const std::vector<float> x = test::RandomFloats(static_cast<size_t>(n_tokens * n_in), seed++);
      std::vector<float> clamped = x;
      for (float& v : clamped) v = std::clamp(v, clamp.in_min, clamp.in_max);
      std::vector<float> y(static_cast<size_t>(n_tokens * n_out), NAN), y3(y.size(), NAN);
      TowerMatMul(m.view(), x.data(), n_tokens, y.data(), &clamp, one);
      TowerMatMul(m.view(), x.data(), n_tokens, y3.data(), &clamp, three);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t o = 0; o < n_out; ++o) {
          double exact = 0;
          for (int64_t i = 0; i < n_in; ++i) exact += static_cast<double>(m.deq[o * n_in + i]) * clamped[t * n_in + i];
          const double want = std::clamp(exact, static_cast<double>(clamp.out_min), static_cast<double>(clamp.out_max));
          ASSERT_NEAR(y[t * n_out + o], want, Bound(m, &clamped[t * n_in], o, false))
              << k->name << " " << DTypeName(type) << " n_tokens=" << n_tokens;
          ASSERT_GE(y[t * n_out + o], clamp.out_min);
          ASSERT_LE(y[t * n_out + o], clamp.out_max);
        }
      }
      ASSERT_EQ(std::memcmp(y.data(), y3.data(), y.size() * sizeof(float)), 0) << "threads changed a result";
    }
  }
}

// Weights packed for the kernels (16 rows interleaved when n_out is a multiple of 16; NEON_DOTPROD
// and NEON_I8MM pack Q4_0, Q5_0, Q8_0, Q4_K and Q6_K, AVX3_DL also Q4_1, Q5_1, Q5_K, Q3_K and Q2_K,
// AVX2 and AVX2_VNNI all of these but Q3_K and Q2_K) give results within the same bounds, in decode
// and prefill (17 tokens: the panel GEMM); a table without a packed layout for the type leaves the
// slot empty and reads the rows as stored.
TEST_P(MatMulTest, PackedWeightsMatchExactDotWithinDerivedBounds) {
  const KernelTable* k = test::TableNamed(std::get<0>(GetParam()));
  ASSERT_NE(k, nullptr);
  const DType type = std::get<1>(GetParam());
  const std::string name = k->name;
  const bool packs = ((name == "AVX3_DL" || name == "NEON_DOTPROD" || name == "NEON_I8MM") &&
                      (type == DType::kQ4_0 || type == DType::kQ5_0 || type == DType::kQ8_0 || type == DType::kQ4_K ||
                       type == DType::kQ6_K)) ||
                     (name == "AVX3_DL" && (type == DType::kQ4_1 || type == DType::kQ5_1 || type == DType::kQ5_K ||
                                            type == DType::kQ3_K || type == DType::kQ2_K)) ||
                     ((name == "AVX2" || name == "AVX2_VNNI") &&
                      (type == DType::kQ4_0 || type == DType::kQ4_1 || type == DType::kQ5_0 || type == DType::kQ5_1 ||
                       type == DType::kQ8_0 || type == DType::kQ4_K || type == DType::kQ5_K || type == DType::kQ6_K));
  EXPECT_EQ(k->packed_layout != nullptr && k->packed_layout(type) != nullptr, packs) << name << " " << DTypeName(type);
  KernelContext one(1, k), three(3, k);
  uint32_t seed = 7;
  for (int64_t n_in : RowLengths(type)) {
    for (int64_t n_out : {16, 48}) {
      const Matrix m = MakeMatrix(type, n_in, n_out, seed++);
      for (int64_t n_tokens : {1, 2, 3, 8, 9, 17}) {
        KernelContext& ctx = (n_out / 16 + n_tokens) % 2 ? three : one;
        PackedWeights slot(nullptr);
        CheckMatMul(*k, m, test::RandomFloats(static_cast<size_t>(n_tokens * n_in), seed++), n_tokens, ctx, false, &slot);
        if (n_in % 32 == 0) CheckMatMul(*k, m, ExactActivations(n_tokens, n_in, seed++), n_tokens, ctx, true, &slot);
        EXPECT_EQ(slot.bytes() > 0, packs) << k->name << " " << DTypeName(type);
      }
    }
  }
}

// Prefill (GEMM over a batch of more tokens than a decode step's) and token-by-token decode (GEMV)
// agree bit for bit on every table and type, packed and as stored: a token's results are a function
// of its own activations (KernelOptions::batch_invariant, the default; docs/determinism.md). With
// it off, the faster kernels may round differently: within the two results' bounds.
TEST_P(MatMulTest, BatchAgreesWithOneTokenAtATime) {
  const KernelTable* k = test::TableNamed(std::get<0>(GetParam()));
  ASSERT_NE(k, nullptr);
  const DType type = std::get<1>(GetParam());
  const int64_t n_in = IsFloat(type) ? 1000 : 2 * 256, n_out = 48;
  const Matrix m = MakeMatrix(type, n_in, n_out, 99);
  const bool packs = k->packed_layout != nullptr && k->packed_layout(type) != nullptr;
  for (bool invariant : {true, false}) {
    for (bool packed : {false, true}) {
      if (packed && !packs) continue;
      KernelContext ctx(2, k, KernelOptions{.batch_invariant = invariant});
      PackedWeights slot(nullptr);
      WeightMatrix w = m.view();
      if (packed) w.packed = &slot;
      for (int64_t n_tokens : {9, 11, 16, 19, 33}) {
        const auto x = test::RandomFloats(static_cast<size_t>(n_tokens * n_in), 98 + static_cast<uint32_t>(n_tokens));
        std::vector<float> batch(static_cast<size_t>(n_tokens * n_out)), single(static_cast<size_t>(n_out));
        k->matmul(w, x.data(), n_tokens, batch.data(), ctx);
        for (int64_t t = 0; t < n_tokens; ++t) {
          k->matmul(w, &x[t * n_in], 1, single.data(), ctx);
          for (int64_t o = 0; o < n_out; ++o) {
            if (invariant) {
              ASSERT_EQ(batch[t * n_out + o], single[o]) << k->name << " " << DTypeName(type) << " packed=" << packed
                                                         << " n_tokens=" << n_tokens << " t=" << t << " o=" << o;
            } else {
              ASSERT_NEAR(batch[t * n_out + o], single[o], 2 * Bound(m, &x[t * n_in], o, true))
                  << k->name << " " << DTypeName(type) << " packed=" << packed << " t=" << t << " o=" << o;
            }
          }
        }
      }
    }
  }
}

// A few tokens (the sequences of a batched decode step) keep to the decode kernels: each token's
// results are those of decoding it alone, bit for bit, on every table and type, on packed weights
// (the GEMV for all tokens over each group of rows) and as stored, with the VNNI GEMM on and off
// (off, more tokens than that go through the same kernels a few at a time).
TEST_P(MatMulTest, FewTokensAgreeBitForBitWithOneAtATime) {
  const KernelTable* k = test::TableNamed(std::get<0>(GetParam()));
  ASSERT_NE(k, nullptr);
  const DType type = std::get<1>(GetParam());
  const int64_t n_in = BatchRowLength(type), n_out = 48;
  const Matrix m = MakeMatrix(type, n_in, n_out, 31);
  const bool packs = k->packed_layout != nullptr && k->packed_layout(type) != nullptr;
  for (bool packed : {false, true}) {
    if (packed && !packs) continue;
    for (bool vnni_gemm : {true, false}) {
      KernelContext ctx(3, k, KernelOptions{.pack_weights = true, .prefetch_bytes = 2048, .vnni_gemm = vnni_gemm});
      PackedWeights slot(nullptr);
      WeightMatrix w = m.view();
      if (packed) w.packed = &slot;
      std::vector<int64_t> counts = {2, 3, 5, 8};
      if (!vnni_gemm) counts.push_back(19);
      for (int64_t n_tokens : counts) {
        const auto x = test::RandomFloats(static_cast<size_t>(n_tokens * n_in), 40 + static_cast<uint32_t>(n_tokens));
        std::vector<float> batch(static_cast<size_t>(n_tokens * n_out)), single(static_cast<size_t>(n_out));
        k->matmul(w, x.data(), n_tokens, batch.data(), ctx);
        EXPECT_EQ(slot.bytes() > 0, packed);
        for (int64_t t = 0; t < n_tokens; ++t) {
          k->matmul(w, &x[t * n_in], 1, single.data(), ctx);
          for (int64_t o = 0; o < n_out; ++o) {
            ASSERT_EQ(batch[t * n_out + o], single[o]) << DTypeName(type) << " n_tokens=" << n_tokens << " t=" << t
                                                       << " o=" << o << " vnni_gemm=" << vnni_gemm << " packed=" << packed;
          }
        }
      }
    }
  }
}

// A token's experts (MatMulExperts: one parallel loop over several matrices of one type and shape,
// MoE decode) give each expert's product bit for bit as matmul on that token alone, packed and as
// stored, with one input for all and one per expert, for more experts than one loop takes (9).
TEST_P(MatMulTest, ExpertsAgreeBitForBitWithOneMatMulEach) {
  const KernelTable* k = test::TableNamed(std::get<0>(GetParam()));
  ASSERT_NE(k, nullptr);
  const DType type = std::get<1>(GetParam());
  const int64_t n_in = BatchRowLength(type), n_out = 48;
  const bool packs = k->packed_layout != nullptr && k->packed_layout(type) != nullptr;
  constexpr int kExperts = 9;
  std::vector<Matrix> experts;
  for (int e = 0; e < kExperts; ++e) experts.push_back(MakeMatrix(type, n_in, n_out, 70 + e));
  for (bool packed : {false, true}) {
    if (packed && !packs) continue;
    KernelContext ctx(3, k);
    std::vector<std::unique_ptr<PackedWeights>> slots;
    std::vector<WeightMatrix> w;
    for (const Matrix& m : experts) {
      slots.push_back(std::make_unique<PackedWeights>(nullptr));
      w.push_back(m.view());
      if (packed) w.back().packed = slots.back().get();
    }
    for (bool one_input : {true, false}) {
      for (int n : {1, 3, kExperts}) {
        const auto x = test::RandomFloats(static_cast<size_t>((one_input ? 1 : n) * n_in), 80 + n);
        std::vector<float> y(static_cast<size_t>(n * n_out), NAN), single(static_cast<size_t>(n_out));
        MatMulExperts(w.data(), n, x.data(), one_input, y.data(), ctx);  // ctx runs table k
        for (int e = 0; e < n; ++e) {
          k->matmul(w[e], one_input ? x.data() : &x[e * n_in], 1, single.data(), ctx);
          for (int64_t o = 0; o < n_out; ++o) {
            ASSERT_EQ(y[e * n_out + o], single[o]) << k->name << " " << DTypeName(type) << " packed=" << packed
                                                   << " one_input=" << one_input << " n=" << n << " e=" << e << " o=" << o;
          }
        }
        if (packed) {
          EXPECT_GT(slots[0]->bytes(), 0u);
        }
      }
    }
  }
}

// The prefill GEMM cuts a batch into tiles of a few tokens (NEON_DOTPROD: 3, then 2 and 1 at the
// end): a token's results do not depend on the tile it lands in. Batches of 16, 17 and 18 tokens
// put tokens 15 and 16 in tiles of 1, 2 and 3; every token's outputs agree bit for bit.
TEST_P(MatMulTest, PrefillTokensAgreeBitForBitWhateverTheirTile) {
  const KernelTable* k = test::TableNamed(std::get<0>(GetParam()));
  ASSERT_NE(k, nullptr);
  const DType type = std::get<1>(GetParam());
  const int64_t n_in = BatchRowLength(type), n_out = 48;
  const Matrix m = MakeMatrix(type, n_in, n_out, 53);
  const auto x = test::RandomFloats(static_cast<size_t>(18 * n_in), 54);
  KernelContext ctx(2, k);
  PackedWeights slot(nullptr);
  WeightMatrix w = m.view();
  w.packed = &slot;
  std::vector<float> longest(static_cast<size_t>(18 * n_out));
  k->matmul(w, x.data(), 18, longest.data(), ctx);
  for (int64_t n_tokens : {16, 17}) {
    std::vector<float> y(static_cast<size_t>(n_tokens * n_out));
    k->matmul(w, x.data(), n_tokens, y.data(), ctx);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t o = 0; o < n_out; ++o) {
        ASSERT_EQ(y[t * n_out + o], longest[t * n_out + o])
            << k->name << " " << DTypeName(type) << " n_tokens=" << n_tokens << " t=" << t << " o=" << o;
      }
    }
  }
}

// Large activations and weights near the edges of their ranges must not saturate the 16-bit pair
// sums of maddubs: all weights at their format's extreme with activations at +-127 steps, as
// stored and packed (16 rows: even rows constant, odd ones alternating).
TEST_P(MatMulTest, ExtremeValuesDoNotSaturate) {
  const KernelTable* k = test::TableNamed(std::get<0>(GetParam()));
  ASSERT_NE(k, nullptr);
  const DType type = std::get<1>(GetParam());
  const int64_t n_in = IsFloat(type) ? 64 : GetDTypeInfo(type).block_size == 256 ? 256 : 64, n_out = 16;
  KernelContext ctx(1, k);
  for (float sign : {1.0f, -1.0f}) {
    Matrix m{type, n_in, n_out, {}, {}};
    const size_t row_bytes = RowBytes(type, n_in);
    m.bytes.resize(n_out * row_bytes);
    m.deq.resize(n_out * n_in);
    std::vector<float> w(n_out * n_in);
    for (int64_t r = 0; r < n_out; ++r) {
      for (int64_t i = 0; i < n_in; ++i) {
        // constant: q at the top of the range; or alternating extremes
        w[r * n_in + i] = r % 2 == 0 ? sign * 1.0f : (i % 2 ? 1.0f : -1.0f);
      }
      QuantizeRow(type, &w[r * n_in], &m.bytes[r * row_bytes], n_in);
      DequantizeRow(type, &m.bytes[r * row_bytes], &m.deq[r * n_in], n_in);
    }
    // One token (GEMV) and three and seventeen (GEMM), the same activations in each.
    for (bool packed : {false, true}) {
      PackedWeights slot(nullptr);
      for (int64_t n_tokens : {1, 3, 17}) {
        std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
        for (size_t i = 0; i < x.size(); ++i) x[i] = sign * (i % n_in % 3 == 2 ? -127.0f : 127.0f) / 128.0f;
        CheckMatMul(*k, m, x, n_tokens, ctx, true, packed ? &slot : nullptr);
        for (size_t i = 0; i < x.size(); ++i) x[i] = i % n_in % 2 ? 127.0f / 128.0f : -127.0f / 128.0f;
        CheckMatMul(*k, m, x, n_tokens, ctx, true, packed ? &slot : nullptr);
      }
    }
  }
}

// AVX2_VNNI sums the packed kernels' products with vpdpbusd where AVX2 uses vpmaddubsw: exact
// integers both, so the two tables agree bit for bit, decode and prefill, and a model gives the
// same tokens on a CPU with AVX-VNNI as on one without.
TEST(MatMulAvx2Test, VnniAgreesBitForBitWithMaddubs) {
  const KernelTable* plain = test::TableNamed("AVX2");
  const KernelTable* vnni = test::TableNamed("AVX2_VNNI");
  if (plain == nullptr || vnni == nullptr) GTEST_SKIP() << "needs AVX2 and AVX-VNNI or AVX-512 VNNI";
  int packed_types = 0;
  for (DType type : kTypes) {
    if (plain->packed_layout(type) == nullptr) continue;
    ++packed_types;
    const int64_t n_in = BatchRowLength(type), n_out = 48;
    const Matrix m = MakeMatrix(type, n_in, n_out, 77);
    KernelContext a(2, plain), b(3, vnni);
    PackedWeights slot_a(nullptr), slot_b(nullptr);
    WeightMatrix wa = m.view(), wb = m.view();
    wa.packed = &slot_a;
    wb.packed = &slot_b;
    for (int64_t n_tokens : {1, 3, 17}) {
      const auto x = test::RandomFloats(static_cast<size_t>(n_tokens * n_in), 78 + static_cast<uint32_t>(n_tokens));
      std::vector<float> ya(static_cast<size_t>(n_tokens * n_out), NAN), yb(ya.size(), NAN);
      plain->matmul(wa, x.data(), n_tokens, ya.data(), a);
      vnni->matmul(wb, x.data(), n_tokens, yb.data(), b);
      EXPECT_GT(slot_b.bytes(), 0u);
      EXPECT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)), 0)
          << DTypeName(type) << " n_tokens=" << n_tokens;
    }
  }
  EXPECT_GT(packed_types, 0);
}

std::string TypeParamName(const ::testing::TestParamInfo<std::tuple<std::string, DType>>& info) {
  return std::get<0>(info.param) + "_" + DTypeName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Tables, MatMulTest,
                         ::testing::Combine(::testing::ValuesIn(test::TableNames()), ::testing::ValuesIn(kTypes)),
                         TypeParamName);

}  // namespace
}  // namespace gemlet
