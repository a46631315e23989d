// Building blocks shared by the Gemma family files: weight binding with shape checks, and the
// attention / MLP / output sub-layers wired over the kernel functions (attention itself is the
// kernel of kernels/attention.h, over the KvCache's view of a layer).
#pragma once

#include <string>
#include <functional>
#include <initializer_list>
#include <vector>

#include "gguf/gguf_reader.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"
#include "model/kv_cache.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/model_config.h"

namespace gemlet {

// Looks tensors up by llama.cpp name and checks shape and type before anything is computed.
class WeightBinder {
 public:
  // packed: where the matrices get slots for the kernels' packed copies; null for none.
  explicit WeightBinder(const GgufFile& file, PackedWeightStore* packed = nullptr) : file_(file), packed_(packed) {}
  bool Has(const std::string& name) const { return file_.FindTensor(name) != nullptr; }
  // A [n_out, n_in] matrix (GGUF ne = [n_in, n_out]), read in place from the map (or from its packed
  // copy, once the kernels made one).
  Result<WeightMatrix> Matrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  // The same for a table only read by rows (an embedding that is not also the LM head): no slot for
  // a packed copy, which nothing would read (and a packed-weight cache would store for nothing).
  Result<WeightMatrix> Table(const std::string& name, int64_t n_in, int64_t n_out) const;
  // A small vector (norm weights), converted to float and owned.
  Result<std::vector<float>> Vector(const std::string& name, int64_t n) const;

 private:
  const GgufFile& file_;
  PackedWeightStore* packed_;
};

std::string LayerTensor(int layer, const char* suffix);  // "blk.<layer>.<suffix>"

// Reads the metadata every Gemma family shares: sizes, heads, head dims, norm eps, RoPE base and
// linear scaling, context length. Family files fill in the rest.
struct RopeKeys {
  float base = 10000.0f;      // <arch>.rope.freq_base (global layers)
  float base_swa = 10000.0f;  // <arch>.rope.freq_base_swa (sliding layers; defaults to base)
  float freq_scale = 1.0f;    // 1 / <arch>.rope.scaling.factor (linear)
};
Status ReadCommonConfig(const GgufFile& file, const std::string& arch, ModelConfig* config, RopeKeys* rope);
// Sets each layer's RoPE base and linear scale once the sliding layers are known. Gemma 3 scales
// global layers only (llama.cpp keeps freq_scale_swa = 1); Gemma 2 scales both.
void ApplyRope(const RopeKeys& rope, bool scale_sliding_layers, ModelConfig* config);
// llama.cpp's rule for Gemma 2/3 files without `<arch>.attention.scale`: 1/sqrt(key_length), except
// the 27B sizes (gemma_pytorch uses d_model/n_heads there). gemlet's converter writes the key.
Status ReadAttentionScale(const GgufFile& file, const std::string& arch, int n_layers_27b, ModelConfig* config);
// Sliding-window layers from `<arch>.attention.sliding_window_pattern` (bool array or period), else
// the given period: layer l is sliding unless l % period == period - 1.
Status ReadSlidingPattern(const GgufFile& file, const std::string& arch, int default_period, ModelConfig* config);

struct AttentionWeights {
  WeightMatrix q, k, v, o;
  std::vector<float> q_norm, k_norm;  // Gemma 3 QK-norm; empty when absent
};
Status BindAttention(const WeightBinder& w, const ModelConfig& c, int layer, AttentionWeights* out);

struct MlpWeights {
  WeightMatrix gate, up, down;
};
Status BindMlp(const WeightBinder& w, const ModelConfig& c, int layer, MlpWeights* out);

// Token embedding, final norm and LM head (tied to the embedding unless the file has output.weight).
struct OutputHead {
  WeightMatrix embedding;    // [n_vocab, d_model]
  WeightMatrix output;       // [n_vocab, d_model]
  std::vector<float> norm;   // [d_model]
};
Status BindOutputHead(const WeightBinder& w, const ModelConfig& c, OutputHead* out);

// inv_freq[i] = rope_freq_scale / base^(2i/head_dim), in float as PyTorch computes it.
std::vector<float> RopeInvFreq(const LayerConfig& layer);

// x[t] = embedding row of tokens[t] * scale.
void EmbedTokens(const WeightMatrix& embedding, const int32_t* tokens, int n, float scale, float* x);
// The rows of x ([n_rows, d_model]) the step gives an embedding for (an image's soft tokens) take it.
void PlaceEmbeddings(const ForwardStep& step, int64_t d_model, float* x);
// The row-wise operations below split a prompt's rows across the pool (in prefill they would
// otherwise run on one thread while the others wait); a single row (decode) runs inline.
//
// Calls fn(begin, end) over [0, n) rows: on the pool when there are enough rows to pay for it.
void ForRows(KernelContext& ctx, int n, const std::function<void(int, int)>& fn);

// out[t] = RmsNorm(x[t]) * w for n rows of width d.
void NormRows(KernelContext& ctx, const float* x, const std::vector<float>& w, int n, int d, float eps, float* out);
// x[t] += y[t]
void AddRows(KernelContext& ctx, float* x, const float* y, int n, int d);
// gate[t] = gelu_tanh(gate[t]) * up[t] for n rows of width d.
void GeluMulRows(KernelContext& ctx, float* gate, const float* up, int n, int64_t d);

// Per-head RmsNorm (QK-norm) over n rows of n_heads * head_dim values.
void NormHeads(KernelContext& ctx, float* x, int n, int n_heads, int head_dim, const std::vector<float>& w, float eps);
// Rotates n rows of n_heads heads, row t at position pos0 + t.
void RopeRows(KernelContext& ctx, float* x, int n, int n_heads, int head_dim, const std::vector<float>& inv_freq,
              int64_t pos0);

// Writes the batch's K/V rows into the cache (only those a ring of this capacity keeps).
void CommitKv(KvCache& cache, int layer, const float* k, const float* v, int n, int64_t pos0);

// The standard Gemma 1/2/3 attention sub-layer over the step's rows of ws.xn: projections and
// optional QK-norm over all rows, then per sequence RoPE at its positions, attention against its
// cache and KV commit; output projection into ws.tmp.
void AttentionSublayer(const ModelConfig& c, int layer, const AttentionWeights& w, const std::vector<float>& inv_freq,
                       const ForwardStep& step, Workspace& ws, KernelContext& ctx);

// y = w x over the step's rows ([step.n_rows, n_in] -> [step.n_rows, n_out]), plus the LoRA deltas of
// the sequences whose adapters change (layer, target): every adapted projection goes through here.
void Project(const WeightMatrix& w, int layer, LoraTarget target, const ForwardStep& step, const float* x, float* y,
             Workspace& ws, KernelContext& ctx);

// GeGLU MLP of layer `layer` over the step's rows of ws.xn into ws.tmp: down(gelu_tanh(gate(x)) * up(x)).
void MlpSublayer(int layer, const MlpWeights& w, const ForwardStep& step, Workspace& ws, KernelContext& ctx);

// The rows that get logits: every row when step.all_logits, else each sequence's last row, moved to
// the front of x ([n_rows, d]) in sequence order. Returns their count.
int GatherOutputRows(const ForwardStep& step, float* x, int d);
// Final norm, tied or separate output projection, optional soft-cap of the first `rows` rows of ws.x.
void OutputLogits(const ModelConfig& c, const OutputHead& head, Workspace& ws, KernelContext& ctx, int rows, float* logits);
// The same for the step's rows of ws.x (GatherOutputRows) into step.logits, if any.
void OutputLogits(const ModelConfig& c, const OutputHead& head, const ForwardStep& step, Workspace& ws,
                  KernelContext& ctx);

// The Gemma 2/3 decoder layer: RMSNorm before and after both attention and MLP ("sandwich").
struct SandwichLayer {
  std::vector<float> attn_norm, post_attn_norm, ffn_norm, post_ffn_norm;  // [d_model], stored as (1 + w)
  AttentionWeights attn;
  MlpWeights mlp;
  std::vector<float> inv_freq;  // [head_dim / 2]
};
Status BindSandwichLayer(const WeightBinder& w, const ModelConfig& c, int layer, bool qk_norm, SandwichLayer* out);
// x += post_attn_norm(attn(attn_norm(x))); x += post_ffn_norm(mlp(ffn_norm(x)))
void RunSandwichLayer(const ModelConfig& c, int layer, const SandwichLayer& l, const ForwardStep& step, Workspace& ws,
                      KernelContext& ctx);

// ---- Gemma 3n / Gemma 4 (on-device families) ----

// KV sharing: the last n_shared layers reuse the K/V of the last earlier layer of the same type
// (HF's kv_shared_layer_index rule). Errors when a shared layer has no such source.
Status AssignSharedKvSources(int n_shared, ModelConfig* c);

// q/k norms (weighted), weightless v norm, attention scale 1: binds q, o, q_norm and, on layers
// that own their KV, k, k_norm and v (v may be absent when allow_k_eq_v: V is then the raw K).
Status BindNormedAttention(const WeightBinder& w, const ModelConfig& c, int layer, bool allow_k_eq_v,
                           AttentionWeights* out);
// The attention sub-layer of Gemma 3n/4 over the step's rows of ws.xn into ws.tmp (per sequence
// as AttentionSublayer). A layer whose K/V are shared keeps the step's K/V in ws.hold_* (committed by
// CommitHeldKv); a shared layer reads them from there.
void NormedAttentionSublayer(const ModelConfig& c, int layer, const AttentionWeights& w,
                             const std::vector<float>& inv_freq, const ForwardStep& step, Workspace& ws,
                             KernelContext& ctx);
// Writes the held K/V of KV-source layers into each sequence's cache, at the end of a step.
void CommitHeldKv(const ForwardStep& step, Workspace& ws);

// The output-only tail: the trailing KV-shared layers store no K/V, so what they compute for a row
// reaches nothing but that row's own logits. A step that wants only each sequence's last row (a
// prompt) runs them on those rows alone, and one that wants no logits (a prompt chunk before the
// last) skips them. On Gemma 4 E2B that is 20 of 35 layers and about 70% of a prompt's
// multiply-adds; the logits are those of the full step (the same row through the same layers).
//
// The first layer of that tail: n_layers when the last layer keeps its own K/V.
int FirstOutputOnlyLayer(const ModelConfig& c);
// Whether the step has rows the tail can drop: it wants no row's logits but each sequence's last
// (or none at all), and some sequence has more than one row.
bool TailCanNarrow(const ForwardStep& step);
// Commits the held K/V (every KV source has run: the tail's queries then read all of the step's keys
// from the cache) and moves each sequence's last row to row j of ws.x, of the held K/V and of each
// buffer in `rows` ({data, floats per row}); returns the step of those rows (ws.output_seqs). The
// caller must not CommitHeldKv again for this step.
struct RowBuffer {
  float* data;
  size_t width;
};
ForwardStep NarrowToOutputRows(const ModelConfig& c, const ForwardStep& step, Workspace& ws,
                               std::initializer_list<RowBuffer> rows);

// Per-layer embeddings (PLE). The [n_vocab, n_layers * dim] table stays in the map: only the rows
// of the tokens in flight are read, so on E2B most of the file never becomes resident.
struct PerLayerEmbedding {
  int dim = 0;
  WeightMatrix table;             // [n_vocab_ple, n_layers * dim]
  WeightMatrix model_proj;        // [n_layers * dim, d_model]
  std::vector<float> proj_norm;   // [dim]
  const MappedFile* source = nullptr;  // the table's file mapping; null for in-memory files

  Status Bind(const WeightBinder& w, const GgufFile& file, const ModelConfig& c, int per_layer_dim);
  // out[t] = (norm(model_proj(x[t]) / sqrt(d)) + table[token] * sqrt(dim)) / sqrt(2), [n, n_layers, dim];
  // x is the decoder's input (scaled token embeddings, an image's rows placed). Rows with a `placed`
  // entry (an image's soft tokens; placed may be null) read the table's pad row (0): HF replaces the
  // placeholder ids by pad first. row: scratch of n_layers * dim floats.
  void Compute(const ModelConfig& c, const int32_t* tokens, const float* const* placed, int n, const float* x,
               KernelContext& ctx, float* row, float* out) const;
  // gate: [n, dim] holds gate(h); multiplies gelu(gate) by layer `layer`'s per-layer input in place.
  void GateWithInput(const ModelConfig& c, int layer, const float* per_layer, int n, KernelContext& ctx, float* gate) const;
};

}  // namespace gemlet
