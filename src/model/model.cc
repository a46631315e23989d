// Model base: chunking of long inputs, KV layout, and the family registry.
#include "model/model.h"

#include <algorithm>

#include "model/decoder_blocks.h"
#include "model/families.h"

namespace gemlet {

int ModelConfig::MaxHeadDim() const {
  int m = 0;
  for (const auto& l : layers) m = std::max({m, l.head_dim, l.head_dim_v});
  return m;
}
int ModelConfig::MaxFfnDim() const {
  int m = 0;
  for (const auto& l : layers) m = std::max(m, l.ffn_dim);
  return m;
}
int ModelConfig::MaxQueryWidth() const {
  int m = 0;
  for (const auto& l : layers) m = std::max({m, l.n_heads * l.head_dim, l.n_heads * l.head_dim_v});
  return m;
}
int ModelConfig::MaxKvWidth() const {
  int m = 0;
  for (const auto& l : layers) m = std::max({m, l.n_kv_heads * l.head_dim, l.n_kv_heads * l.head_dim_v});
  return m;
}

Workspace::Workspace(const ModelConfig& c, int batch, int n_ctx, int n_threads, size_t extra_floats)
    : max_batch(batch), extra(extra_floats) {
  const size_t b = static_cast<size_t>(batch);
  x.resize(b * c.d_model);
  xn.resize(b * c.d_model);
  tmp.resize(b * c.d_model);
  q.resize(b * c.MaxQueryWidth());
  attn.resize(b * c.MaxQueryWidth());
  k.resize(b * c.MaxKvWidth());
  v.resize(b * c.MaxKvWidth());
  gate.resize(b * c.MaxFfnDim());
  up.resize(b * c.MaxFfnDim());
  int max_group = 1;
  for (const LayerConfig& l : c.layers) max_group = std::max(max_group, l.n_heads / l.n_kv_heads);
  scores_stride = n_ctx + batch;
  scores_per_thread = static_cast<size_t>(max_group) * scores_stride;
  scores.resize(static_cast<size_t>(std::max(n_threads, 1)) * scores_per_thread);
  int max_head_dim_v = 1;
  for (const LayerConfig& l : c.layers) max_head_dim_v = std::max(max_head_dim_v, l.head_dim_v);
  attn_parts.resize(static_cast<size_t>(kMaxAttnSplitItems) * max_group * max_head_dim_v);
  attn_lse.resize(static_cast<size_t>(kMaxAttnSplitItems) * max_group);
  hold_slot.assign(c.layers.size(), -1);
  for (const LayerConfig& l : c.layers) {
    if (l.kv_source >= 0 && hold_slot[l.kv_source] < 0) {
      const LayerConfig& src = c.layers[l.kv_source];
      hold_slot[l.kv_source] = static_cast<int>(hold_k.size());
      hold_k.emplace_back(b * src.n_kv_heads * src.head_dim);
      hold_v.emplace_back(b * src.n_kv_heads * src.head_dim_v);
    }
  }
}

const std::vector<float>& Model::KeyRope(int layer) const {
  std::call_once(key_rope_once_, [this] {
    for (const LayerConfig& l : config_.layers) key_rope_.push_back(RopeInvFreq(l));
  });
  return key_rope_[static_cast<size_t>(layer)];
}

size_t Workspace::PlanBytes(const ModelConfig& c, int batch, int n_ctx, int n_threads, size_t extra_floats) {
  const size_t b = static_cast<size_t>(batch);
  int max_group = 1, max_head_dim_v = 1;
  for (const LayerConfig& l : c.layers) {
    max_group = std::max(max_group, l.n_heads / l.n_kv_heads);
    max_head_dim_v = std::max(max_head_dim_v, l.head_dim_v);
  }
  size_t floats = 3 * b * c.d_model + 2 * b * c.MaxQueryWidth() + 2 * b * c.MaxKvWidth() + 2 * b * c.MaxFfnDim();
  floats += static_cast<size_t>(std::max(n_threads, 1)) * max_group * static_cast<size_t>(n_ctx + batch);
  floats += static_cast<size_t>(kMaxAttnSplitItems) * max_group * (max_head_dim_v + 1);
  floats += extra_floats;
  std::vector<bool> holds(c.layers.size(), false);
  for (const LayerConfig& l : c.layers) {
    if (l.kv_source < 0 || holds[l.kv_source]) continue;
    holds[l.kv_source] = true;
    const LayerConfig& src = c.layers[l.kv_source];
    floats += b * src.n_kv_heads * (src.head_dim + src.head_dim_v);
  }
  return floats * sizeof(float);
}

size_t Workspace::Bytes() const {
  size_t floats = x.size() + xn.size() + tmp.size() + q.size() + k.size() + v.size() + attn.size() + gate.size() +
                  up.size() + scores.size() + attn_parts.size() + attn_lse.size() + extra.size();
  for (const auto& h : hold_k) floats += h.size();
  for (const auto& h : hold_v) floats += h.size();
  return floats * sizeof(float);
}

std::vector<KvLayerSpec> Model::KvLayout() const {
  std::vector<KvLayerSpec> specs;
  for (const LayerConfig& l : config_.layers) {
    KvLayerSpec s;
    s.n_kv_heads = l.n_kv_heads;
    s.head_dim_k = l.head_dim;
    s.head_dim_v = l.head_dim_v;
    s.window = l.sliding ? config_.sliding_window : 0;
    s.source = l.kv_source;
    specs.push_back(s);
  }
  return specs;
}

Status Model::Forward(const int32_t* tokens, int n_tokens, KvCache& cache, Workspace& ws, KernelContext& ctx,
                      float* logits, bool all_logits, const std::function<void(int, int)>* progress) const {
  if (n_tokens <= 0) return Status::Error("nothing to evaluate: empty token list");
  for (int i = 0; i < n_tokens; ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.n_vocab) {
      return Status::Error("token id " + std::to_string(tokens[i]) + " is outside the vocabulary (0.." +
                           std::to_string(config_.n_vocab - 1) + ")");
    }
  }
  RETURN_IF_ERROR(cache.CheckRoom(n_tokens));
  for (int start = 0; start < n_tokens; start += ws.max_batch) {
    const int n = std::min(ws.max_batch, n_tokens - start);
    const bool last_chunk = start + n == n_tokens;
    float* out = nullptr;
    if (all_logits) out = logits + static_cast<size_t>(start) * config_.n_vocab;
    else if (last_chunk) out = logits;
    ForwardChunk(tokens + start, n, cache, ws, ctx, out, all_logits);
    // A stopped chunk is not advanced: the cache holds the chunks before it (its ring slots may be
    // overwritten; the session refills them before the next evaluation).
    if (ws.StopRequested()) return Status::Error(StatusCode::kCancelled, "cancelled");
    cache.Advance(n);
    if (progress && *progress) (*progress)(start + n, n_tokens);
  }
  return Status::Ok();
}

Result<std::unique_ptr<Model>> LoadModel(std::shared_ptr<const GgufFile> gguf) {
  ASSIGN_OR_RETURN(std::string arch, gguf->GetString("general.architecture"));
  for (const ModelFamily& family : ModelFamilies()) {
    if (arch == family.arch) {
      auto model = family.load(gguf);
      if (!model.ok()) return model.status().WithContext("loading " + arch + " model '" + gguf->path() + "'");
      return model;
    }
  }
  std::string known;
  for (const ModelFamily& family : ModelFamilies()) known += std::string(known.empty() ? "" : ", ") + family.arch;
  return Status::Error("'" + gguf->path() + "': architecture '" + arch + "' is not supported (supported: " + known + ")");
}

Result<std::unique_ptr<Model>> LoadModelFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  return LoadModel(std::shared_ptr<const GgufFile>(std::move(file)));
}

Result<std::unique_ptr<Model>> LoadModelRange(int fd, uint64_t offset, uint64_t length) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::OpenRange(fd, offset, length));
  return LoadModel(std::shared_ptr<const GgufFile>(std::move(file)));
}

}  // namespace gemlet
