// KvCache: per-layer key/value storage sized for small devices. Global layers hold n_ctx positions;
// sliding-window layers hold only their window in a ring buffer; KV-shared layers hold nothing.
#pragma once

#include <algorithm>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/attention.h"
#include "tensor/dtype.h"

namespace gemlet {

// The cache's element type is a tensor DType: kF32, kF16, kQ8_0 (GGUF's Q8_0 blocks: 32 values, an
// f16 scale; half of f16's bytes) or kQ4_0 (GGUF's Q4_0 blocks: 32 nibbles, an f16 scale; 28% of
// f16's bytes, for a budget nothing else fits). Head sizes must be multiples of 32 for the blocks,
// so that every head starts on one.
inline bool IsKvType(DType type) {
  return type == DType::kF32 || type == DType::kF16 || type == DType::kQ8_0 || type == DType::kQ4_0;
}
inline bool IsBlockKv(DType type) { return type == DType::kQ8_0 || type == DType::kQ4_0; }
const char* KvTypeName(DType type);
bool ParseKvType(const std::string& name, DType* out);

struct KvLayerSpec {
  int n_kv_heads = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;
  int window = 0;       // 0: global layer (keeps every position)
  int source = -1;      // >= 0: shares that layer's cache and stores nothing itself
};

// Unmaps the KV cache's storage (an anonymous mapping of `bytes`).
struct KvStorageUnmap {
  size_t bytes = 0;
  void operator()(uint8_t* p) const;
};

class LoraStack;

class KvCache {
 public:
  // Bytes of one stored row of n values (n a multiple of 32 for kQ8_0).
  static size_t RowBytes(DType type, int64_t n);
  // ring_spare: positions a sliding-window ring keeps beyond its window, so that the last
  // ring_spare tokens can be taken back without evaluating anything again (RollbackRoom()).
  // Bytes Create() will allocate; callers report it before allocating.
  static size_t PlanBytes(const std::vector<KvLayerSpec>& layers, int n_ctx, DType type, int ring_spare = 0);
  static Result<std::unique_ptr<KvCache>> Create(const std::vector<KvLayerSpec>& layers, int n_ctx, DType type,
                                                 int ring_spare = 0);
  // The same cache stored as `type` (a memory governor lowering precision: q8_0 holds half of
  // f16's bytes): every held row converted, positions and ring state as they are.
  Result<std::unique_ptr<KvCache>> ConvertedTo(DType type) const;

  int n_ctx() const { return n_ctx_; }
  int n_past() const { return n_past_; }        // positions 0..n_past-1 are stored
  // The LoRA adapters (model/lora.h) the rows of this cache are computed under, and the next ones
  // will be; null: the base alone. Whoever changes it keeps the rows consistent (the session
  // clears the cache when the stack's key changes).
  const LoraStack* lora() const { return lora_; }
  void set_lora(const LoraStack* lora) { lora_ = lora; }
  DType type() const { return type_; }
  // Bytes reserved for the cache (address space: pages are committed as rows are first written).
  size_t bytes() const { return storage_bytes_; }
  // Bytes of the cache resident now (mincore): what it costs so far.
  size_t ResidentBytes() const;
  // Gives the pages of positions >= n_past back to the system (a reset, a truncation, dropped
  // turns): layers that hold every position keep only what the context holds.
  void ReleaseUnused();
  const KvLayerSpec& spec(int layer) const { return layers_[layer].spec; }
  int capacity(int layer) const { return layers_[layer].capacity; }

  // How many of the last positions may be forgotten (SetPast) with every ring still holding the
  // window the next position attends to: ring_spare + 1, or n_ctx when no ring ever wraps. (Right
  // after a Discard the rings may hold less for a while: TruncateKeepsRings says exactly.)
  int RollbackRoom() const { return rollback_room_; }
  // Whether after SetPast(n) every ring still holds the window position n attends to.
  bool TruncateKeepsRings(int n) const;

  // Error (not a crash) when n more positions do not fit in n_ctx.
  Status CheckRoom(int n) const;
  // Marks n more positions as stored (after every layer has written them).
  void Advance(int n) {
    n_past_ += n;
    written_end_ = std::max(written_end_, n_past_);
  }
  void Clear() {
    SetPast(0);
    ReleaseUnused();
  }
  // Forgets positions >= n (the caller re-fills ring layers when they need it; see Session::Truncate).
  void SetPast(int n) {
    DropGuard();
    n_past_ = n;
    if (n == 0) ring_valid_from_ = 0, written_end_ = 0;
    written_end_ = std::max(written_end_, n);
  }

  // Whether Discard(begin, count) leaves every ring holding the window the next position attends
  // to. A ring (a sliding-window layer that has wrapped) keeps only the shifted positions after the
  // dropped ones: the positions before `begin` that it would also need were overwritten long ago,
  // so at least window - 1 positions must follow the dropped ones.
  bool CanDiscard(int begin, int count) const;
  // Removes positions [begin, begin + count) of every layer: the later ones move down by count, and
  // their keys are rotated back by count positions in place (keys are cached after RoPE, and a
  // rotation by a then by b is one by a + b), in double precision, once per row. rope(layer) gives
  // the layer's RoPE frequencies (head_dim_k / 2 of them, rotate-half pairs; 0 leaves a pair
  // unrotated; an empty vector leaves the keys as they are). Values do not depend on the position.
  // Errors, changing nothing, when !CanDiscard or the range is not within [0, n_past).
  using RopeOf = std::function<const std::vector<float>&(int layer)>;
  Status Discard(int begin, int count, const RopeOf& rope);

  // Tentative rows (speculative decoding's drafts): GuardWrites(from, to) before writing positions
  // [from, to) keeps a copy of the ring slots they would take from older positions still held;
  // TakeBack(n) then forgets positions >= n as SetPast does and puts those slots back, so rows that
  // were written and rejected leave the cache exactly as if they had never been written (a later
  // deep truncation then needs no refill that plain decoding would not have needed either). Any
  // other change of the cache should DropGuard first.
  void GuardWrites(int from, int to);
  void TakeBack(int n);
  void DropGuard() {
    guard_.clear();
    guarding_ = false;
  }
  // Whether TakeBack(n) restores: a guard is set and n is at or after its first position.
  bool Guards(int n) const { return guarding_ && n >= guard_from_; }

  // For saving and restoring a session: the oldest position layer `layer` holds (0 for a layer
  // that holds every position; n_past for a layer that holds none), its rows' bytes, and the
  // rings' validity mark (see ring_valid_from_).
  int OldestHeld(int layer) const;
  size_t KeyRowBytes(int layer) const { return layers_[layer].k_row_bytes; }
  size_t ValueRowBytes(int layer) const { return layers_[layer].v_row_bytes; }
  int ring_valid_from() const { return ring_valid_from_; }
  void SetRingValidFrom(int pos) { ring_valid_from_ = pos; }

  // Row pointers for absolute position pos (must still be held: pos >= n_past - capacity).
  // Rows are n_kv_heads * head_dim values of type(): float, uint16_t (f16), BlockQ8_0 or BlockQ4_0.
  void* KeyRow(int layer, int64_t pos) { return RowPtr(layer, pos, false); }
  void* ValueRow(int layer, int64_t pos) { return RowPtr(layer, pos, true); }
  const void* KeyRow(int layer, int64_t pos) const { return const_cast<KvCache*>(this)->RowPtr(layer, pos, false); }
  const void* ValueRow(int layer, int64_t pos) const { return const_cast<KvCache*>(this)->RowPtr(layer, pos, true); }
  // Layer `layer`'s keys and values as the attention kernel reads them (kernels/attention.h); valid
  // until the cache is freed. A KV-shared layer holds nothing: ask for its source layer's view.
  KvView View(int layer) const;
  // Stores a float row (converted to the cache type).
  void Store(int layer, int64_t pos, const float* k, const float* v);
  // Rounds n rows of keys and values of layer `layer` in place to what Store keeps of them (and
  // storing a rounded row keeps it as it is). A prompt chunk attends to its own rows rounded so, as
  // decoding reads them from the cache: a token's logits then do not depend on where the chunks
  // fall (docs/determinism.md). Nothing to do for an f32 cache.
  void RoundRows(int layer, float* k, float* v, int n) const;
  // The key row at pos as floats (n_kv_heads * head_dim_k of them): what Store kept, in its rounding.
  void LoadKey(int layer, int64_t pos, float* k) const;
  // The value row at pos as floats (n_kv_heads * head_dim_v of them), likewise.
  void LoadValue(int layer, int64_t pos, float* v) const;

 private:
  struct Layer {
    KvLayerSpec spec;
    int capacity = 0;  // positions held
    size_t k_offset = 0, v_offset = 0, k_row_bytes = 0, v_row_bytes = 0;
  };
  void* RowPtr(int layer, int64_t pos, bool value);

  std::vector<Layer> layers_;
  // An anonymous mapping: untouched pages cost nothing, so a long context costs what it holds.
  std::unique_ptr<uint8_t, KvStorageUnmap> storage_;
  size_t storage_bytes_ = 0;
  int n_ctx_ = 0;
  int n_past_ = 0;
  const LoraStack* lora_ = nullptr;
  int ring_spare_ = 0;
  int rollback_room_ = 0;
  // Rings hold valid rows only for positions >= this (and within their capacity of the end): a
  // Discard leaves the slots before the shifted positions empty until new positions fill them.
  int ring_valid_from_ = 0;
  // One past the furthest position written since the cache was last empty. Forgetting positions
  // (SetPast below n_past) does not unwrite them: rows written past the new end (drafts taken back,
  // a rollback) overwrote their slots' older positions, which a later, deeper truncation must not
  // take for held. So a ring holds positions >= written_end_ - capacity at most, not n_past_ -
  // capacity. A Discard, which rewrites the rings, sets it to the new end.
  int written_end_ = 0;
  struct GuardedSlot {
    int layer;
    int pos;                   // the position whose write it guards
    std::vector<uint8_t> k, v;  // the slot's rows before that write
  };
  std::vector<GuardedSlot> guard_;
  bool guarding_ = false;
  int guard_written_end_ = 0;  // written_end_ when the guard was set
  int guard_from_ = 0;
  DType type_ = DType::kF32;
};

}  // namespace gemlet
