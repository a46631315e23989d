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

namespace {
// The attention kernel's scratch for this model's layers (for the constructor and PlanBytes alike).
AttentionScratchSizes AttentionScratchOf(const ModelConfig& c, int batch, int n_ctx) {
  int max_group = 1, max_head_dim = 1, max_head_dim_v = 1;
  for (const LayerConfig& l : c.layers) {
    max_group = std::max(max_group, l.n_heads / l.n_kv_heads);
    max_head_dim = std::max(max_head_dim, l.head_dim);
    max_head_dim_v = std::max(max_head_dim_v, l.head_dim_v);
  }
  return PlanAttentionScratch(max_group, max_head_dim, max_head_dim_v, batch, n_ctx);
}
}  // namespace

Workspace::Workspace(const ModelConfig& c, int batch, int n_ctx, int n_threads, size_t extra_floats)
    : max_batch(batch), n_ctx(n_ctx), extra(extra_floats), step_seqs(static_cast<size_t>(batch)),
      step_tokens(static_cast<size_t>(batch)), output_seqs(static_cast<size_t>(batch)) {
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
  const AttentionScratchSizes a = AttentionScratchOf(c, batch, n_ctx);
  const size_t threads = static_cast<size_t>(std::max(n_threads, 1));
  scores_stride = a.scores_stride;
  scores_per_thread = a.scores_per_thread;
  scores.resize(threads * scores_per_thread);
  block_rows_per_thread = a.block_rows_per_thread;
  block_rows.resize(threads * block_rows_per_thread);
  attn_parts.resize(a.split_parts);
  attn_lse.resize(a.split_lse);
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

AttentionScratch Workspace::AttnScratch() {
  AttentionScratch s;
  s.max_batch = max_batch;
  s.scores = scores.data();
  s.scores_stride = scores_stride;
  s.scores_per_thread = scores_per_thread;
  s.block_rows = block_rows.data();
  s.block_rows_per_thread = block_rows_per_thread;
  s.split_parts = attn_parts.data();
  s.split_lse = attn_lse.data();
  return s;
}

const std::vector<float>& Model::KeyRope(int layer) const {
  std::call_once(key_rope_once_, [this] {
    for (const LayerConfig& l : config_.layers) key_rope_.push_back(RopeInvFreq(l));
  });
  return key_rope_[static_cast<size_t>(layer)];
}

size_t Workspace::PlanBytes(const ModelConfig& c, int batch, int n_ctx, int n_threads, size_t extra_floats) {
  const size_t b = static_cast<size_t>(batch);
  const AttentionScratchSizes a = AttentionScratchOf(c, batch, n_ctx);
  const size_t threads = static_cast<size_t>(std::max(n_threads, 1));
  size_t floats = 3 * b * c.d_model + 2 * b * c.MaxQueryWidth() + 2 * b * c.MaxKvWidth() + 2 * b * c.MaxFfnDim();
  floats += threads * (a.scores_per_thread + a.block_rows_per_thread) + a.split_parts + a.split_lse;
  floats += extra_floats;
  std::vector<bool> holds(c.layers.size(), false);
  for (const LayerConfig& l : c.layers) {
    if (l.kv_source < 0 || holds[l.kv_source]) continue;
    holds[l.kv_source] = true;
    const LayerConfig& src = c.layers[l.kv_source];
    floats += b * src.n_kv_heads * (src.head_dim + src.head_dim_v);
  }
  return floats * sizeof(float) + b * (2 * sizeof(SequenceRows) + sizeof(int32_t));
}

size_t Workspace::Bytes() const {
  size_t floats = x.size() + xn.size() + tmp.size() + q.size() + k.size() + v.size() + attn.size() + gate.size() +
                  up.size() + scores.size() + block_rows.size() + attn_parts.size() + attn_lse.size() + extra.size() +
                  lora_mid.size() + lora_out.size();
  for (const auto& h : hold_k) floats += h.size();
  for (const auto& h : hold_v) floats += h.size();
  return floats * sizeof(float) + (step_seqs.size() + output_seqs.size()) * sizeof(SequenceRows) +
         step_tokens.size() * sizeof(int32_t);
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
  return Forward(tokens, n_tokens, nullptr, nullptr, cache, ws, ctx, logits, all_logits, progress);
}

Status Model::Forward(const int32_t* tokens, int n_tokens, const float* const* embeddings, const int64_t* key_end,
                      KvCache& cache, Workspace& ws, KernelContext& ctx, float* logits, bool all_logits,
                      const std::function<void(int, int)>* progress) const {
  if (n_tokens <= 0) return Status::Error("nothing to evaluate: empty token list");
  float* const hidden = ws.output_hidden;
  // The whole request is checked before the first chunk: a bad one evaluates nothing.
  RETURN_IF_ERROR(CheckTokens(tokens, n_tokens));
  RETURN_IF_ERROR(cache.CheckRoom(n_tokens));
  if ((embeddings != nullptr || key_end != nullptr) && !TakesEmbeddings()) {
    return Status::Error("this model (" + config_.arch + ") does not take images yet");
  }
  const int64_t pos0 = cache.n_past();
  for (int r = 0; key_end != nullptr && r < n_tokens; ++r) {
    const bool opens = key_end[r] > pos0 + r + 1 && (r == 0 || key_end[r - 1] != key_end[r]);
    if (opens && key_end[r] - (pos0 + r) > ws.max_batch) {
      return Status::Error("an image of " + std::to_string(key_end[r] - pos0 - r) + " soft tokens does not fit a batch of " +
                           std::to_string(ws.max_batch) + " (raise SessionOptions::max_batch)");
    }
  }
  for (int start = 0; start < n_tokens;) {
    int n = std::min(ws.max_batch, n_tokens - start);
    if (key_end != nullptr) {
      // A row that sees past the chunk's end opens an image the chunk would cut: end before it.
      for (int r = start; r < start + n; ++r) {
        if (key_end[r] > pos0 + start + n) {  // r > start: the check above keeps every image within a batch
          n = r - start;
          break;
        }
      }
    }
    const bool last_chunk = start + n == n_tokens;
    float* out = nullptr;
    if (all_logits) out = logits + static_cast<size_t>(start) * config_.n_vocab;
    else if (last_chunk) out = logits;
    // The hidden states go where the rows' logits go (a prompt's last chunk, or every chunk's rows).
    ws.output_hidden = hidden == nullptr ? nullptr
                       : all_logits     ? hidden + static_cast<size_t>(start) * config_.d_model
                       : last_chunk     ? hidden
                                        : nullptr;
    SequenceChunk chunk{tokens + start, n, &cache};
    if (embeddings != nullptr) chunk.embeddings = embeddings + start;
    if (key_end != nullptr) chunk.key_end = key_end + start;
    // A stopped chunk is not advanced: the cache holds the chunks before it (its ring slots may be
    // overwritten; the session refills them before the next evaluation).
    const Status s = ForwardBatch({&chunk, 1}, ws, ctx, out, all_logits);
    ws.output_hidden = hidden;
    RETURN_IF_ERROR(s);
    start += n;
    if (progress && *progress) (*progress)(start, n_tokens);
  }
  return Status::Ok();
}

Status Model::CheckTokens(const int32_t* tokens, int n) const {
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.n_vocab) {
      return Status::Error("token id " + std::to_string(tokens[i]) + " is outside the vocabulary (0.." +
                           std::to_string(config_.n_vocab - 1) + ")");
    }
  }
  return Status::Ok();
}

Status Model::CheckBatch(std::span<const SequenceChunk> chunks, const Workspace& ws) const {
  if (AsAssistant() != nullptr) {
    return Status::Error("'" + (gguf_ ? gguf_->path() : config_.name) + "' is a Gemma 4 drafter (" + config_.arch +
                         "): it drafts for a Gemma 4 model and evaluates nothing by itself");
  }
  if (chunks.empty()) return Status::Error("nothing to evaluate: no sequences");
  int64_t rows = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const SequenceChunk& c = chunks[i];
    const std::string which = chunks.size() > 1 ? "sequence " + std::to_string(i) + ": " : std::string();
    if (c.cache == nullptr) return Status::Error(which + "no KV cache");
    if (c.n <= 0 || c.tokens == nullptr) return Status::Error(which + "nothing to evaluate: empty token list");
    for (size_t j = 0; j < i; ++j) {
      if (chunks[j].cache == c.cache) {
        return Status::Error("sequences " + std::to_string(j) + " and " + std::to_string(i) +
                             " share one KV cache (each sequence of a batch needs its own)");
      }
    }
    if (c.cache->n_ctx() > ws.n_ctx) {
      return Status::Error(which + "the KV cache's context (" + std::to_string(c.cache->n_ctx()) +
                           ") is longer than the workspace's (" + std::to_string(ws.n_ctx) + ")");
    }
    Status s = CheckTokens(c.tokens, c.n);
    if (s.ok()) s = c.cache->CheckRoom(c.n);
    if (!s.ok()) return Status::Error(s.code(), which + s.message());
    if ((c.embeddings != nullptr || c.key_end != nullptr) && !TakesEmbeddings()) {
      return Status::Error(which + "this model (" + config_.arch + ") does not take images yet");
    }
    if ((c.embeddings != nullptr || c.key_end != nullptr) && chunks.size() > 1) {
      return Status::Error(which + "embedding rows and two-way attention go in a step of one sequence");
    }
    if (c.key_end != nullptr) {
      const int64_t pos0 = c.cache->n_past();
      for (int r = 0; r < c.n; ++r) {
        if (c.key_end[r] <= pos0 + r || c.key_end[r] > pos0 + c.n) {
          return Status::Error(which + "row " + std::to_string(r) + " attends up to position " +
                               std::to_string(c.key_end[r]) + ", not past its own (" + std::to_string(pos0 + r) +
                               ") or beyond the step");
        }
      }
    }
    rows += c.n;
  }
  if (rows > ws.max_batch) {
    return Status::Error(std::to_string(rows) + " tokens in one step exceed the workspace's batch of " +
                         std::to_string(ws.max_batch) + " (evaluate fewer sequences or tokens per step)");
  }
  return Status::Ok();
}

Status Model::ForwardBatch(std::span<const SequenceChunk> chunks, Workspace& ws, KernelContext& ctx, float* logits,
                           bool all_logits) const {
  RETURN_IF_ERROR(CheckBatch(chunks, ws));
  ForwardStep step;
  int rows = 0;
  for (const SequenceChunk& c : chunks) rows += c.n;
  step.n_rows = rows;
  step.logits = logits;
  step.all_logits = all_logits;
  int row = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const SequenceChunk& c = chunks[i];
    ws.step_seqs[i] = {c.cache, row, c.n, c.cache->n_past(), c.cache->lora()};
    // One sequence reads its tokens where they are; several are laid end to end.
    if (chunks.size() > 1) std::copy(c.tokens, c.tokens + c.n, ws.step_tokens.begin() + row);
    row += c.n;
  }
  step.tokens = chunks.size() > 1 ? ws.step_tokens.data() : chunks[0].tokens;
  step.embeddings = chunks[0].embeddings;  // CheckBatch: only a step of one sequence carries them
  step.key_end = chunks[0].key_end;
  step.seqs = std::span<const SequenceRows>(ws.step_seqs.data(), chunks.size());
  RunStep(step, ws, ctx);
  if (ws.StopRequested()) return Status::Error(StatusCode::kCancelled, "cancelled");
  for (const SequenceChunk& c : chunks) c.cache->Advance(c.n);
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
