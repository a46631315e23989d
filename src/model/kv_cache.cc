// KvCache layout and row addressing (ring buffers for sliding-window layers).
#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "base/half.h"
#include "tensor/quant_blocks.h"

namespace gemlet {

const char* KvTypeName(KvType type) {
  switch (type) {
    case KvType::kF16: return "f16";
    case KvType::kQ8_0: return "q8_0";
    default: return "f32";
  }
}

bool ParseKvType(const std::string& name, KvType* out) {
  if (name == "f32") *out = KvType::kF32;
  else if (name == "f16") *out = KvType::kF16;
  else if (name == "q8_0") *out = KvType::kQ8_0;
  else return false;
  return true;
}

size_t KvCache::RowBytes(KvType type, int64_t n) {
  switch (type) {
    case KvType::kF16: return static_cast<size_t>(n) * 2;
    case KvType::kQ8_0: return static_cast<size_t>(n / kBlock32) * sizeof(BlockQ8_0);
    default: return static_cast<size_t>(n) * 4;
  }
}

namespace {
int Capacity(const KvLayerSpec& spec, int n_ctx) {
  if (spec.source >= 0) return 0;
  // A sliding layer at position p sees p-W+1..p: the W most recent positions are all it needs.
  return spec.window > 0 ? std::min(spec.window, n_ctx) : n_ctx;
}
}  // namespace

size_t KvCache::PlanBytes(const std::vector<KvLayerSpec>& layers, int n_ctx, KvType type) {
  size_t total = 0;
  for (const KvLayerSpec& s : layers) {
    total += static_cast<size_t>(Capacity(s, n_ctx)) *
             (RowBytes(type, static_cast<int64_t>(s.n_kv_heads) * s.head_dim_k) +
              RowBytes(type, static_cast<int64_t>(s.n_kv_heads) * s.head_dim_v));
  }
  return total;
}

Result<std::unique_ptr<KvCache>> KvCache::Create(const std::vector<KvLayerSpec>& layers, int n_ctx, KvType type) {
  if (n_ctx <= 0) return Status::Error("context size must be positive, got " + std::to_string(n_ctx));
  std::unique_ptr<KvCache> cache(new KvCache());
  cache->n_ctx_ = n_ctx;
  cache->type_ = type;
  size_t offset = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const KvLayerSpec& s = layers[i];
    if (s.source >= static_cast<int>(i)) return Status::Error("layer " + std::to_string(i) + " shares KV with a later layer");
    if (type == KvType::kQ8_0 && s.source < 0 && (s.head_dim_k % kBlock32 != 0 || s.head_dim_v % kBlock32 != 0)) {
      return Status::Error("a q8_0 KV cache needs head sizes that are multiples of 32; layer " + std::to_string(i) +
                           " has " + std::to_string(s.head_dim_k) + "/" + std::to_string(s.head_dim_v) +
                           " (use --kv-type f16)");
    }
    Layer l;
    l.spec = s;
    l.capacity = Capacity(s, n_ctx);
    l.k_row_bytes = RowBytes(type, static_cast<int64_t>(s.n_kv_heads) * s.head_dim_k);
    l.v_row_bytes = RowBytes(type, static_cast<int64_t>(s.n_kv_heads) * s.head_dim_v);
    l.k_offset = offset;
    offset += l.k_row_bytes * l.capacity;
    l.v_offset = offset;
    offset += l.v_row_bytes * l.capacity;
    cache->layers_.push_back(l);
  }
  try {
    cache->storage_.assign(offset, 0);
  } catch (const std::bad_alloc&) {
    return Status::Error("cannot allocate " + std::to_string(offset >> 20) + " MiB for the KV cache; use a smaller context");
  }
  return cache;
}

Status KvCache::CheckRoom(int n) const {
  if (static_cast<int64_t>(n_past_) + n > n_ctx_) {
    return Status::Error("context is full: " + std::to_string(n_past_) + " tokens held + " + std::to_string(n) +
                         " new exceed n_ctx = " + std::to_string(n_ctx_) + " (start a new conversation or raise --ctx)");
  }
  return Status::Ok();
}

void* KvCache::RowPtr(int layer, int64_t pos, bool value) {
  const Layer& l = layers_[layer];
  const size_t slot = static_cast<size_t>(pos % l.capacity);
  return storage_.data() + (value ? l.v_offset + slot * l.v_row_bytes : l.k_offset + slot * l.k_row_bytes);
}

void KvCache::Store(int layer, int64_t pos, const float* k, const float* v) {
  const Layer& l = layers_[layer];
  const size_t k_n = static_cast<size_t>(l.spec.n_kv_heads) * l.spec.head_dim_k;
  const size_t v_n = static_cast<size_t>(l.spec.n_kv_heads) * l.spec.head_dim_v;
  void* kd = KeyRow(layer, pos);
  void* vd = ValueRow(layer, pos);
  if (type_ == KvType::kF32) {
    std::memcpy(kd, k, k_n * sizeof(float));
    std::memcpy(vd, v, v_n * sizeof(float));
  } else if (type_ == KvType::kQ8_0) {
    QuantizeRowQ8_0(k, static_cast<BlockQ8_0*>(kd), static_cast<int64_t>(k_n));
    QuantizeRowQ8_0(v, static_cast<BlockQ8_0*>(vd), static_cast<int64_t>(v_n));
  } else {
    uint16_t* k16 = static_cast<uint16_t*>(kd);
    uint16_t* v16 = static_cast<uint16_t*>(vd);
    for (size_t i = 0; i < k_n; ++i) k16[i] = F32ToF16(k[i]);
    for (size_t i = 0; i < v_n; ++i) v16[i] = F32ToF16(v[i]);
  }
}

}  // namespace gemlet
