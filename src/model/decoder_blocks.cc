// Shared Gemma building blocks: metadata reading, weight binding, the attention sub-layers' wiring
// around the attention kernel, MLP, output head.
#include "model/decoder_blocks.h"

#include <algorithm>
#include <cmath>

#include "kernels/packed_weights.h"

namespace gemlet {

std::string LayerTensor(int layer, const char* suffix) {
  return "blk." + std::to_string(layer) + "." + suffix;
}

Result<WeightMatrix> WeightBinder::Matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  const GgufTensor* t = file_.FindTensor(name);
  if (t == nullptr) return Status::Error("missing tensor '" + name + "'");
  if (t->n_dims > 2 || t->ne[0] != n_in || t->ne[1] != n_out) {
    return Status::Error("tensor '" + name + "' has shape " + t->ShapeString() + ", expected [" +
                         std::to_string(n_in) + ", " + std::to_string(n_out) + "]");
  }
  if (!GetDTypeInfo(t->type).can_compute) {
    return Status::Error("tensor '" + name + "' has type " + DTypeName(t->type) + ", which gemlet cannot compute yet");
  }
  WeightMatrix m;
  m.type = t->type;
  m.data = t->data;
  m.n_in = n_in;
  m.n_out = n_out;
  m.row_bytes = RowBytes(t->type, n_in);
  if (packed_ != nullptr) m.packed = packed_->NewSlotFor(m);
  return m;
}

Result<WeightMatrix> WeightBinder::Table(const std::string& name, int64_t n_in, int64_t n_out) const {
  ASSIGN_OR_RETURN(WeightMatrix m, WeightBinder(file_, nullptr).Matrix(name, n_in, n_out));
  return m;
}

Result<std::vector<float>> WeightBinder::Vector(const std::string& name, int64_t n) const {
  const GgufTensor* t = file_.FindTensor(name);
  if (t == nullptr) return Status::Error("missing tensor '" + name + "'");
  if (t->n_elements() != n) {
    return Status::Error("tensor '" + name + "' has shape " + t->ShapeString() + ", expected " + std::to_string(n) +
                         " values");
  }
  if (!GetDTypeInfo(t->type).can_compute) {
    return Status::Error("tensor '" + name + "' has type " + DTypeName(t->type) + ", which gemlet cannot compute yet");
  }
  std::vector<float> out(static_cast<size_t>(n));
  DequantizeRow(t->type, t->data, out.data(), n);
  return out;
}

// ---------------------------------------------------------------------------------------------
Status ReadCommonConfig(const GgufFile& f, const std::string& arch, ModelConfig* c, RopeKeys* rope) {
  c->arch = arch;
  if (f.Has("general.name")) {
    ASSIGN_OR_RETURN(c->name, f.GetString("general.name"));
  }
  ASSIGN_OR_RETURN(uint32_t n_layers, f.GetU32(arch + ".block_count"));
  ASSIGN_OR_RETURN(uint32_t d_model, f.GetU32(arch + ".embedding_length"));
  if (n_layers == 0 || n_layers > 4096) return Status::Error(arch + ".block_count = " + std::to_string(n_layers) + " is out of range");
  if (d_model == 0 || d_model > (1u << 20)) return Status::Error(arch + ".embedding_length = " + std::to_string(d_model) + " is out of range");
  c->n_layers = static_cast<int>(n_layers);
  c->d_model = static_cast<int>(d_model);
  ASSIGN_OR_RETURN(uint32_t n_ctx, f.GetU32Or(arch + ".context_length", 8192));
  c->n_ctx_train = static_cast<int>(std::min<uint32_t>(n_ctx, 1u << 30));
  ASSIGN_OR_RETURN(c->norm_eps, f.GetF32(arch + ".attention.layer_norm_rms_epsilon"));

  const GgufTensor* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr) return Status::Error("missing tensor 'token_embd.weight'");
  if (embd->n_dims != 2 || embd->ne[0] != d_model) {
    return Status::Error("tensor 'token_embd.weight' has shape " + embd->ShapeString() + ", expected [" +
                         std::to_string(d_model) + ", n_vocab]");
  }
  c->n_vocab = static_cast<int>(embd->ne[1]);
  // Gemma scales embeddings by sqrt(d_model) (HF: normalizer; llama.cpp: inp_scaled).
  c->embed_scale = std::sqrt(static_cast<float>(d_model));

  ASSIGN_OR_RETURN(auto n_heads, f.GetU32PerLayer(arch + ".attention.head_count", n_layers));
  auto n_kv_heads = n_heads;
  if (f.Has(arch + ".attention.head_count_kv")) {
    ASSIGN_OR_RETURN(n_kv_heads, f.GetU32PerLayer(arch + ".attention.head_count_kv", n_layers));
  }
  ASSIGN_OR_RETURN(auto ffn, f.GetU32PerLayer(arch + ".feed_forward_length", n_layers));
  if (n_heads[0] == 0) return Status::Error(arch + ".attention.head_count is 0");
  ASSIGN_OR_RETURN(uint32_t head_dim, f.GetU32Or(arch + ".attention.key_length", d_model / n_heads[0]));
  ASSIGN_OR_RETURN(uint32_t head_dim_v, f.GetU32Or(arch + ".attention.value_length", d_model / n_heads[0]));
  ASSIGN_OR_RETURN(float rope_base, f.GetF32Or(arch + ".rope.freq_base", 10000.0f));
  ASSIGN_OR_RETURN(float rope_base_swa, f.GetF32Or(arch + ".rope.freq_base_swa", rope_base));
  ASSIGN_OR_RETURN(uint32_t window, f.GetU32Or(arch + ".attention.sliding_window", 0));
  c->sliding_window = static_cast<int>(window);

  float freq_scale = 1.0f;
  if (f.Has(arch + ".rope.scaling.type")) {
    ASSIGN_OR_RETURN(std::string type, f.GetString(arch + ".rope.scaling.type"));
    if (type != "linear" && type != "none") {
      return Status::Error(arch + ".rope.scaling.type '" + type + "' is not supported (linear or none)");
    }
  }
  ASSIGN_OR_RETURN(float factor, f.GetF32Or(arch + ".rope.scaling.factor", 0.0f));
  if (factor < 0 || !std::isfinite(factor)) return Status::Error(arch + ".rope.scaling.factor is invalid");
  if (factor != 0.0f) freq_scale = 1.0f / factor;

  c->layers.resize(n_layers);
  for (uint32_t i = 0; i < n_layers; ++i) {
    LayerConfig& l = c->layers[i];
    l.n_heads = static_cast<int>(n_heads[i]);
    l.n_kv_heads = static_cast<int>(n_kv_heads[i]);
    l.head_dim = static_cast<int>(head_dim);
    l.head_dim_v = static_cast<int>(head_dim_v);
    l.ffn_dim = static_cast<int>(ffn[i]);
    if (l.n_heads <= 0 || l.n_kv_heads <= 0 || l.n_heads % l.n_kv_heads != 0) {
      return Status::Error("layer " + std::to_string(i) + ": " + std::to_string(l.n_heads) + " heads cannot share " +
                           std::to_string(l.n_kv_heads) + " KV heads");
    }
    if (l.head_dim <= 0 || l.head_dim % 2 != 0 || l.head_dim > 4096 || l.head_dim_v <= 0 || l.head_dim_v > 4096) {
      return Status::Error("layer " + std::to_string(i) + ": invalid head size " + std::to_string(l.head_dim));
    }
    if (l.ffn_dim <= 0) return Status::Error("layer " + std::to_string(i) + ": feed_forward_length is 0");
  }
  rope->base = rope_base;
  rope->base_swa = rope_base_swa;
  rope->freq_scale = freq_scale;
  return Status::Ok();
}

void ApplyRope(const RopeKeys& rope, bool scale_sliding_layers, ModelConfig* c) {
  for (LayerConfig& l : c->layers) {
    l.rope_base = l.sliding ? rope.base_swa : rope.base;
    l.rope_freq_scale = (!l.sliding || scale_sliding_layers) ? rope.freq_scale : 1.0f;
  }
}

Status ReadAttentionScale(const GgufFile& f, const std::string& arch, int n_layers_27b, ModelConfig* c) {
  const std::string key = arch + ".attention.scale";
  if (f.Has(key)) {
    ASSIGN_OR_RETURN(c->attn_scale, f.GetF32(key));
    if (!(c->attn_scale > 0) || !std::isfinite(c->attn_scale)) return Status::Error(key + " must be positive");
    return Status::Ok();
  }
  const LayerConfig& l0 = c->layers[0];
  const float denom = c->n_layers == n_layers_27b ? static_cast<float>(c->d_model / l0.n_heads)
                                                  : static_cast<float>(l0.head_dim);
  c->attn_scale = 1.0f / std::sqrt(denom);
  return Status::Ok();
}

Status ReadSlidingPattern(const GgufFile& f, const std::string& arch, int default_period, ModelConfig* c) {
  const std::string key = arch + ".attention.sliding_window_pattern";
  const GgufValue* v = f.Find(key);
  std::vector<bool> sliding(c->n_layers);
  if (v != nullptr && v->type == GgufType::kArray) {
    ASSIGN_OR_RETURN(sliding, f.GetBoolArray(key));
    if (static_cast<int>(sliding.size()) != c->n_layers) {
      return Status::Error(key + " has " + std::to_string(sliding.size()) + " entries, expected " +
                           std::to_string(c->n_layers));
    }
  } else {
    int period = default_period;
    if (v != nullptr) {
      ASSIGN_OR_RETURN(uint32_t p, f.GetU32(key));
      period = static_cast<int>(p);
    }
    for (int i = 0; i < c->n_layers; ++i) sliding[i] = period == 0 || (i % period < period - 1);
  }
  for (int i = 0; i < c->n_layers; ++i) c->layers[i].sliding = sliding[i];
  return Status::Ok();
}

Status BindAttention(const WeightBinder& w, const ModelConfig& c, int i, AttentionWeights* out) {
  const LayerConfig& l = c.layers[i];
  ASSIGN_OR_RETURN(out->q, w.Matrix(LayerTensor(i, "attn_q.weight"), c.d_model, l.n_heads * l.head_dim));
  ASSIGN_OR_RETURN(out->k, w.Matrix(LayerTensor(i, "attn_k.weight"), c.d_model, l.n_kv_heads * l.head_dim));
  ASSIGN_OR_RETURN(out->v, w.Matrix(LayerTensor(i, "attn_v.weight"), c.d_model, l.n_kv_heads * l.head_dim_v));
  ASSIGN_OR_RETURN(out->o, w.Matrix(LayerTensor(i, "attn_output.weight"), l.n_heads * l.head_dim_v, c.d_model));
  return Status::Ok();
}

Status BindMlp(const WeightBinder& w, const ModelConfig& c, int i, MlpWeights* out) {
  const LayerConfig& l = c.layers[i];
  ASSIGN_OR_RETURN(out->gate, w.Matrix(LayerTensor(i, "ffn_gate.weight"), c.d_model, l.ffn_dim));
  ASSIGN_OR_RETURN(out->up, w.Matrix(LayerTensor(i, "ffn_up.weight"), c.d_model, l.ffn_dim));
  ASSIGN_OR_RETURN(out->down, w.Matrix(LayerTensor(i, "ffn_down.weight"), l.ffn_dim, c.d_model));
  return Status::Ok();
}

Status BindOutputHead(const WeightBinder& w, const ModelConfig& c, OutputHead* out) {
  if (w.Has("output.weight")) {  // a separate LM head: the embedding is only looked up
    ASSIGN_OR_RETURN(out->embedding, w.Table("token_embd.weight", c.d_model, c.n_vocab));
    ASSIGN_OR_RETURN(out->output, w.Matrix("output.weight", c.d_model, c.n_vocab));
  } else {
    ASSIGN_OR_RETURN(out->embedding, w.Matrix("token_embd.weight", c.d_model, c.n_vocab));
    out->output = out->embedding;  // Gemma ties the LM head to the embedding
  }
  ASSIGN_OR_RETURN(out->norm, w.Vector("output_norm.weight", c.d_model));
  return Status::Ok();
}

Status BindSandwichLayer(const WeightBinder& w, const ModelConfig& c, int i, bool qk_norm, SandwichLayer* l) {
  const int d = c.d_model, hd = c.layers[i].head_dim;
  ASSIGN_OR_RETURN(l->attn_norm, w.Vector(LayerTensor(i, "attn_norm.weight"), d));
  ASSIGN_OR_RETURN(l->post_attn_norm, w.Vector(LayerTensor(i, "post_attention_norm.weight"), d));
  ASSIGN_OR_RETURN(l->ffn_norm, w.Vector(LayerTensor(i, "ffn_norm.weight"), d));
  ASSIGN_OR_RETURN(l->post_ffn_norm, w.Vector(LayerTensor(i, "post_ffw_norm.weight"), d));
  RETURN_IF_ERROR(BindAttention(w, c, i, &l->attn));
  if (qk_norm) {
    ASSIGN_OR_RETURN(l->attn.q_norm, w.Vector(LayerTensor(i, "attn_q_norm.weight"), hd));
    ASSIGN_OR_RETURN(l->attn.k_norm, w.Vector(LayerTensor(i, "attn_k_norm.weight"), hd));
  }
  RETURN_IF_ERROR(BindMlp(w, c, i, &l->mlp));
  l->inv_freq = RopeInvFreq(c.layers[i]);
  return Status::Ok();
}

void RunSandwichLayer(const ModelConfig& c, int i, const SandwichLayer& l, const ForwardStep& step, Workspace& ws,
                      KernelContext& ctx) {
  const int n = step.n_rows;
  NormRows(ctx, ws.x.data(), l.attn_norm, n, c.d_model, c.norm_eps, ws.xn.data());
  AttentionSublayer(c, i, l.attn, l.inv_freq, step, ws, ctx);
  NormRows(ctx, ws.tmp.data(), l.post_attn_norm, n, c.d_model, c.norm_eps, ws.tmp.data());
  AddRows(ctx, ws.x.data(), ws.tmp.data(), n, c.d_model);
  NormRows(ctx, ws.x.data(), l.ffn_norm, n, c.d_model, c.norm_eps, ws.xn.data());
  MlpSublayer(i, l.mlp, step, ws, ctx);
  NormRows(ctx, ws.tmp.data(), l.post_ffn_norm, n, c.d_model, c.norm_eps, ws.tmp.data());
  AddRows(ctx, ws.x.data(), ws.tmp.data(), n, c.d_model);
}

std::vector<float> RopeInvFreq(const LayerConfig& l) {
  std::vector<float> inv(static_cast<size_t>(l.head_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(l.head_dim);
    inv[i] = 1.0f / std::pow(l.rope_base, exponent) * l.rope_freq_scale;
  }
  return inv;
}

// ---------------------------------------------------------------------------------------------
void PlaceEmbeddings(const ForwardStep& step, int64_t d_model, float* x) {
  if (step.embeddings == nullptr) return;
  for (int r = 0; r < step.n_rows; ++r) {
    if (step.embeddings[r] != nullptr) std::copy(step.embeddings[r], step.embeddings[r] + d_model, x + r * d_model);
  }
}

void EmbedTokens(const WeightMatrix& embedding, const int32_t* tokens, int n, float scale, float* x) {
  for (int t = 0; t < n; ++t) {
    GetRow(embedding, tokens[t], scale, x + static_cast<size_t>(t) * embedding.n_in);
    // A tied LM head is resident packed: its stored rows stay out of memory.
    if (embedding.packed != nullptr) embedding.packed->ReleaseAfterRead(embedding, embedding.Row(tokens[t]), embedding.row_bytes);
  }
}

void ForRows(KernelContext& ctx, int n, const std::function<void(int, int)>& fn) {
  if (n < 4 || ctx.n_threads() == 1) return fn(0, n);
  ctx.pool().ParallelFor(static_cast<size_t>(n), [&](size_t begin, size_t end, int) { fn(static_cast<int>(begin), static_cast<int>(end)); });
}

void NormRows(KernelContext& ctx, const float* x, const std::vector<float>& w, int n, int d, float eps, float* out) {
  ForRows(ctx, n, [&](int begin, int end) {
    for (int t = begin; t < end; ++t) {
      ctx.kernels().rms_norm(x + static_cast<size_t>(t) * d, w.empty() ? nullptr : w.data(), d, eps, out + static_cast<size_t>(t) * d);
    }
  });
}

void AddRows(KernelContext& ctx, float* x, const float* y, int n, int d) {
  ForRows(ctx, n, [&](int begin, int end) {
    for (size_t i = static_cast<size_t>(begin) * d; i < static_cast<size_t>(end) * d; ++i) x[i] += y[i];
  });
}

void GeluMulRows(KernelContext& ctx, float* gate, const float* up, int n, int64_t d) {
  ForRows(ctx, n, [&](int begin, int end) {
    for (int t = begin; t < end; ++t) ctx.kernels().gelu_tanh_mul(gate + t * d, up + t * d, d);
  });
}

void NormHeads(KernelContext& ctx, float* x, int n, int n_heads, int head_dim, const std::vector<float>& w, float eps) {
  ForRows(ctx, n, [&](int begin, int end) {
    for (int r = begin * n_heads; r < end * n_heads; ++r) {
      float* h = x + static_cast<size_t>(r) * head_dim;
      ctx.kernels().rms_norm(h, w.empty() ? nullptr : w.data(), head_dim, eps, h);
    }
  });
}

void RopeRows(KernelContext& ctx, float* x, int n, int n_heads, int head_dim, const std::vector<float>& inv_freq,
              int64_t pos0) {
  ForRows(ctx, n, [&](int begin, int end) {
    for (int t = begin; t < end; ++t) {
      ctx.kernels().rope_rotate_half(x + static_cast<size_t>(t) * n_heads * head_dim, n_heads, head_dim, inv_freq.data(), pos0 + t);
    }
  });
}

// KvCache::RoundRows over the pool.
void RoundRows(KernelContext& ctx, const KvCache& cache, int layer, float* k, float* v, int n) {
  if (cache.type() == DType::kF32) return;
  const KvLayerSpec& s = cache.spec(layer);
  const size_t kw = static_cast<size_t>(s.n_kv_heads) * s.head_dim_k, vw = static_cast<size_t>(s.n_kv_heads) * s.head_dim_v;
  ForRows(ctx, n, [&](int begin, int end) { cache.RoundRows(layer, k + begin * kw, v + begin * vw, end - begin); });
}

void CommitKv(KvCache& cache, int layer, const float* k, const float* v, int n, int64_t pos0) {
  const KvLayerSpec& s = cache.spec(layer);
  const size_t kw = static_cast<size_t>(s.n_kv_heads) * s.head_dim_k, vw = static_cast<size_t>(s.n_kv_heads) * s.head_dim_v;
  const int first = std::max(0, n - cache.capacity(layer));
  for (int t = first; t < n; ++t) cache.Store(layer, pos0 + t, k + t * kw, v + t * vw);
}

void AttentionSublayer(const ModelConfig& c, int i, const AttentionWeights& w, const std::vector<float>& inv_freq,
                       const ForwardStep& step, Workspace& ws, KernelContext& ctx) {
  const LayerConfig& l = c.layers[i];
  const int n = step.n_rows;
  const size_t q_width = static_cast<size_t>(l.n_heads) * l.head_dim, a_width = static_cast<size_t>(l.n_heads) * l.head_dim_v;
  const size_t k_width = static_cast<size_t>(l.n_kv_heads) * l.head_dim, v_width = static_cast<size_t>(l.n_kv_heads) * l.head_dim_v;
  Project(w.q, i, LoraTarget::kQ, step, ws.xn.data(), ws.q.data(), ws, ctx);
  Project(w.k, i, LoraTarget::kK, step, ws.xn.data(), ws.k.data(), ws, ctx);
  Project(w.v, i, LoraTarget::kV, step, ws.xn.data(), ws.v.data(), ws, ctx);
  // Gemma 3 normalises each query/key head before RoPE (HF: q_norm / k_norm).
  if (!w.q_norm.empty()) NormHeads(ctx, ws.q.data(), n, l.n_heads, l.head_dim, w.q_norm, c.norm_eps);
  if (!w.k_norm.empty()) NormHeads(ctx, ws.k.data(), n, l.n_kv_heads, l.head_dim, w.k_norm, c.norm_eps);
  for (const SequenceRows& seq : step.seqs) {
    float* q = ws.q.data() + seq.row0 * q_width;
    float* k = ws.k.data() + seq.row0 * k_width;
    float* v = ws.v.data() + seq.row0 * v_width;
    RopeRows(ctx, q, seq.n, l.n_heads, l.head_dim, inv_freq, seq.pos0);
    RopeRows(ctx, k, seq.n, l.n_kv_heads, l.head_dim, inv_freq, seq.pos0);
    RoundRows(ctx, *seq.cache, i, k, v, seq.n);  // attended as the cache will hold them
    AttendArgs a{l.n_heads, l.sliding ? c.sliding_window : 0, q, k, v, seq.n, seq.pos0,
                 c.attn_scale, c.attn_softcap, ws.attn.data() + seq.row0 * a_width};
    if (step.key_end != nullptr) a.key_end = step.key_end + seq.row0;
    if (ws.rows_as_decode) {
      CommitKv(*seq.cache, i, k, v, seq.n, seq.pos0);
      AttendRowsAsDecode(a, seq.cache->View(i), ws.AttnScratch(), ctx);
      continue;
    }
    Attend(a, seq.cache->View(i), ws.AttnScratch(), ctx);
    CommitKv(*seq.cache, i, k, v, seq.n, seq.pos0);
  }
  Project(w.o, i, LoraTarget::kO, step, ws.attn.data(), ws.tmp.data(), ws, ctx);
}

void Project(const WeightMatrix& w, int layer, LoraTarget target, const ForwardStep& step, const float* x, float* y,
             Workspace& ws, KernelContext& ctx) {
  MatMul(w, x, step.n_rows, y, ctx);
  ApplyLora(step, layer, target, x, w.n_in, y, w.n_out, ws, ctx);
}

void MlpSublayer(int layer, const MlpWeights& w, const ForwardStep& step, Workspace& ws, KernelContext& ctx) {
  const int n = step.n_rows;
  Project(w.gate, layer, LoraTarget::kGate, step, ws.xn.data(), ws.gate.data(), ws, ctx);
  Project(w.up, layer, LoraTarget::kUp, step, ws.xn.data(), ws.up.data(), ws, ctx);
  const int64_t ffn = w.gate.n_out;
  GeluMulRows(ctx, ws.gate.data(), ws.up.data(), n, ffn);
  Project(w.down, layer, LoraTarget::kDown, step, ws.gate.data(), ws.tmp.data(), ws, ctx);
}

namespace {
// Row j of x ([rows, width]) becomes the last row of sequence j. Row j moves to slot j <= its row:
// moving them in order never overwrites a row still to move.
void GatherLastRows(const ForwardStep& step, float* x, size_t width) {
  size_t j = 0;
  for (const SequenceRows& seq : step.seqs) {
    const size_t last = static_cast<size_t>(seq.row0 + seq.n - 1);
    if (last != j) std::copy(x + last * width, x + (last + 1) * width, x + j * width);
    ++j;
  }
}
}  // namespace

int GatherOutputRows(const ForwardStep& step, float* x, int d) {
  if (step.all_logits) return step.n_rows;
  GatherLastRows(step, x, static_cast<size_t>(d));
  return static_cast<int>(step.seqs.size());
}

void OutputLogits(const ModelConfig& c, const OutputHead& head, Workspace& ws, KernelContext& ctx, int rows, float* logits) {
  NormRows(ctx, ws.x.data(), head.norm, rows, c.d_model, c.norm_eps, ws.xn.data());
  MatMul(head.output, ws.xn.data(), rows, logits, ctx);
  // Gemma 2 and 4 soft-cap the final logits (HF: final_logit_softcapping).
  if (c.final_softcap > 0) ctx.kernels().soft_cap(logits, static_cast<int64_t>(rows) * c.n_vocab, c.final_softcap);
}

void OutputLogits(const ModelConfig& c, const OutputHead& head, const ForwardStep& step, Workspace& ws,
                  KernelContext& ctx) {
  if (step.logits == nullptr) return;
  const int rows = GatherOutputRows(step, ws.x.data(), c.d_model);
  OutputLogits(c, head, ws, ctx, rows, step.logits);
  // The final norm's output rows (in ws.xn) for a drafter (Workspace::output_hidden).
  if (ws.output_hidden != nullptr) std::copy_n(ws.xn.data(), static_cast<size_t>(rows) * c.d_model, ws.output_hidden);
}

// ---------------------------------------------------------------------------------------------
Status AssignSharedKvSources(int n_shared, ModelConfig* c) {
  if (n_shared < 0 || n_shared >= c->n_layers) return Status::Error("the number of KV-shared layers is out of range");
  const int first_shared = c->n_layers - n_shared;
  for (int i = first_shared; i < c->n_layers; ++i) {
    LayerConfig& l = c->layers[i];
    for (int j = first_shared - 1; j >= 0; --j) {
      if (c->layers[j].sliding == l.sliding) {
        l.kv_source = j;
        break;
      }
    }
    if (l.kv_source < 0) return Status::Error("KV-shared layer " + std::to_string(i) + " has no earlier layer of its type");
    const LayerConfig& src = c->layers[l.kv_source];
    if (src.n_kv_heads != l.n_kv_heads || src.head_dim != l.head_dim || src.head_dim_v != l.head_dim_v) {
      return Status::Error("KV-shared layer " + std::to_string(i) + " does not match the shape of layer " +
                           std::to_string(l.kv_source));
    }
  }
  return Status::Ok();
}

Status BindNormedAttention(const WeightBinder& w, const ModelConfig& c, int i, bool allow_k_eq_v, AttentionWeights* out) {
  const LayerConfig& l = c.layers[i];
  const int d = c.d_model;
  ASSIGN_OR_RETURN(out->q, w.Matrix(LayerTensor(i, "attn_q.weight"), d, l.n_heads * l.head_dim));
  ASSIGN_OR_RETURN(out->o, w.Matrix(LayerTensor(i, "attn_output.weight"), l.n_heads * l.head_dim_v, d));
  ASSIGN_OR_RETURN(out->q_norm, w.Vector(LayerTensor(i, "attn_q_norm.weight"), l.head_dim));
  if (l.kv_source >= 0) return Status::Ok();  // KV-shared layers carry no k/v tensors
  ASSIGN_OR_RETURN(out->k, w.Matrix(LayerTensor(i, "attn_k.weight"), d, l.n_kv_heads * l.head_dim));
  ASSIGN_OR_RETURN(out->k_norm, w.Vector(LayerTensor(i, "attn_k_norm.weight"), l.head_dim));
  if (allow_k_eq_v && !w.Has(LayerTensor(i, "attn_v.weight"))) return Status::Ok();
  ASSIGN_OR_RETURN(out->v, w.Matrix(LayerTensor(i, "attn_v.weight"), d, l.n_kv_heads * l.head_dim_v));
  return Status::Ok();
}

void NormedAttentionSublayer(const ModelConfig& c, int i, const AttentionWeights& w, const std::vector<float>& inv_freq,
                             const ForwardStep& step, Workspace& ws, KernelContext& ctx) {
  const LayerConfig& l = c.layers[i];
  const int n = step.n_rows;
  const float eps = c.norm_eps;
  const size_t q_width = static_cast<size_t>(l.n_heads) * l.head_dim, a_width = static_cast<size_t>(l.n_heads) * l.head_dim_v;
  const size_t k_width = static_cast<size_t>(l.n_kv_heads) * l.head_dim, v_width = static_cast<size_t>(l.n_kv_heads) * l.head_dim_v;
  Project(w.q, i, LoraTarget::kQ, step, ws.xn.data(), ws.q.data(), ws, ctx);
  NormHeads(ctx, ws.q.data(), n, l.n_heads, l.head_dim, w.q_norm, eps);
  for (const SequenceRows& seq : step.seqs) {
    RopeRows(ctx, ws.q.data() + seq.row0 * q_width, seq.n, l.n_heads, l.head_dim, inv_freq, seq.pos0);
  }
  // A KV-shared layer reads the source layer's cache and the source's K/V of this very step.
  const int cache_layer = l.kv_source >= 0 ? l.kv_source : i;
  const float* k_new = ws.k.data();
  const float* v_new = ws.v.data();
  if (l.kv_source >= 0) {
    const int slot = ws.hold_slot[l.kv_source];
    k_new = ws.hold_k[slot].data();
    v_new = ws.hold_v[slot].data();
  } else {
    const size_t k_values = static_cast<size_t>(n) * k_width;
    Project(w.k, i, LoraTarget::kK, step, ws.xn.data(), ws.k.data(), ws, ctx);
    // K=V layers (Gemma 4 26B/31B/12B global layers) have no v projection: V is K before norm/RoPE.
    if (w.v) Project(w.v, i, LoraTarget::kV, step, ws.xn.data(), ws.v.data(), ws, ctx);
    else std::copy(ws.k.begin(), ws.k.begin() + static_cast<std::ptrdiff_t>(k_values), ws.v.begin());
    NormHeads(ctx, ws.k.data(), n, l.n_kv_heads, l.head_dim, w.k_norm, eps);
    NormHeads(ctx, ws.v.data(), n, l.n_kv_heads, l.head_dim_v, {}, eps);  // v_norm has no weight (HF: with_scale=False)
    for (const SequenceRows& seq : step.seqs) {
      RopeRows(ctx, ws.k.data() + seq.row0 * k_width, seq.n, l.n_kv_heads, l.head_dim, inv_freq, seq.pos0);
      // Attended (and held for the sharers) as the cache will hold them.
      RoundRows(ctx, *seq.cache, i, ws.k.data() + seq.row0 * k_width, ws.v.data() + seq.row0 * v_width, seq.n);
    }
  }
  // A layer whose K/V later layers share keeps them until the end of the step (CommitHeldKv).
  const int hold = l.kv_source < 0 ? ws.hold_slot[i] : -1;
  for (const SequenceRows& seq : step.seqs) {
    const float* k = k_new + seq.row0 * k_width;
    const float* v = v_new + seq.row0 * v_width;
    AttendArgs a{l.n_heads, l.sliding ? c.sliding_window : 0, ws.q.data() + seq.row0 * q_width, k, v, seq.n,
                 seq.pos0, c.attn_scale, c.attn_softcap, ws.attn.data() + seq.row0 * a_width};
    if (step.key_end != nullptr) a.key_end = step.key_end + seq.row0;
    if (ws.rows_as_decode) {
      // Committed now, held or not: the sharers after this layer read the step's earlier rows from
      // the cache, as decoding them one at a time would have left it (CommitHeldKv writes the same).
      if (l.kv_source < 0) CommitKv(*seq.cache, i, k, v, seq.n, seq.pos0);
      AttendRowsAsDecode(a, seq.cache->View(cache_layer), ws.AttnScratch(), ctx);
      continue;
    }
    Attend(a, seq.cache->View(cache_layer), ws.AttnScratch(), ctx);
    if (l.kv_source < 0 && hold < 0) CommitKv(*seq.cache, i, k, v, seq.n, seq.pos0);
  }
  if (hold >= 0) {
    std::copy(ws.k.begin(), ws.k.begin() + static_cast<std::ptrdiff_t>(n * k_width), ws.hold_k[hold].begin());
    std::copy(ws.v.begin(), ws.v.begin() + static_cast<std::ptrdiff_t>(n * v_width), ws.hold_v[hold].begin());
  }
  Project(w.o, i, LoraTarget::kO, step, ws.attn.data(), ws.tmp.data(), ws, ctx);
}

void CommitHeldKv(const ForwardStep& step, Workspace& ws) {
  for (size_t i = 0; i < ws.hold_slot.size(); ++i) {
    const int slot = ws.hold_slot[i];
    if (slot < 0) continue;
    const KvLayerSpec& spec = step.seqs[0].cache->spec(static_cast<int>(i));
    const size_t k_width = static_cast<size_t>(spec.n_kv_heads) * spec.head_dim_k;
    const size_t v_width = static_cast<size_t>(spec.n_kv_heads) * spec.head_dim_v;
    for (const SequenceRows& seq : step.seqs) {
      CommitKv(*seq.cache, static_cast<int>(i), ws.hold_k[slot].data() + seq.row0 * k_width,
               ws.hold_v[slot].data() + seq.row0 * v_width, seq.n, seq.pos0);
    }
  }
}

int FirstOutputOnlyLayer(const ModelConfig& c) {
  int first = c.n_layers;
  while (first > 0 && c.layers[first - 1].kv_source >= 0) --first;
  return first;
}

bool TailCanNarrow(const ForwardStep& step) {
  if (step.all_logits) return false;
  return step.logits == nullptr || step.n_rows > static_cast<int>(step.seqs.size());
}

ForwardStep NarrowToOutputRows(const ModelConfig& c, const ForwardStep& step, Workspace& ws,
                               std::initializer_list<RowBuffer> rows) {
  CommitHeldKv(step, ws);
  GatherLastRows(step, ws.x.data(), static_cast<size_t>(c.d_model));
  for (size_t i = 0; i < ws.hold_slot.size(); ++i) {
    const int slot = ws.hold_slot[i];
    if (slot < 0) continue;
    const LayerConfig& l = c.layers[i];
    GatherLastRows(step, ws.hold_k[slot].data(), static_cast<size_t>(l.n_kv_heads) * l.head_dim);
    GatherLastRows(step, ws.hold_v[slot].data(), static_cast<size_t>(l.n_kv_heads) * l.head_dim_v);
  }
  for (const RowBuffer& b : rows) GatherLastRows(step, b.data, b.width);
  for (size_t j = 0; j < step.seqs.size(); ++j) {
    const SequenceRows& seq = step.seqs[j];
    ws.output_seqs[j] = {seq.cache, static_cast<int>(j), 1, seq.pos0 + seq.n - 1, seq.lora};
  }
  ForwardStep out;
  out.tokens = nullptr;  // the tail embeds nothing
  out.n_rows = static_cast<int>(step.seqs.size());
  out.seqs = std::span<const SequenceRows>(ws.output_seqs.data(), step.seqs.size());
  out.logits = step.logits;
  out.all_logits = false;
  return out;
}

Status PerLayerEmbedding::Bind(const WeightBinder& w, const GgufFile& file, const ModelConfig& c, int per_layer_dim) {
  dim = per_layer_dim;
  const int width = dim * c.n_layers;
  const GgufTensor* t = file.FindTensor("per_layer_token_embd.weight");
  if (t == nullptr) return Status::Error("missing tensor 'per_layer_token_embd.weight'");
  ASSIGN_OR_RETURN(table, w.Table("per_layer_token_embd.weight", width, t->ne[1]));
  // Most of an E2B file, read a few rows per token: it stays on disk (see Compute).
  source = file.mapping();
  if (source != nullptr) source->AdviseRandomAccess(table.data, t->nbytes);
  ASSIGN_OR_RETURN(model_proj, w.Matrix("per_layer_model_proj.weight", c.d_model, width));
  ASSIGN_OR_RETURN(proj_norm, w.Vector("per_layer_proj_norm.weight", dim));
  return Status::Ok();
}

void PerLayerEmbedding::Compute(const ModelConfig& c, const int32_t* tokens, const float* const* placed, int n,
                                const float* x, KernelContext& ctx, float* row, float* out) const {
  const int width = dim * c.n_layers;
  MatMul(model_proj, x, n, out, ctx);
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(c.d_model));
  const float table_scale = std::sqrt(static_cast<float>(dim));
  const float mix = 1.0f / std::sqrt(2.0f);
  for (int t = 0; t < n; ++t) {
    float* o = out + static_cast<size_t>(t) * width;
    for (int k = 0; k < width; ++k) o[k] *= proj_scale;
    NormRows(ctx, o, proj_norm, c.n_layers, dim, c.norm_eps, o);
    // Ids past the per-layer vocabulary (audio/vision soft tokens) read row 0 (HF: Gemma3nModel).
    const bool pad = (placed != nullptr && placed[t] != nullptr) || tokens[t] >= table.n_out;
    const int64_t id = pad ? 0 : tokens[t];
    GetRow(table, id, table_scale, row);
    // Unmap the row again at once, or the table would creep into RSS a folio at a time.
    if (source != nullptr) {
      source->ReleasePagesAfterRead(table.Row(id), table.row_bytes, table.data, static_cast<size_t>(table.n_out) * table.row_bytes);
    }
    for (int k = 0; k < width; ++k) o[k] = (o[k] + row[k]) * mix;
  }
}

void PerLayerEmbedding::GateWithInput(const ModelConfig& c, int layer, const float* per_layer, int n, KernelContext& ctx,
                                      float* gate) const {
  ForRows(ctx, n, [&](int begin, int end) {
    for (int t = begin; t < end; ++t) {
      const float* input = per_layer + (static_cast<size_t>(t) * c.n_layers + layer) * dim;
      ctx.kernels().gelu_tanh_mul(gate + static_cast<size_t>(t) * dim, input, dim);
    }
  });
}

}  // namespace gemlet
