// LoRA tools: folding adapters into a base GGUF's matrices, and random adapters for benchmarks.
#include "quantize/lora_tools.h"

#include <chrono>
#include <cmath>
#include <random>
#include <filesystem>
#include <map>
#include <memory>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/lora.h"
#include "model/model.h"
#include "quantize/quantize.h"
#include "runtime/session.h"

namespace gemlet {

namespace {

// A matrix of `rows` x `cols` floats from a WeightMatrix in any type.
std::vector<float> ToFloat(const WeightMatrix& w) {
  std::vector<float> out(static_cast<size_t>(w.n_out * w.n_in));
  for (int64_t r = 0; r < w.n_out; ++r) DequantizeRow(w.type, w.Row(r), out.data() + r * w.n_in, w.n_in);
  return out;
}

// What one base matrix gets: each adapter's (A, B, scale) as floats.
struct Delta {
  std::vector<float> a;  // [rank, n_in]
  std::vector<float> b;  // [n_out, rank]
  int rank = 0;
  float scale = 0;
};

}  // namespace

Result<LoraMergeReport> MergeLora(const LoraMergeOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.adapters.empty()) return Status::Error("no adapters to merge");
  if (o.merged_type && *o.merged_type != DType::kF32 && *o.merged_type != DType::kF16 &&
      *o.merged_type != DType::kBF16) {
    return Status::Error("merged matrices can be written as f32, f16 or bf16, or in their own type");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> base_file, GgufFile::Open(o.base_path));
  std::shared_ptr<const GgufFile> base_gguf(std::move(base_file));
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModel(base_gguf));
  std::vector<std::unique_ptr<LoraAdapter>> adapters;
  for (const LoraMergeOptions::Use& use : o.adapters) {
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::Open(use.path));
    ASSIGN_OR_RETURN(std::unique_ptr<LoraAdapter> a,
                     LoraAdapter::Load(std::shared_ptr<const GgufFile>(std::move(f)), *model, use.path));
    adapters.push_back(std::move(a));
  }
  // Base tensor name -> its deltas, in the adapters' order.
  std::map<std::string, std::vector<Delta>> deltas;
  for (int layer = 0; layer < model->config().n_layers; ++layer) {
    for (int t = 0; t < kLoraTargetCount; ++t) {
      const LoraTarget target = static_cast<LoraTarget>(t);
      const std::string name = "blk." + std::to_string(layer) + "." + LoraTargetName(target) + ".weight";
      for (size_t i = 0; i < adapters.size(); ++i) {
        const LoraPair* p = adapters[i]->Find(layer, target);
        if (p == nullptr || o.adapters[i].scale == 0.0f) continue;
        deltas[name].push_back({ToFloat(p->a), ToFloat(p->b), p->rank(), o.adapters[i].scale * p->scale});
      }
    }
  }

  LoraMergeReport report;
  GgufWriter writer;
  for (const auto& [key, value] : base_gguf->metadata()) {
    RETURN_IF_ERROR(writer.SetValue(std::string(key), value).WithContext("copying metadata key '" + std::string(key) + "'"));
  }
  auto pool = std::make_shared<ThreadPool>(runtime::ResolveThreads(o.n_threads));
  for (const GgufTensor& t : base_gguf->tensors()) {
    const std::string name(t.name);
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    auto it = deltas.find(name);
    if (it == deltas.end()) {
      ++report.tensors_copied;
      const GgufTensor* tp = &t;
      RETURN_IF_ERROR(writer.AddTensor(name, t.type, ne, [tp](ByteSink& sink) { return sink.Write(tp->data, tp->nbytes); }));
      continue;
    }
    ++report.tensors_merged;
    const DType to = o.merged_type ? *o.merged_type : t.type;
    const GgufTensor* tp = &t;
    const std::vector<Delta>* d = &it->second;
    RETURN_IF_ERROR(writer.AddTensor(name, to, ne, [tp, d, to, pool](ByteSink& sink) -> Status {
      const int64_t n_in = tp->ne[0];
      const size_t row_bytes = RowBytes(tp->type, n_in);
      RowSource source = [tp, d, n_in, row_bytes](int64_t r, float* out) {
        DequantizeRow(tp->type, tp->data + static_cast<size_t>(r) * row_bytes, out, n_in);
        // W'[r, :] = W[r, :] + scale * sum_k B[r, k] * A[k, :], adapters in order.
        for (const Delta& delta : *d) {
          for (int k = 0; k < delta.rank; ++k) {
            const float c = delta.scale * delta.b[static_cast<size_t>(r) * delta.rank + k];
            const float* a = delta.a.data() + static_cast<size_t>(k) * n_in;
            for (int64_t i = 0; i < n_in; ++i) out[i] += c * a[i];
          }
        }
      };
      return EncodeRows(to, n_in, tp->n_rows(), source, *pool, sink);
    }));
  }
  RETURN_IF_ERROR(writer.Write(o.output_path));
  std::error_code ec;
  report.bytes_out = std::filesystem::file_size(o.output_path, ec);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

Result<LoraSynthReport> SynthLora(const LoraSynthOptions& o) {
  if (o.rank < 1 || o.rank > 4096) return Status::Error("the rank must be in [1, 4096]");
  if (o.type != DType::kF32 && o.type != DType::kF16 && o.type != DType::kBF16 && o.type != DType::kQ8_0) {
    return Status::Error("an adapter's tensors are f32, f16, bf16 or q8_0");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> base, GgufFile::Open(o.base_path));
  ASSIGN_OR_RETURN(std::string arch, base->GetString("general.architecture"));
  ASSIGN_OR_RETURN(uint32_t n_layers, base->GetU32(arch + ".block_count"));
  // The projections asked for by name, in their canonical order (all seven when none are named).
  std::vector<bool> wanted(kLoraTargetCount, o.targets.empty());
  for (const std::string& name : o.targets) {
    int t = 0;
    while (t < kLoraTargetCount && name != LoraTargetName(static_cast<LoraTarget>(t))) ++t;
    if (t == kLoraTargetCount) {
      return Status::Error("'" + name + "' is not a projection gemlet adapts (attn_q, attn_k, attn_v, attn_output, "
                           "ffn_gate, ffn_up, ffn_down)");
    }
    wanted[static_cast<size_t>(t)] = true;
  }
  std::vector<LoraTarget> targets;
  for (int t = 0; t < kLoraTargetCount; ++t) {
    if (wanted[static_cast<size_t>(t)]) targets.push_back(static_cast<LoraTarget>(t));
  }
  GgufWriter w;
  w.SetString("general.architecture", arch);
  w.SetString("general.type", "adapter");
  w.SetString("general.name", "synthetic rank-" + std::to_string(o.rank));
  w.SetString("adapter.type", "lora");
  w.SetF32("adapter.lora.alpha", o.alpha);
  LoraSynthReport report;
  uint64_t stream = 0;
  for (uint32_t layer = 0; layer < n_layers; ++layer) {
    for (LoraTarget target : targets) {
      const std::string name = "blk." + std::to_string(layer) + "." + LoraTargetName(target) + ".weight";
      const GgufTensor* t = base->FindTensor(name);
      if (t == nullptr) continue;
      const int64_t n_in = t->ne[0], n_out = t->ne[1], r = o.rank;
      for (const bool is_a : {true, false}) {
        const int64_t row = is_a ? n_in : r, rows = is_a ? r : n_out;
        const float sigma = is_a ? 1.0f / std::sqrt(static_cast<float>(n_in)) : 0.05f / std::sqrt(static_cast<float>(r));
        const DType type = o.type == DType::kQ8_0 && row % 32 != 0 ? DType::kF16 : o.type;
        const uint64_t seed = o.seed * 1000003ull + (++stream);
        RETURN_IF_ERROR(w.AddTensor(name + (is_a ? ".lora_a" : ".lora_b"), type, {row, rows},
                                    [row, rows, sigma, type, seed](ByteSink& sink) -> Status {
                                      std::mt19937_64 rng(seed);
                                      std::normal_distribution<float> normal(0.0f, sigma);
                                      std::vector<float> values(static_cast<size_t>(row));
                                      std::vector<uint8_t> bytes(RowBytes(type, row));
                                      for (int64_t i = 0; i < rows; ++i) {
                                        for (float& v : values) v = normal(rng);
                                        QuantizeRow(type, values.data(), bytes.data(), row);
                                        RETURN_IF_ERROR(sink.Write(bytes.data(), bytes.size()));
                                      }
                                      return Status::Ok();
                                    }));
      }
      ++report.pairs;
    }
  }
  if (report.pairs == 0) return Status::Error("the base has none of the projections asked for");
  RETURN_IF_ERROR(w.Write(o.output_path));
  std::error_code ec;
  report.bytes_out = std::filesystem::file_size(o.output_path, ec);
  return report;
}

}  // namespace gemlet
