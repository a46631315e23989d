// Model: an immutable, shareable Gemma network bound to a mapped GGUF file, and the registry that
// picks the family implementation from general.architecture.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kernels/attention.h"
#include "kernels/kernel_context.h"
#include "gguf/gguf_reader.h"
#include "kernels/packed_weights.h"
#include "model/kv_cache.h"
#include "model/model_config.h"

namespace gemlet {

class Assistant;  // model/assistant.h

// One sequence of a batched forward (Model::ForwardBatch): n >= 1 tokens that go at positions
// cache->n_past() onward of its own cache.
struct SequenceChunk {
  const int32_t* tokens = nullptr;
  int n = 0;
  KvCache* cache = nullptr;
  // An image's soft tokens (one sequence per step for now): rows whose input is an encoder's
  // embedding rather than their token's, and how far ahead each row attends (ForwardStep).
  const float* const* embeddings = nullptr;  // [n]; null entries: the token's embedding
  const int64_t* key_end = nullptr;          // [n], absolute positions; null: every row causal
};

// The rows of one sequence within a forward step (ForwardStep).
struct SequenceRows {
  KvCache* cache = nullptr;
  int row0 = 0;      // its first row in the workspace
  int n = 0;         // its rows
  int64_t pos0 = 0;  // the position of its first row: the cache's n_past when the step began
  const LoraStack* lora = nullptr;  // its adapters: the cache's (KvCache::lora)
};

// What one forward step computes, as the family code sees it: the rows of one or more independent
// sequences, concatenated. Everything row-wise (embeddings, norms, matmuls, MLPs) runs over all rows
// at once, so each weight is read once per step whatever the number of sequences; RoPE, attention and
// KV commits run per sequence, at its positions and against its cache. The caches' n_past do not
// move during a step (Model advances them after it).
struct ForwardStep {
  const int32_t* tokens = nullptr;     // [n_rows]: the sequences' tokens in turn
  int n_rows = 0;
  std::span<const SequenceRows> seqs;  // in row order, covering [0, n_rows)
  float* logits = nullptr;             // null: none wanted (a prompt chunk before the last)
  bool all_logits = false;             // [n_rows, n_vocab]; else [seqs.size(), n_vocab]: each one's last row
  // [n_rows] or null: a row with an entry takes these hidden-size floats as its input, as they are
  // (an image's soft token: HF scales token embeddings, not the projector's output).
  const float* const* embeddings = nullptr;
  // [n_rows] or null: row r attends the positions before key_end[r] (AttendArgs::key_end).
  const int64_t* key_end = nullptr;
};

// Leaves new elements uninitialised: a workspace's pages are then first touched, and made
// resident, by the rows a step writes (a 200-token prompt uses 40% of a 512-row E2B workspace's
// 106 MiB), and nothing is zeroed at start that the forward pass overwrites anyway.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using ActivationBuffer = std::vector<float, UninitAllocator<float>>;

// Preallocated activations for batches of up to max_batch tokens: the forward pass never allocates.
struct Workspace {
  // extra_floats: family-specific scratch (Model::ExtraScratchFloats), carved up by the family.
  // n_ctx: the largest context of the caches evaluated with it (the attention scores' rows).
  Workspace(const ModelConfig& config, int max_batch, int n_ctx, int n_threads, size_t extra_floats = 0);

  int max_batch;
  int n_ctx;                   // every cache evaluated with this workspace must have n_ctx() <= this
  ActivationBuffer x;                    // [B, d_model] residual stream
  ActivationBuffer xn;                   // [B, d_model] normed input of a sub-layer
  ActivationBuffer tmp;                  // [B, d_model] sub-layer output
  ActivationBuffer q;                    // [B, max query width]
  ActivationBuffer k;                    // [B, max kv width]
  ActivationBuffer v;                    // [B, max kv width]
  ActivationBuffer attn;                 // [B, max query width]
  ActivationBuffer gate;                 // [B, max ffn]
  ActivationBuffer up;                   // [B, max ffn]
  // The attention kernel's scratch (kernels/attention.h, sized by PlanAttentionScratch), kept here
  // so that a session's memory counts it. Scores: per thread, one row of n_ctx + B for each query
  // head of a KV group and token of a prompt block.
  ActivationBuffer scores;               // [n_threads, block tokens * max heads per KV head, n_ctx + B]
  int scores_stride;           // floats per row
  size_t scores_per_thread;    // floats per thread
  // A block's queries (blocks of 2 tokens or more), outputs, one key range's parts and the ranges'
  // weights, in rows (token, head).
  ActivationBuffer block_rows;           // [n_threads, block_rows_per_thread]
  size_t block_rows_per_thread = 0;      // floats per thread
  // Decode attention split by key ranges: each range's outputs for the query heads of its KV head,
  // normalised within the range, and their log-sum-exps, merged once all are done.
  ActivationBuffer attn_parts;           // [kMaxRangeSplitItems * kMaxAttnRanges, max heads per KV head, max head_dim_v]
  ActivationBuffer attn_lse;             // [kMaxRangeSplitItems * kMaxAttnRanges, max heads per KV head]
  // The buffers above as the attention kernel takes them.
  AttentionScratch AttnScratch();

  // KV sharing (Gemma 3n/4): a layer whose K/V later layers reuse keeps its batch K/V here until the
  // end of the chunk, so that committing to a ring buffer cannot evict keys the sharers still need.
  std::vector<int> hold_slot;                // per layer: index into hold_k/hold_v, or -1
  std::vector<ActivationBuffer> hold_k;  // [B, kv width] per source layer
  std::vector<ActivationBuffer> hold_v;

  ActivationBuffer extra;

  // LoRA deltas (model/lora.h ApplyLora): A x [rows, rank] and B (A x) [rows, n_out]. Empty until a
  // step runs adapters; grown to the largest adapter and step seen, then reused.
  ActivationBuffer lora_mid;
  ActivationBuffer lora_out;

  // Where ForwardBatch lays out a step of several sequences: their rows and their tokens, concatenated.
  std::vector<SequenceRows> step_seqs;  // [max_batch]: a sequence has at least one row
  std::vector<int32_t> step_tokens;     // [max_batch]
  // The same step narrowed to each sequence's last row, for layers only those rows need
  // (NarrowToOutputRows in model/decoder_blocks.h).
  std::vector<SequenceRows> output_seqs;  // [max_batch]

  // Set by the session for one evaluation: a stop requested from another thread ends it between
  // layers (a long prefill would otherwise run its chunk to the end, seconds on a phone).
  const std::atomic<bool>* stop = nullptr;
  bool StopRequested() const { return stop != nullptr && stop->load(std::memory_order_relaxed); }
  // Set by the session for one evaluation (speculative verification): each sequence's rows attend
  // as if decoded one at a time. The step's K/V go into the cache first, then row t attends as a
  // one-token step at its position would (its own key as computed, the earlier ones as the cache
  // holds them, the keys split into ranges as for one token), so with matmuls that run the rows
  // through the decode kernels (up to 8) its logits are those of decoding it alone, bit for bit.
  // The rows must fit the rings' spare room (KvCache ring_spare): committing them first evicts
  // nothing the earliest row still needs.
  bool rows_as_decode = false;
  // Set by the session for one evaluation (Gemma 4's drafter reads them, model/assistant.h): the rows
  // that get logits also leave their final-normed hidden states here, [those rows, d_model] in the
  // logits' order (Model::Forward keeps a chunked evaluation's rows apart as it does the logits).
  float* output_hidden = nullptr;

  size_t Bytes() const;  // all of the above: what a session holds for activations
  // What Bytes() of a Workspace made with these arguments will be, without making it (planning).
  static size_t PlanBytes(const ModelConfig& config, int max_batch, int n_ctx, int n_threads, size_t extra_floats = 0);
};

// Hands out consecutive float buffers from one block (Workspace::extra). Run once with a null base
// to size the block, then with the real base to point into it.
class ScratchArena {
 public:
  explicit ScratchArena(float* base) : base_(base) {}
  float* Take(size_t n) {
    float* p = base_ ? base_ + used_ : nullptr;
    used_ += n;
    return p;
  }
  size_t used() const { return used_; }

 private:
  float* base_;
  size_t used_ = 0;
};

class Model {
 public:
  virtual ~Model() = default;

  const ModelConfig& config() const { return config_; }
  const GgufFile& gguf() const { return *gguf_; }
  std::vector<KvLayerSpec> KvLayout() const;
  // The RoPE frequencies layer `layer` rotates its keys with (RopeRotateHalf's inv_freq; empty: no
  // rotation): what shifting cached keys to new positions needs (KvCache::Discard).
  virtual const std::vector<float>& KeyRope(int layer) const;
  // Floats of family-specific scratch a Workspace for batches of max_batch tokens must provide.
  virtual size_t ExtraScratchFloats(int max_batch) const { (void)max_batch; return 0; }
  // Whether this family's forward takes embedding rows and two-way spans (SequenceChunk): an image
  // in the prompt. Gemma 3 and Gemma 4 today.
  virtual bool TakesEmbeddings() const { return false; }
  // Gemma 4's drafter (model/assistant.h) when this file is one (general.architecture
  // "gemma4-assistant"): it drafts beside a target and evaluates nothing by itself. Else null.
  virtual const Assistant* AsAssistant() const { return nullptr; }
  // The token embedding table a drafter reads the target's inputs from ([n_vocab, d_model], scaled
  // by config().embed_scale); null for a family nothing drafts for.
  virtual const WeightMatrix* InputEmbedding() const { return nullptr; }

  // Runs tokens at positions cache.n_past() onward, appending their K/V to the cache, in chunks of
  // ws.max_batch (each a one-sequence ForwardBatch). logits: [n_tokens, n_vocab] when all_logits,
  // else [n_vocab] for the last token only. progress, if given, is called after each chunk with
  // (tokens done, tokens total).
  Status Forward(const int32_t* tokens, int n_tokens, KvCache& cache, Workspace& ws, KernelContext& ctx,
                 float* logits, bool all_logits, const std::function<void(int, int)>* progress = nullptr) const;
  // The same with images in the tokens: embeddings and key_end ([n_tokens] each, as SequenceChunk's;
  // either may be null). An image's rows go in one chunk (the chunk before it ends early): its two-way
  // attention needs all of its keys at once. An image longer than ws.max_batch is an error.
  Status Forward(const int32_t* tokens, int n_tokens, const float* const* embeddings, const int64_t* key_end,
                 KvCache& cache, Workspace& ws, KernelContext& ctx, float* logits, bool all_logits,
                 const std::function<void(int, int)>* progress = nullptr) const;

  // One forward step over several independent sequences (a server decoding N conversations: each
  // weight is read once for all of them). Each chunk's tokens go at its cache's n_past() onward, and
  // each cache advances by its chunk's n, exactly as Forward of that chunk alone would; attention
  // sees only the sequence's own cache. All rows together must fit ws.max_batch: nothing is split
  // (the caller keeps steps within it; Forward splits one long sequence). Every cache must have
  // n_ctx() <= ws.n_ctx, room for its chunk, and appear once.
  // logits: [chunks.size(), n_vocab], each chunk's last row; with all_logits every row,
  // [total rows, n_vocab] in chunk order; may be null. A bad request is refused before anything is
  // computed, and changes nothing. A stop (ws.stop) ends the step with kCancelled and advances no
  // cache (their ring slots may have been written: see Forward).
  Status ForwardBatch(std::span<const SequenceChunk> chunks, Workspace& ws, KernelContext& ctx, float* logits,
                      bool all_logits = false) const;
  // ForwardBatch's checks alone: Ok when it would evaluate these chunks with this workspace.
  Status CheckBatch(std::span<const SequenceChunk> chunks, const Workspace& ws) const;

  explicit Model(std::shared_ptr<const GgufFile> gguf)
      : gguf_(std::move(gguf)), packed_(std::make_unique<PackedWeightStore>(gguf_ ? gguf_->mapping() : nullptr)) {}

  // The slots of the packed copies (a cache: packing changes no result, only where rows are read).
  PackedWeightStore& packed_store() const { return *packed_; }
  // Bytes of weights repacked for the kernels so far (they are packed on first use).
  size_t PackedWeightBytes() const { return packed_->PackedBytes(); }
  // Packs now what evaluations would pack (all routed experts, where tokens would pack only those
  // they choose), e.g. on a background thread while a chat waits for its first message; stops
  // early once *stop is set. Evaluations may run meanwhile: a matrix is packed once, whoever gets to it first.
  void PrepareWeights(KernelContext& ctx, const std::atomic<bool>* stop = nullptr) const { packed_->Prepare(ctx, stop); }

 protected:
  // One step of at most ws.max_batch rows (validated by ForwardBatch); writes step.logits, if any,
  // unless stopped. Leaves the caches' n_past alone.
  virtual void RunStep(const ForwardStep& step, Workspace& ws, KernelContext& ctx) const = 0;
  // An error naming the first id outside the vocabulary.
  Status CheckTokens(const int32_t* tokens, int n) const;

  ModelConfig config_;
  // Filled on first use from config_ (RopeInvFreq); a family whose keys rotate otherwise overrides KeyRope.
  mutable std::vector<std::vector<float>> key_rope_;
  mutable std::once_flag key_rope_once_;
  std::shared_ptr<const GgufFile> gguf_;
  // Slots for the matrices' packed copies (WeightBinder hands them out): their rows' file pages are
  // released once packed.
  std::unique_ptr<PackedWeightStore> packed_;
};

// Loads the family named by general.architecture; errors name the missing key or tensor.
Result<std::unique_ptr<Model>> LoadModel(std::shared_ptr<const GgufFile> gguf);
Result<std::unique_ptr<Model>> LoadModelFile(const std::string& path);
// A model stored inside another file: `length` bytes from `offset` of fd.
Result<std::unique_ptr<Model>> LoadModelRange(int fd, uint64_t offset, uint64_t length);

}  // namespace gemlet
