// A whole model on packed weights, on every table that packs (AVX3_DL; NEON_I8MM and
// NEON_DOTPROD on ARM): Gemma 4's routed experts each get a slot of their own (without a cache file,
// only the experts a token routes to are packed). A Q8_0 copy of the MoE test model gives the same
// logits with packing on and off; a slot shared between experts, or packed from the wrong
// expert's rows, would send tokens through the wrong weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "gguf/gguf_reader.h"
#include "kernels/kernels.h"
#include "kernels/packed_cache.h"
#include "kernels/packed_weights.h"
#include "quantize/quantize.h"
#include "runtime/session.h"

namespace gemlet {

using namespace gemlet::runtime;  // Engine, Session, Generate: the runtime inside the library
namespace {

std::vector<float> AllLogits(const std::string& path, const std::vector<int32_t>& tokens, const KernelTable& kernels,
                             bool pack, size_t* packed_bytes) {
  auto engine = runtime::Engine::Load(path);
  EXPECT_TRUE(engine.ok()) << engine.message();
  if (!engine.ok()) return {};
  SessionOptions o;
  o.n_ctx = 64;
  o.n_threads = 2;
  o.kv_cache_type = KvCacheType::kF32;  // the prompts below were chosen free of near-ties with it
  KernelOptions kernel_options;
  kernel_options.pack_weights = pack;
  // Both through the VNNI GEMM, as stored and packed: batch invariance would send the stored rows
  // to the decode tiles instead (another float order), and a float difference alone flips this
  // random model's near-tie expert choices, hiding what the test looks for.
  kernel_options.batch_invariant = false;
  auto session = Session::Create(engine.value(), o, &kernels, kernel_options);
  EXPECT_TRUE(session.ok()) << session.message();
  const size_t vocab = static_cast<size_t>(engine.value()->model().config().n_vocab);
  std::vector<float> logits(tokens.size() * vocab);
  EXPECT_TRUE(session.value()->Evaluate(tokens, logits.data(), /*all_logits=*/true).ok());
  *packed_bytes = engine.value()->model().PackedWeightBytes();
  return logits;
}

TEST(PackedModelTest, MoeExpertsGiveTheSameLogitsPackedAndAsStored) {
  // Every table that packs Q8_0 (AVX3_DL; NEON_I8MM and NEON_DOTPROD on ARM); elsewhere both runs
  // would read the rows as stored and the test would compare that path with itself.
  std::vector<const KernelTable*> packing;
  for (const std::string& name : KernelNames()) {
    const KernelTable* k = KernelsNamed(name);
    if (k->packed_layout != nullptr && k->packed_layout(DType::kQ8_0) != nullptr) packing.push_back(k);
  }
  if (packing.empty()) {
    GTEST_SKIP() << "no kernel table here packs Q8_0 weights (AVX3_DL, NEON_I8MM, NEON_DOTPROD); this CPU runs "
                 << BestKernels().name << " at best, so there is no packed path to compare with";
  }
  test::TempDir tmp;
  QuantizeOptions q;
  q.input_path = test::TestdataDir() + "/gguf/gemma4_moe_kv_eq_v.gguf";
  q.output_path = tmp.File("moe-q8_0.gguf");
  q.ftype = FileType::kQ8_0;
  q.pure = true;
  auto report = QuantizeGguf(q);
  ASSERT_TRUE(report.ok()) << report.message();
  size_t expert_bytes = 0;
  for (const QuantizedTensor& t : report->tensors) {
    if (t.name.find("_exps.weight") != std::string::npos && t.to == DType::kQ8_0) expert_bytes += t.bytes_out;
  }
  ASSERT_GT(expert_bytes, 0u) << "the experts were not quantized";

  // Two prompts of 24 tokens. This random tiny model has near-ties in its expert routing: float
  // rounding alone flips a choice on some prompts (with (i * 53) % 500 at position 6) and every
  // later position then moves by ~0.3. These two have none, so any difference is a real one.
  for (const KernelTable* kernels : packing) {
    for (int mult : {37, 11}) {
      std::vector<int32_t> tokens = {2};
      for (int i = 0; i < 23; ++i) tokens.push_back(4 + (i * mult) % 500);
      size_t stored_packed = 0, packed_bytes = 0;
      const std::vector<float> stored = AllLogits(q.output_path, tokens, *kernels, /*pack=*/false, &stored_packed);
      const std::vector<float> packed = AllLogits(q.output_path, tokens, *kernels, /*pack=*/true, &packed_bytes);
      ASSERT_FALSE(stored.empty());
      ASSERT_EQ(stored.size(), packed.size());
      EXPECT_EQ(stored_packed, 0u);
      // Every layer's attention and dense MLP, and the experts that tokens were routed to.
      EXPECT_GT(packed_bytes, expert_bytes / 2) << kernels->name << ": experts were not packed";
      // Both paths quantize activations the same way and sum exact integer dot products: they
      // differ by float rounding only, far below what a wrongly routed or wrongly packed expert moves.
      double max_diff = 0;
      for (size_t i = 0; i < stored.size(); ++i) {
        max_diff = test::Worse(max_diff, std::fabs(static_cast<double>(stored[i]) - packed[i]));
      }
      std::printf("%s: MoE Q8_0, packed (%zu bytes) vs as stored: max |dlogit| %.2g over %zu positions\n",
                  kernels->name, packed_bytes, max_diff, tokens.size());
      EXPECT_LT(max_diff, 1e-3) << kernels->name << ", prompt " << mult;
    }
  }
}

// The packed-weight cache file holds every routed expert: a process that maps it packs nothing,
// not even the experts its tokens choose, and gives the logits of packing in memory. Before, the
// experts were left out of the file and each process packed them again into anonymous memory (14.6
// GB on the 26B-A4B), on the first token that chose each one.
TEST(PackedModelTest, MoeExpertsAreMappedFromThePackedCache) {
  const KernelTable& kernels = BestKernels();
  if (kernels.packed_layout == nullptr || kernels.packed_layout(DType::kQ8_0) == nullptr) {
    GTEST_SKIP() << kernels.name << " keeps Q8_0 weights as stored: there is no packed cache to write";
  }
  test::TempDir tmp;
  QuantizeOptions q;
  q.input_path = test::TestdataDir() + "/gguf/gemma4_moe_kv_eq_v.gguf";
  q.output_path = tmp.File("moe-q8_0.gguf");
  q.ftype = FileType::kQ8_0;
  q.pure = true;
  ASSERT_TRUE(QuantizeGguf(q).ok());
  std::vector<int32_t> tokens = {2};
  for (int i = 0; i < 23; ++i) tokens.push_back(4 + (i * 37) % 500);
  size_t in_memory_bytes = 0;
  const std::vector<float> want = AllLogits(q.output_path, tokens, kernels, /*pack=*/true, &in_memory_bytes);

  auto engine = runtime::Engine::Load(q.output_path);
  ASSERT_TRUE(engine.ok()) << engine.message();
  const PackedWeightStore& store = (*engine)->model().packed_store();
  // Every expert of every stacked expert tensor is a remembered matrix of its own.
  int expert_tensors = 0;
  for (const GgufTensor& t : (*engine)->model().gguf().tensors()) {
    if (t.name.find("_exps.weight") == std::string::npos) continue;
    ++expert_tensors;
    int64_t remembered = 0;
    for (const WeightMatrix& w : store.matrices()) {
      if (w.data >= t.data && w.data < t.data + t.nbytes) ++remembered;
    }
    EXPECT_EQ(remembered, t.ne[2]) << t.name;
  }
  ASSERT_GT(expert_tensors, 0);
  auto built = (*engine)->UsePackedCache(tmp.File("cache"), kernels, 2);
  ASSERT_TRUE(built.ok()) << built.message();
  EXPECT_EQ(*built, PackedCacheOutcome::kBuilt);

  SessionOptions o;
  o.n_ctx = 64;
  o.n_threads = 2;
  o.kv_cache_type = KvCacheType::kF32;
  KernelOptions kernel_options;
  kernel_options.batch_invariant = false;  // as AllLogits runs it
  auto session = Session::Create(*engine, o, &kernels, kernel_options);
  ASSERT_TRUE(session.ok()) << session.message();
  std::vector<float> got(want.size());
  ASSERT_TRUE(session.value()->Evaluate(tokens, got.data(), /*all_logits=*/true).ok());
  EXPECT_EQ(got, want) << "the mapped experts are the bytes packing in memory makes";
  EXPECT_GE(store.PackedBytes(), in_memory_bytes) << "every expert is in the file, chosen or not";
  EXPECT_EQ(store.PackedBytesInMemory(), 0u) << "an expert was packed into anonymous memory";
}

}  // namespace
}  // namespace gemlet
