// Memory: the per-layer embedding table of a Gemma 4 model stays on disk (only the rows of the
// tokens in flight become resident), and the memory plan classifies and sizes things correctly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/test_util.h"
#include "kernels/kernels.h"
#include "kernels/packed_cache.h"
#include "kernels/packed_weights.h"
#include "gguf/gguf_writer.h"
#include "runtime/memory_report.h"
#include "runtime/session.h"

namespace gemlet {

using namespace gemlet::runtime;  // Session, Generate: the runtime inside the library
namespace {

// Deterministic small random values, cheap enough for tens of megabytes.
class Noise {
 public:
  explicit Noise(uint64_t seed) : s_(seed * 0x9e3779b97f4a7c15ULL + 1) {}
  float Next(float scale) {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return (static_cast<float>(s_ >> 40) / 16777216.0f - 0.5f) * 2.0f * scale;
  }

 private:
  uint64_t s_;
};

// The shape of a small Gemma 4 test file. Hidden sizes are tiny; what a test is about (the
// per-layer table's size, the attention layout that sizes the KV cache) is set per test.
struct Gemma4Shape {
  int vocab = 32768;
  int dim = 64;
  int layers = 2;
  int ple = 256;          // per-layer embedding width (0: none)
  int q_heads = 2;
  int head_dim_swa = 32;  // sliding layers
  int head_dim = 32;      // global layers
  int ffn = 128;
  int window = 8;
  int period = 2;  // every period-th layer is global
  int shared_kv_layers = 0;
  DType layer_type = DType::kF16;      // attention and MLP matrices
  DType embedding_type = DType::kF16;  // token embedding, tied LM head
};

void WriteGemma4(const Gemma4Shape& m, const std::string& path) {
  GgufWriter w;
  const std::string a = "gemma4";
  w.SetString("general.architecture", a);
  w.SetU32(a + ".block_count", m.layers);
  w.SetU32(a + ".context_length", 8192);
  w.SetU32(a + ".embedding_length", m.dim);
  w.SetU32(a + ".feed_forward_length", m.ffn);
  w.SetU32(a + ".attention.head_count", m.q_heads);
  w.SetU32(a + ".attention.head_count_kv", 1);
  w.SetU32(a + ".attention.key_length", m.head_dim);
  w.SetU32(a + ".attention.value_length", m.head_dim);
  w.SetU32(a + ".attention.key_length_swa", m.head_dim_swa);
  w.SetU32(a + ".attention.value_length_swa", m.head_dim_swa);
  w.SetF32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetF32(a + ".rope.freq_base", 1e6f);
  w.SetF32(a + ".rope.freq_base_swa", 1e4f);
  w.SetU32(a + ".attention.sliding_window", m.window);
  std::vector<bool> sliding(m.layers);
  for (int i = 0; i < m.layers; ++i) sliding[i] = i % m.period != m.period - 1;
  w.SetBoolArray(a + ".attention.sliding_window_pattern", sliding);
  w.SetU32(a + ".attention.shared_kv_layers", m.shared_kv_layers);
  if (m.ple > 0) w.SetU32(a + ".embedding_length_per_layer_input", m.ple);
  w.SetF32(a + ".final_logit_softcapping", 30.0f);
  w.SetString("tokenizer.ggml.model", "gemma4");
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>"};
  for (int i = 4; i < m.vocab; ++i) tokens.push_back("<t" + std::to_string(i) + ">");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  std::vector<int32_t> types(m.vocab, 4);
  for (int i = 0; i < 4; ++i) types[i] = 3;
  w.SetI32Array("tokenizer.ggml.token_type", types);
  w.SetF32Array("tokenizer.ggml.scores", std::vector<float>(m.vocab, -1000.0f));
  w.SetStringArray("tokenizer.ggml.merges", {"<t4> <t5>"});
  w.SetU32("tokenizer.ggml.bos_token_id", 2);
  w.SetU32("tokenizer.ggml.eos_token_id", 1);
  w.SetU32("tokenizer.ggml.unknown_token_id", 3);
  w.SetU32("tokenizer.ggml.padding_token_id", 0);

  uint64_t seed = 1;
  auto add = [&](const std::string& name, DType type, std::vector<int64_t> ne, float scale, float offset = 0.0f) {
    const uint64_t s = seed++;
    ASSERT_TRUE(w.AddTensor(name, type, ne, [ne, type, scale, offset, s](ByteSink& sink) {
                  Noise noise(s);
                  int64_t rows = 1;
                  for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
                  std::vector<float> row(static_cast<size_t>(ne[0]));
                  std::vector<uint8_t> bytes(RowBytes(type, ne[0]));
                  for (int64_t r = 0; r < rows; ++r) {
                    for (float& v : row) v = offset + noise.Next(scale);
                    QuantizeRow(type, row.data(), bytes.data(), ne[0]);
                    RETURN_IF_ERROR(sink.Write(bytes.data(), bytes.size()));
                  }
                  return Status::Ok();
                }).ok());
  };
  const float g = 1.0f / std::sqrt(static_cast<float>(m.dim));
  add("token_embd.weight", m.embedding_type, {m.dim, m.vocab}, g);
  if (m.ple > 0) {
    add("per_layer_token_embd.weight", DType::kF32, {m.ple * m.layers, m.vocab}, 0.06f);
    add("per_layer_model_proj.weight", DType::kF32, {m.dim, m.ple * m.layers}, g);
    add("per_layer_proj_norm.weight", DType::kF32, {m.ple}, 0.1f, 1.0f);
  }
  add("rope_freqs.weight", DType::kF32, {m.head_dim / 2}, 0.0f, 1.0f);
  add("output_norm.weight", DType::kF32, {m.dim}, 0.1f, 1.0f);
  for (int i = 0; i < m.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const int hd = sliding[i] ? m.head_dim_swa : m.head_dim;
    for (const char* norm : {"attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"}) {
      add(p + norm + ".weight", DType::kF32, {m.dim}, 0.1f, 1.0f);
    }
    add(p + "attn_q.weight", m.layer_type, {m.dim, m.q_heads * hd}, g);
    add(p + "attn_k.weight", m.layer_type, {m.dim, hd}, g);
    add(p + "attn_v.weight", m.layer_type, {m.dim, hd}, g);
    add(p + "attn_output.weight", m.layer_type, {m.q_heads * hd, m.dim}, g);
    add(p + "attn_q_norm.weight", DType::kF32, {hd}, 0.1f, 1.0f);
    add(p + "attn_k_norm.weight", DType::kF32, {hd}, 0.1f, 1.0f);
    add(p + "ffn_gate.weight", m.layer_type, {m.dim, m.ffn}, g);
    add(p + "ffn_up.weight", m.layer_type, {m.dim, m.ffn}, g);
    add(p + "ffn_down.weight", m.layer_type, {m.ffn, m.dim}, 1.0f / std::sqrt(static_cast<float>(m.ffn)));
    if (m.ple > 0) {
      add(p + "post_norm.weight", DType::kF32, {m.dim}, 0.1f, 1.0f);
      add(p + "inp_gate.weight", DType::kF32, {m.dim, m.ple}, g);
      add(p + "proj.weight", DType::kF32, {m.ple, m.dim}, 1.0f / 16.0f);
    }
    add(p + "layer_output_scale.weight", DType::kF32, {1}, 0.0f, 1.0f);
  }
  Status s = w.Write(path);
  ASSERT_TRUE(s.ok()) << s.message();
}

TEST(MemoryTest, PerLayerEmbeddingTableStaysOnDisk) {
  test::TempDir tmp;
  const std::string path = tmp.File("ple.gguf");
  const Gemma4Shape shape;  // a 64 MiB per-layer table, about 5 MiB of other weights
  WriteGemma4(shape, path);
  const int kVocab = shape.vocab, kPle = shape.ple, kLayers = shape.layers, kHeadDim = shape.head_dim;
  auto engine = runtime::Engine::Load(path);
  ASSERT_TRUE(engine.ok()) << engine.message();
  const GgufFile& f = engine.value()->model().gguf();
  const GgufTensor* table = f.FindTensor("per_layer_token_embd.weight");
  ASSERT_NE(table, nullptr);
  ASSERT_EQ(table->nbytes, static_cast<size_t>(kVocab) * kPle * kLayers * 4);  // 64 MiB

  const MemoryReport plan = ComputeMemoryReport(engine.value()->model(), 256, DType::kF16);
  EXPECT_EQ(plan.weights_on_demand, table->nbytes);
  EXPECT_LT(plan.weights_resident, size_t{6} << 20);
  EXPECT_EQ(plan.kv_layers_local, 1);
  EXPECT_EQ(plan.kv_layers_global, 1);
  EXPECT_EQ(plan.kv_bytes_per_token_global, size_t{2} * kHeadDim * 2);  // one KV head, K and V, f16
  EXPECT_EQ(plan.kv_total, size_t{2} * kHeadDim * 2 * (256 + 8));     // global n_ctx + local window

  SessionOptions o;
  o.n_ctx = 256;
  o.n_threads = 1;
  auto session = Session::Create(engine.value(), o);
  ASSERT_TRUE(session.ok()) << session.message();
  const std::vector<int32_t> tokens = {2, 17, 4000, 30000, 123, 9999, 31000, 5};
  std::vector<float> logits(static_cast<size_t>(kVocab));
  ASSERT_TRUE(session.value()->Evaluate(tokens, logits.data(), false).ok());
  for (int step = 0; step < 8; ++step) {
    ASSERT_TRUE(session.value()->Evaluate({test::ArgMax(logits.data(), kVocab)}, logits.data(), false).ok());
  }
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));

  // 16 distinct rows of 2 KiB were read; with the kernel's read-around that is at most a few
  // hundred KiB of the 64 MiB table in this process's memory. The rest of the weights are resident.
  const size_t table_resident = ResidentBytesInRange(table->data, table->nbytes);
  EXPECT_LT(table_resident, size_t{4} << 20) << "per-layer table became resident: " << table_resident;
  const GgufTensor* proj = f.FindTensor("blk.0.ffn_down.weight");
  EXPECT_GE(ResidentBytesInRange(proj->data, proj->nbytes), proj->nbytes);  // read every token: all resident
}

// A Gemma 4 shape whose matrices the AVX-512 VNNI kernels pack (rows in groups of 16, row lengths
// in whole blocks), with quantized layers and a Q8_0 tied embedding.
Gemma4Shape PackableShape(DType layer_type) {
  Gemma4Shape shape;
  shape.vocab = 1024;
  shape.dim = 256;
  shape.ffn = 2048;
  shape.ple = 0;
  shape.layer_type = layer_type;
  shape.embedding_type = DType::kQ8_0;
  return shape;
}

// Sessions of these tests run the best kernels this CPU has: whether they pack weights (AVX3_DL,
// NEON_I8MM, NEON_DOTPROD).
bool KernelsPack() {
  const KernelTable& k = BestKernels();
  return k.packed_layout != nullptr && k.packed_layout(DType::kQ8_0) != nullptr;
}

// On AVX-512 VNNI the kernels repack Q8_0/Q4_0/Q4_K/... matrices on first use and release their
// file pages: after a few tokens the matrices are resident once, as packed copies, and the mapped
// file holds next to none of their pages (embedding lookups included).
TEST(MemoryTest, PackedWeightsReplaceTheirFilePages) {
  if (!KernelsPack()) GTEST_SKIP() << "the kernels in use (" << BestKernels().name << ") keep weights as stored";
  test::TempDir tmp;
  const std::string path = tmp.File("packed.gguf");
  const Gemma4Shape shape = PackableShape(DType::kQ8_0);
  WriteGemma4(shape, path);
  auto engine = runtime::Engine::Load(path);
  ASSERT_TRUE(engine.ok()) << engine.message();
  const Model& model = engine.value()->model();
  EXPECT_EQ(model.PackedWeightBytes(), 0u) << "packing happens on first use, not at load";

  // Every matrix, the tied embedding included, is Q8_0. Looked up now: the tensor directory's
  // names live in the mapped file, and reading them later would map pages back in.
  std::vector<const GgufTensor*> matrices = {model.gguf().FindTensor("token_embd.weight")};
  for (int i = 0; i < shape.layers; ++i) {
    for (const char* name : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      matrices.push_back(model.gguf().FindTensor("blk." + std::to_string(i) + "." + name + ".weight"));
    }
  }
  size_t bytes = 0;
  for (const GgufTensor* t : matrices) {
    ASSERT_NE(t, nullptr);
    bytes += t->nbytes;
  }

  SessionOptions o;
  o.n_ctx = 64;
  o.n_threads = 2;
  auto session = Session::Create(engine.value(), o);
  ASSERT_TRUE(session.ok()) << session.message();
  std::vector<float> logits(static_cast<size_t>(shape.vocab));
  ASSERT_TRUE(session.value()->Evaluate({2, 17, 400, 33}, logits.data(), false).ok());  // prefill: packs
  for (int step = 0; step < 4; ++step) {  // decode: embedding lookups, packed GEMVs
    ASSERT_TRUE(session.value()->Evaluate({test::ArgMax(logits.data(), shape.vocab)}, logits.data(), false).ok());
  }
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));

  size_t resident = 0;
  for (const GgufTensor* t : matrices) resident += ResidentBytesInRange(t->data, t->nbytes);
  EXPECT_EQ(model.PackedWeightBytes(), bytes) << "Q8_0 packs to its own size";
  // Partial pages at the edges of the tensors may stay.
  EXPECT_LT(resident, bytes / 10) << resident << " of " << bytes << " bytes still mapped";
}

// Packing ahead of use (as `gemlet chat` does while the user types): PrepareWeights packs what the
// first evaluation would, releases the file pages, and the model then computes exactly what a
// model packed on first use computes. A set stop flag packs nothing.
TEST(MemoryTest, PrepareWeightsPacksAheadOfUse) {
  if (!KernelsPack()) GTEST_SKIP() << "the kernels in use (" << BestKernels().name << ") keep weights as stored";
  test::TempDir tmp;
  const std::string path = tmp.File("prepare.gguf");
  const Gemma4Shape shape = PackableShape(DType::kQ4_0);
  WriteGemma4(shape, path);
  auto lazy = runtime::Engine::Load(path), ahead = runtime::Engine::Load(path);
  ASSERT_TRUE(lazy.ok() && ahead.ok());
  KernelContext ctx(2);

  // Looked up first: the tensor names live in the mapped file (see the test above).
  const GgufTensor* down = ahead.value()->model().gguf().FindTensor("blk.1.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  const std::atomic<bool> stopped{true};
  ahead.value()->model().PrepareWeights(ctx, &stopped);
  EXPECT_EQ(ahead.value()->model().PackedWeightBytes(), 0u);
  ahead.value()->model().PrepareWeights(ctx);
  const size_t prepared = ahead.value()->model().PackedWeightBytes();
  EXPECT_GT(prepared, 0u);
  EXPECT_LT(ResidentBytesInRange(down->data, down->nbytes), down->nbytes / 10);

  auto logits_of = [&](const std::shared_ptr<const runtime::Engine>& engine) {
    SessionOptions o;
    o.n_ctx = 64;
    o.n_threads = 2;
    auto session = Session::Create(engine, o);
    EXPECT_TRUE(session.ok());
    std::vector<float> logits(static_cast<size_t>(shape.vocab) * 4);
    EXPECT_TRUE(session.value()->Evaluate({2, 17, 400, 33}, logits.data(), true).ok());
    return logits;
  };
  const std::vector<float> a = logits_of(lazy.value()), b = logits_of(ahead.value());
  EXPECT_EQ(a, b);
  EXPECT_EQ(lazy.value()->model().PackedWeightBytes(), prepared) << "the first evaluation packs the same";
  EXPECT_EQ(ahead.value()->model().PackedWeightBytes(), prepared) << "nothing left to pack";
}

// Gemma 4 E2B's attention layout: 35 layers, every 5th global, the last 20 reuse the KV of earlier
// layers; one KV head of 256 (sliding, window 512) or 512 (global). The cache for n_ctx 4096 in f16
// is 15 owned layers: 12 local x 512 positions x 1 KiB + 3 global x 4096 positions x 2 KiB = 30 MiB,
// and the process must grow by that (plus small activation buffers), not by 35 full layers' worth.
TEST(MemoryTest, KvCacheOfAnE2BShapedModel) {
  test::TempDir tmp;
  const std::string path = tmp.File("e2b_kv.gguf");
  Gemma4Shape e2b;
  e2b.vocab = 512;
  e2b.dim = 64;
  e2b.layers = 35;
  e2b.ple = 0;
  e2b.q_heads = 1;
  e2b.head_dim_swa = 256;
  e2b.head_dim = 512;
  e2b.ffn = 64;
  e2b.window = 512;
  e2b.period = 5;
  e2b.shared_kv_layers = 20;
  WriteGemma4(e2b, path);
  auto engine = runtime::Engine::Load(path);
  ASSERT_TRUE(engine.ok()) << engine.message();

  constexpr int kCtx = 4096;
  const size_t local_per_token = 1 * (256 + 256) * 2, global_per_token = 1 * (512 + 512) * 2;
  const size_t arithmetic = 12 * local_per_token * 512 + 3 * global_per_token * kCtx;
  ASSERT_EQ(arithmetic, size_t{30} << 20);
  const MemoryReport plan = ComputeMemoryReport(engine.value()->model(), kCtx, DType::kF16);
  EXPECT_EQ(plan.kv_layers_local, 12);
  EXPECT_EQ(plan.kv_layers_global, 3);
  EXPECT_EQ(plan.kv_layers_shared, 20);
  EXPECT_EQ(plan.window, 512);
  EXPECT_EQ(plan.kv_bytes_per_token_local, 12 * local_per_token);
  EXPECT_EQ(plan.kv_bytes_per_token_global, 3 * global_per_token);
  EXPECT_EQ(plan.kv_total, arithmetic);

  SessionOptions o;
  o.n_ctx = kCtx;
  o.n_threads = 1;
  o.max_batch = 32;
  // Anonymous memory, not RSS: the session's allocations are anonymous, and the model file's pages
  // (which a busy machine may reclaim meanwhile) are not.
  const size_t rss_before = AnonBytes();
  auto session = Session::Create(engine.value(), o);
  ASSERT_TRUE(session.ok()) << session.message();
  // Run past the local window so every ring has been written and wrapped.
  std::vector<int32_t> prompt(600);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(4 + (i * 37) % 500);
  std::vector<float> logits(512);
  ASSERT_TRUE(session.value()->Evaluate(prompt, logits.data(), false).ok());
  const size_t grown = AnonBytes() - rss_before;
  if (rss_before == 0) GTEST_SKIP() << "no RssAnon in /proc/self/status here";
  // The cache reserves the plan but commits pages as rows are written: the 12 rings are full (their
  // window and the 16 positions of rollback room), the 3 global layers hold 600 of 4096 positions.
  const size_t ring = 512 + 16, committed = 12 * local_per_token * ring + 3 * global_per_token * prompt.size();
  EXPECT_EQ(session.value()->cache().bytes(), 12 * local_per_token * ring + 3 * global_per_token * kCtx);
  const size_t resident = session.value()->cache().ResidentBytes();
  EXPECT_GE(resident, committed);
  EXPECT_LE(resident, committed + 30 * 4096) << "a partial page per K or V region at most";
  const size_t expected = committed + session.value()->activation_bytes();
  EXPECT_LT(session.value()->activation_bytes(), arithmetic / 10);
  std::printf("E2B-shaped KV: plan %zu bytes, committed %zu + activations %zu, anonymous memory grew %zu bytes\n", plan.kv_total,
              resident, session.value()->activation_bytes(), grown);
  // ASan's shadow memory and allocator make RSS a poor ruler; the plan checks above still ran.
#if !defined(__SANITIZE_ADDRESS__)
  // At least the KV pages (the workspace may come from heap memory the allocator already held).
  EXPECT_GT(grown, resident * 98 / 100);
  EXPECT_LT(grown, expected * 103 / 100) << "session grew anonymous memory by " << grown << " bytes, expected " << expected;
#endif
}

// The packed-weight cache: built once from the rows (slab by slab), then mapped read-only. The
// packed weights are then clean file pages, not anonymous memory; a second engine packs nothing;
// the logits are those of packing in memory, bit for bit (the same layout, the same kernels).
// A truncated, corrupted, foreign or stale cache is rebuilt, never used; a folder that cannot be
// written leaves the engine packing in memory.
TEST(MemoryTest, PackedWeightCacheIsBuiltOnceThenMappedReadOnly) {
  if (!KernelsPack()) GTEST_SKIP() << "the kernels in use (" << BestKernels().name << ") keep weights as stored";
  test::TempDir tmp;
  const std::string path = tmp.File("cached.gguf"), dir = tmp.File("cache");
  const Gemma4Shape shape = PackableShape(DType::kQ4_0);
  WriteGemma4(shape, path);
  const std::vector<int32_t> tokens = {2, 17, 400, 33, 901};
  auto logits_of = [&](const std::shared_ptr<const runtime::Engine>& engine) {
    SessionOptions o;
    o.n_ctx = 64;
    o.n_threads = 2;
    auto session = Session::Create(engine, o);
    EXPECT_TRUE(session.ok());
    std::vector<float> logits(static_cast<size_t>(shape.vocab) * tokens.size());
    EXPECT_TRUE(session.value()->Evaluate(tokens, logits.data(), true).ok());
    return logits;
  };
  auto in_memory = runtime::Engine::Load(path);
  ASSERT_TRUE(in_memory.ok());
  const std::vector<float> want = logits_of(*in_memory);
  EXPECT_GT((*in_memory)->model().packed_store().PackedBytesInMemory(), 0u);

  auto first = runtime::Engine::Load(path);
  ASSERT_TRUE(first.ok());
  auto built = (*first)->UsePackedCache(dir, BestKernels(), 2);
  ASSERT_TRUE(built.ok()) << built.message();
  EXPECT_EQ(*built, PackedCacheOutcome::kBuilt);
  const PackedWeightStore& store = (*first)->model().packed_store();
  EXPECT_GT(store.PackedBytes(), 0u);
  EXPECT_EQ(store.PackedBytesInMemory(), 0u) << "every packed matrix points into the mapped file";
  // Sections start on 16 KiB pages: every slot's data is aligned so within the mapping.
  for (const WeightMatrix& w : store.matrices()) {
    if (w.packed->data() != nullptr) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(w.packed->data()) % 16384, 0u);
    }
  }
  EXPECT_EQ(logits_of(*first), want);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 1u) << "one cache file, no temporary left behind";
  const std::string cache = files[0];
  EXPECT_EQ(cache.substr(cache.size() - 6), ".gpack");

  auto second = runtime::Engine::Load(path);
  ASSERT_TRUE(second.ok());
  auto loaded = (*second)->UsePackedCache(dir, BestKernels(), 2);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(*loaded, PackedCacheOutcome::kLoaded);
  EXPECT_EQ(logits_of(*second), want);

  // Damaged caches are rebuilt: truncated, a header byte flipped, a data-free stranger.
  const auto size = std::filesystem::file_size(cache);
  auto reload = [&] {
    auto e = runtime::Engine::Load(path);
    EXPECT_TRUE(e.ok());
    auto r = (*e)->UsePackedCache(dir, BestKernels(), 2);
    EXPECT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(logits_of(*e), want);
    return r.ok() ? *r : PackedCacheOutcome::kLoaded;
  };
  std::filesystem::resize_file(cache, size - 1);
  EXPECT_EQ(reload(), PackedCacheOutcome::kBuilt) << "a truncated cache is rebuilt";
  EXPECT_EQ(std::filesystem::file_size(cache), size);
  {
    std::FILE* f = std::fopen(cache.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 40, SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, 40, SEEK_SET);
    std::fputc(c ^ 0x5a, f);
    std::fclose(f);
  }
  EXPECT_EQ(reload(), PackedCacheOutcome::kBuilt) << "a header that fails its checksum is rebuilt";
  {
    std::FILE* f = std::fopen(cache.c_str(), "wb");
    std::fputs("not a cache", f);
    std::fclose(f);
  }
  EXPECT_EQ(reload(), PackedCacheOutcome::kBuilt) << "a foreign file is replaced";
  EXPECT_EQ(reload(), PackedCacheOutcome::kLoaded);

  // A new version of the model file (rewritten: new mtime) gets a cache of its own, and the old
  // version's cache is removed; a cache file of another model, and files that are not caches, stay.
  const std::string note = dir + "/notes.txt";
  {
    auto other = tmp.File("other.gguf");
    WriteGemma4(shape, other);
    auto e = runtime::Engine::Load(other);
    ASSERT_TRUE(e.ok());
    ASSERT_TRUE((*e)->UsePackedCache(dir, BestKernels(), 2).ok());
    std::fclose(std::fopen(note.c_str(), "wb"));
  }
  size_t before_update = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) before_update += e.path().extension() == ".gpack";
  ASSERT_EQ(before_update, 2u) << "this model's cache and the other model's";
  WriteGemma4(shape, path);
  EXPECT_EQ(reload(), PackedCacheOutcome::kBuilt) << "a changed model file is not matched to the old cache";
  EXPECT_FALSE(std::filesystem::exists(cache)) << "the old version's cache was removed";
  size_t after_update = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) after_update += e.path().extension() == ".gpack";
  EXPECT_EQ(after_update, 2u) << "the new version's cache and the other model's";
  EXPECT_TRUE(std::filesystem::exists(note));

  // A folder that cannot be created: an error, and the engine packs in memory as before.
  auto blocked = runtime::Engine::Load(path);
  ASSERT_TRUE(blocked.ok());
  const std::string file_in_the_way = tmp.File("plain-file");
  std::fclose(std::fopen(file_in_the_way.c_str(), "wb"));
  EXPECT_FALSE((*blocked)->UsePackedCache(file_in_the_way + "/cache", BestKernels(), 2).ok());
  EXPECT_EQ(logits_of(*blocked), want);
  EXPECT_GT((*blocked)->model().packed_store().PackedBytesInMemory(), 0u);
}

// The model file's rows that a mapped cache replaces are dropped from the page cache (the file read
// just before, by a download's check or another tool, would otherwise hold the memory the packed
// bytes need): the ranges cover every mapped matrix's rows, and neither the header nor a matrix
// packed in memory.
TEST(MemoryTest, TheCacheDropsTheRowsItReplaces) {
  if (!KernelsPack()) GTEST_SKIP() << "the kernels in use (" << BestKernels().name << ") keep weights as stored";
  test::TempDir tmp;
  const std::string path = tmp.File("cached.gguf"), dir = tmp.File("cache");
  WriteGemma4(PackableShape(DType::kQ4_0), path);
  auto engine = runtime::Engine::Load(path);
  ASSERT_TRUE(engine.ok());
  const PackedWeightStore& store = (*engine)->model().packed_store();
  EXPECT_TRUE(ReplacedRowRanges(store).empty()) << "nothing is mapped from a cache yet";
  ASSERT_TRUE((*engine)->UsePackedCache(dir, BestKernels(), 2).ok());
  const std::vector<std::pair<size_t, size_t>> ranges = ReplacedRowRanges(store);
  ASSERT_FALSE(ranges.empty());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_GT(ranges[i].first, ranges[i - 1].second) << "sorted, disjoint";
  const uint8_t* file = store.source()->data();
  const size_t first_tensor = static_cast<size_t>((*engine)->model().gguf().tensors()[0].data - file);
  EXPECT_GE(ranges.front().first, first_tensor) << "the header stays";
  size_t matrices = 0;
  for (const WeightMatrix& w : store.matrices()) {
    if (w.packed->data() == nullptr) continue;
    ++matrices;
    const size_t begin = static_cast<size_t>(w.data - file), end = begin + static_cast<size_t>(w.n_out) * w.row_bytes;
    const bool covered = std::any_of(ranges.begin(), ranges.end(), [&](const auto& r) { return r.first <= begin && end <= r.second; });
    EXPECT_TRUE(covered) << "rows at " << begin << ".." << end;
  }
  EXPECT_GT(matrices, 0u);
}

// PrepareWeights on a model mapped from the packed-weight cache packs nothing and reads the mapped
// bytes in: just built, the file is out of the page cache (the build drops its pages), and after
// PrepareWeights every packed matrix is resident, so a first evaluation does not wait on the disk.
TEST(MemoryTest, PrepareWeightsReadsTheMappedCacheIn) {
  if (!KernelsPack()) GTEST_SKIP() << "the kernels in use (" << BestKernels().name << ") keep weights as stored";
  test::TempDir tmp;
  const std::string path = tmp.File("cached.gguf");
  WriteGemma4(PackableShape(DType::kQ4_0), path);
  auto engine = runtime::Engine::Load(path);
  ASSERT_TRUE(engine.ok());
  auto built = (*engine)->UsePackedCache(tmp.File("cache"), BestKernels(), 2);
  ASSERT_TRUE(built.ok()) << built.message();
  const PackedWeightStore& store = (*engine)->model().packed_store();
  auto resident = [&] {
    size_t bytes = 0;
    for (const WeightMatrix& w : store.matrices()) {
      if (w.packed->data() != nullptr) bytes += ResidentBytesInRange(w.packed->data(), w.packed->bytes());
    }
    return bytes;
  };
  const size_t packed = store.PackedBytes();
  ASSERT_GT(packed, size_t{1} << 20);
  EXPECT_LT(resident(), packed / 2) << "the build left the file in the page cache";
  KernelContext ctx(2);
  (*engine)->model().PrepareWeights(ctx);
  EXPECT_GE(resident(), packed) << "whole pages: the last one of a matrix may be partly another's";
  EXPECT_EQ(store.PackedBytes(), packed);
  EXPECT_EQ(store.PackedBytesInMemory(), 0u) << "PrepareWeights packed in memory what the cache holds";
}

}  // namespace
}  // namespace gemlet

namespace gemlet {
namespace {

// The work a compute bound divides: every matrix of the layers a prompt row goes through, not the
// lookups, the tied head, or the KV-shared tail (run on the last row only).
TEST(MemoryTest, PromptMacsLeaveOutLookupsTheHeadAndTheSharedTail) {
  test::TempDir dir;
  Gemma4Shape m;
  m.vocab = 512;
  m.layers = 4;
  m.shared_kv_layers = 2;
  m.ple = 16;
  WriteGemma4(m, dir.File("e2b_like.gguf"));
  auto file = GgufFile::Open(dir.File("e2b_like.gguf"));
  ASSERT_TRUE(file.ok()) << file.message();
  double want = static_cast<double>(m.dim) * m.ple * m.layers;  // per_layer_model_proj
  for (int i = 0; i < m.layers - m.shared_kv_layers; ++i) {
    const int hd = i % m.period != m.period - 1 ? m.head_dim_swa : m.head_dim;
    want += static_cast<double>(m.dim) * (m.q_heads * hd) * 2 + static_cast<double>(m.dim) * hd * 2;  // q, o; k, v
    want += static_cast<double>(m.dim) * m.ffn * 3 + static_cast<double>(m.dim) * m.ple * 2;          // MLP; PLE gate, proj
  }
  EXPECT_EQ(runtime::PromptMacsPerToken(*file.value(), "gemma4"), want);
  // Without KV sharing every layer counts.
  m.shared_kv_layers = 0;
  WriteGemma4(m, dir.File("plain.gguf"));
  auto plain = GgufFile::Open(dir.File("plain.gguf"));
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_GT(runtime::PromptMacsPerToken(*plain.value(), "gemma4"), want * 1.5);
}

}  // namespace
}  // namespace gemlet
