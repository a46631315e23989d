// KvCache: per-layer key/value storage sized for small devices. Global layers hold n_ctx positions;
// sliding-window layers hold only their window in a ring buffer; KV-shared layers hold nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace gemlet {

// kQ8_0: GGUF's Q8_0 blocks (32 values, an f16 scale), half of f16's bytes; head sizes must be
// multiples of 32 so that every head starts on a block.
enum class KvType { kF32, kF16, kQ8_0 };
const char* KvTypeName(KvType type);
bool ParseKvType(const std::string& name, KvType* out);

struct KvLayerSpec {
  int n_kv_heads = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;
  int window = 0;       // 0: global layer (keeps every position)
  int source = -1;      // >= 0: shares that layer's cache and stores nothing itself
};

class KvCache {
 public:
  // Bytes of one stored row of n values (n a multiple of 32 for kQ8_0).
  static size_t RowBytes(KvType type, int64_t n);
  // Bytes Create() will allocate; callers report it before allocating.
  static size_t PlanBytes(const std::vector<KvLayerSpec>& layers, int n_ctx, KvType type);
  static Result<std::unique_ptr<KvCache>> Create(const std::vector<KvLayerSpec>& layers, int n_ctx, KvType type);

  int n_ctx() const { return n_ctx_; }
  int n_past() const { return n_past_; }        // positions 0..n_past-1 are stored
  KvType type() const { return type_; }
  size_t bytes() const { return storage_.size(); }
  const KvLayerSpec& spec(int layer) const { return layers_[layer].spec; }
  int capacity(int layer) const { return layers_[layer].capacity; }

  // Error (not a crash) when n more positions do not fit in n_ctx.
  Status CheckRoom(int n) const;
  // Marks n more positions as stored (after every layer has written them).
  void Advance(int n) { n_past_ += n; }
  void Clear() { n_past_ = 0; }
  // Forgets positions >= n (the caller re-fills ring layers when they need it; see Session::Truncate).
  void SetPast(int n) { n_past_ = n; }

  // Row pointers for absolute position pos (must still be held: pos >= n_past - capacity).
  // Rows are n_kv_heads * head_dim values of type(): float, uint16_t (f16) or BlockQ8_0.
  void* KeyRow(int layer, int64_t pos) { return RowPtr(layer, pos, false); }
  void* ValueRow(int layer, int64_t pos) { return RowPtr(layer, pos, true); }
  const void* KeyRow(int layer, int64_t pos) const { return const_cast<KvCache*>(this)->RowPtr(layer, pos, false); }
  const void* ValueRow(int layer, int64_t pos) const { return const_cast<KvCache*>(this)->RowPtr(layer, pos, true); }
  // Stores a float row (converted to the cache type).
  void Store(int layer, int64_t pos, const float* k, const float* v);

 private:
  struct Layer {
    KvLayerSpec spec;
    int capacity = 0;  // positions held
    size_t k_offset = 0, v_offset = 0, k_row_bytes = 0, v_row_bytes = 0;
  };
  void* RowPtr(int layer, int64_t pos, bool value);

  std::vector<Layer> layers_;
  std::vector<uint8_t> storage_;
  int n_ctx_ = 0;
  int n_past_ = 0;
  KvType type_ = KvType::kF32;
};

}  // namespace gemlet
