// KvCache layout and row addressing (ring buffers for sliding-window layers).
#include "model/kv_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/half.h"
#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

namespace gemlet {

const char* KvTypeName(DType type) {
  switch (type) {
    case DType::kF16: return "f16";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
    case DType::kF32: return "f32";
    default: return "?";
  }
}

bool ParseKvType(const std::string& name, DType* out) {
  if (name == "f32") *out = DType::kF32;
  else if (name == "f16") *out = DType::kF16;
  else if (name == "q8_0") *out = DType::kQ8_0;
  else if (name == "q4_0") *out = DType::kQ4_0;
  else return false;
  return true;
}

size_t KvCache::RowBytes(DType type, int64_t n) {
  switch (type) {
    case DType::kF16: return static_cast<size_t>(n) * 2;
    case DType::kQ8_0: return static_cast<size_t>(n / kBlock32) * sizeof(BlockQ8_0);
    case DType::kQ4_0: return static_cast<size_t>(n / kBlock32) * sizeof(BlockQ4_0);
    default: return static_cast<size_t>(n) * 4;
  }
}

namespace {
int Capacity(const KvLayerSpec& spec, int n_ctx, int ring_spare) {
  if (spec.source >= 0) return 0;
  // A sliding layer at position p sees p-W+1..p: the W most recent positions are all it needs, and
  // the spare ones let the newest few be taken back.
  return spec.window > 0 ? std::min(spec.window + ring_spare, n_ctx) : n_ctx;
}
}  // namespace

size_t KvCache::PlanBytes(const std::vector<KvLayerSpec>& layers, int n_ctx, DType type, int ring_spare) {
  size_t total = 0;
  for (const KvLayerSpec& s : layers) {
    total += static_cast<size_t>(Capacity(s, n_ctx, std::max(0, ring_spare))) *
             (RowBytes(type, static_cast<int64_t>(s.n_kv_heads) * s.head_dim_k) +
              RowBytes(type, static_cast<int64_t>(s.n_kv_heads) * s.head_dim_v));
  }
  return total;
}

Result<std::unique_ptr<KvCache>> KvCache::Create(const std::vector<KvLayerSpec>& layers, int n_ctx, DType type,
                                                 int ring_spare) {
  if (n_ctx <= 0) return Status::Error("context size must be positive, got " + std::to_string(n_ctx));
  if (ring_spare < 0) return Status::Error("ring spare room must be >= 0, got " + std::to_string(ring_spare));
  if (!IsKvType(type)) return Status::Error(std::string("a KV cache cannot hold ") + DTypeName(type) + " (f32, f16, q8_0 or q4_0)");
  std::unique_ptr<KvCache> cache(new KvCache());
  cache->n_ctx_ = n_ctx;
  cache->type_ = type;
  cache->ring_spare_ = ring_spare;
  cache->rollback_room_ = n_ctx;
  size_t offset = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const KvLayerSpec& s = layers[i];
    if (s.source >= static_cast<int>(i)) return Status::Error("layer " + std::to_string(i) + " shares KV with a later layer");
    if (IsBlockKv(type) && s.source < 0 && (s.head_dim_k % kBlock32 != 0 || s.head_dim_v % kBlock32 != 0)) {
      return Status::Error(std::string("a ") + KvTypeName(type) + " KV cache needs head sizes that are multiples of 32; layer " + std::to_string(i) +
                           " has " + std::to_string(s.head_dim_k) + "/" + std::to_string(s.head_dim_v) +
                           " (use --kv-type f16)");
    }
    Layer l;
    l.spec = s;
    l.capacity = Capacity(s, n_ctx, ring_spare);
    // A ring of C slots holds the last C positions; the next one attends to the W - 1 before it.
    if (s.source < 0 && s.window > 0 && l.capacity < n_ctx) {
      cache->rollback_room_ = std::min(cache->rollback_room_, l.capacity - s.window + 1);
    }
    l.k_row_bytes = RowBytes(type, static_cast<int64_t>(s.n_kv_heads) * s.head_dim_k);
    l.v_row_bytes = RowBytes(type, static_cast<int64_t>(s.n_kv_heads) * s.head_dim_v);
    l.k_offset = offset;
    offset += l.k_row_bytes * l.capacity;
    l.v_offset = offset;
    offset += l.v_row_bytes * l.capacity;
    cache->layers_.push_back(l);
  }
  // Reserved, not touched: the kernel commits zero pages as rows are written.
  void* mem = ::mmap(nullptr, std::max<size_t>(offset, 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    return Status::Error("cannot reserve " + std::to_string(offset >> 20) + " MiB for the KV cache; use a smaller context");
  }
  cache->storage_ = std::unique_ptr<uint8_t, KvStorageUnmap>(static_cast<uint8_t*>(mem), KvStorageUnmap{std::max<size_t>(offset, 1)});
  cache->storage_bytes_ = offset;
  return cache;
}

void KvStorageUnmap::operator()(uint8_t* p) const { ::munmap(p, bytes); }

void KvCache::ReleaseUnused() {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto release = [&](size_t begin, size_t end) {  // whole pages inside [begin, end) of the storage
    begin = (begin + page - 1) / page * page;
    end = end / page * page;
    if (end > begin) ::madvise(storage_.get() + begin, end - begin, MADV_DONTNEED);
  };
  for (const Layer& l : layers_) {
    if (l.capacity == 0 || n_past_ >= l.capacity) continue;  // nothing, or every slot in use
    // Slots n_past.. hold no position (a ring that has not wrapped fills from slot 0 too).
    release(l.k_offset + static_cast<size_t>(n_past_) * l.k_row_bytes, l.k_offset + static_cast<size_t>(l.capacity) * l.k_row_bytes);
    release(l.v_offset + static_cast<size_t>(n_past_) * l.v_row_bytes, l.v_offset + static_cast<size_t>(l.capacity) * l.v_row_bytes);
  }
}

size_t KvCache::ResidentBytes() const {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = (storage_bytes_ + page - 1) / page;
  std::vector<unsigned char> in(pages);
  if (pages == 0 || ::mincore(storage_.get(), pages * page, in.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n * page;
}

Status KvCache::CheckRoom(int n) const {
  if (static_cast<int64_t>(n_past_) + n > n_ctx_) {
    return Status::Error("context is full: " + std::to_string(n_past_) + " tokens held + " + std::to_string(n) +
                         " new exceed n_ctx = " + std::to_string(n_ctx_) + " (start a new conversation or raise --ctx)");
  }
  return Status::Ok();
}

namespace {
// A ring layer whose slots have been reused (or left partly empty by a Discard): positions before
// its oldest valid one are gone.
bool Wrapped(int capacity, int n_past, int valid_from) { return capacity > 0 && (n_past > capacity || valid_from > 0); }
}  // namespace

int KvCache::OldestHeld(int layer) const {
  const Layer& l = layers_[layer];
  if (l.capacity == 0) return n_past_;
  if (l.spec.window <= 0 || !Wrapped(l.capacity, written_end_, ring_valid_from_)) return 0;
  return std::min(n_past_, std::max(written_end_ - l.capacity, ring_valid_from_));
}

bool KvCache::TruncateKeepsRings(int n) const {
  for (const Layer& l : layers_) {
    if (l.spec.window <= 0 || !Wrapped(l.capacity, written_end_, ring_valid_from_)) continue;
    const int oldest = std::max(written_end_ - l.capacity, ring_valid_from_);
    if (std::max(0, n - l.spec.window + 1) < oldest) return false;
  }
  return true;
}

bool KvCache::CanDiscard(int begin, int count) const {
  const int kept_end = n_past_ - count;
  for (const Layer& l : layers_) {
    if (l.spec.window <= 0 || !Wrapped(l.capacity, written_end_, ring_valid_from_)) continue;
    const int oldest = std::max(written_end_ - l.capacity, ring_valid_from_);
    const int new_oldest = std::max(begin, oldest - count);
    if (new_oldest > std::max(0, kept_end - l.spec.window + 1)) return false;
  }
  return true;
}

namespace {
// A stored row as floats, and back (the cache's own rounding, as Store does).
void RowToFloat(DType type, const void* row, int64_t n, float* out) {
  if (type == DType::kF32) {
    std::memcpy(out, row, static_cast<size_t>(n) * sizeof(float));
  } else if (type == DType::kF16) {
    const uint16_t* h = static_cast<const uint16_t*>(row);
    for (int64_t i = 0; i < n; ++i) out[i] = F16ToF32(h[i]);
  } else {
    DequantizeRow(type == DType::kQ4_0 ? DType::kQ4_0 : DType::kQ8_0, static_cast<const uint8_t*>(row), out, n);
  }
}
void FloatToRow(DType type, const float* in, int64_t n, void* row) {
  if (type == DType::kF32) {
    std::memcpy(row, in, static_cast<size_t>(n) * sizeof(float));
  } else if (type == DType::kF16) {
    uint16_t* h = static_cast<uint16_t*>(row);
    for (int64_t i = 0; i < n; ++i) h[i] = F32ToF16(in[i]);
  } else if (type == DType::kQ4_0) {
    QuantizeRowQ4_0(in, static_cast<BlockQ4_0*>(row), n);
  } else {
    QuantizeRowQ8_0(in, static_cast<BlockQ8_0*>(row), n);
  }
}
}  // namespace

void KvCache::LoadKey(int layer, int64_t pos, float* k) const {
  const KvLayerSpec& spec = layers_[layer].spec;
  RowToFloat(type_, KeyRow(layer, pos), static_cast<int64_t>(spec.n_kv_heads) * spec.head_dim_k, k);
}

void KvCache::LoadValue(int layer, int64_t pos, float* v) const {
  const KvLayerSpec& spec = layers_[layer].spec;
  RowToFloat(type_, ValueRow(layer, pos), static_cast<int64_t>(spec.n_kv_heads) * spec.head_dim_v, v);
}

Status KvCache::Discard(int begin, int count, const RopeOf& rope) {
  if (begin < 0 || count < 0 || static_cast<int64_t>(begin) + count > n_past_) {
    return Status::Error("cannot drop positions [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                         ") of " + std::to_string(n_past_));
  }
  if (count == 0) return Status::Ok();
  DropGuard();
  if (!CanDiscard(begin, count)) {
    return Status::Error("the sliding-window rings no longer hold the positions before " + std::to_string(begin));
  }
  const int kept_end = n_past_ - count;  // the new n_past
  int valid_from = ring_valid_from_;
  std::vector<uint8_t> old;
  std::vector<float> row;
  for (size_t li = 0; li < layers_.size(); ++li) {
    const Layer& l = layers_[li];
    if (l.capacity == 0) continue;
    const size_t k_n = static_cast<size_t>(l.spec.n_kv_heads) * l.spec.head_dim_k;
    const size_t bytes = (l.k_row_bytes + l.v_row_bytes) * static_cast<size_t>(l.capacity);
    old.assign(storage_.get() + l.k_offset, storage_.get() + l.k_offset + bytes);
    auto old_row = [&](int64_t pos, bool value) {
      const size_t slot = static_cast<size_t>(pos % l.capacity);
      return old.data() + (value ? l.v_offset - l.k_offset + slot * l.v_row_bytes : slot * l.k_row_bytes);
    };
    // The positions this layer holds after the shift; those from begin on were count further on. A
    // ring that wrapped keeps only those (and only the ones it still held).
    int first = begin;
    if (l.spec.window > 0 && Wrapped(l.capacity, written_end_, ring_valid_from_)) {
      first = std::max(begin, std::max(written_end_ - l.capacity, ring_valid_from_) - count);
      valid_from = std::max(valid_from, first);
    }
    const std::vector<float>& freq = rope(static_cast<int>(li));
    const int half = l.spec.head_dim_k / 2;
    // Rotating by -count: the same angle for every row, so its sines and cosines once.
    std::vector<double> cos_a(freq.size()), sin_a(freq.size());
    for (size_t i = 0; i < freq.size(); ++i) {
      const double angle = -static_cast<double>(count) * static_cast<double>(freq[i]);
      cos_a[i] = std::cos(angle);
      sin_a[i] = std::sin(angle);
    }
    row.resize(k_n);
    for (int q = first; q < kept_end; ++q) {
      const int64_t p = q + count;
      std::memcpy(ValueRow(static_cast<int>(li), q), old_row(p, true), l.v_row_bytes);
      void* key = KeyRow(static_cast<int>(li), q);
      if (freq.empty()) {
        std::memcpy(key, old_row(p, false), l.k_row_bytes);
        continue;
      }
      RowToFloat(type_, old_row(p, false), static_cast<int64_t>(k_n), row.data());
      for (int h = 0; h < l.spec.n_kv_heads; ++h) {
        float* x = row.data() + static_cast<size_t>(h) * l.spec.head_dim_k;
        for (int i = 0; i < half && i < static_cast<int>(freq.size()); ++i) {
          const double a = x[i], b = x[i + half];
          x[i] = static_cast<float>(a * cos_a[i] - b * sin_a[i]);
          x[i + half] = static_cast<float>(b * cos_a[i] + a * sin_a[i]);
        }
      }
      FloatToRow(type_, row.data(), static_cast<int64_t>(k_n), key);
    }
  }
  n_past_ = kept_end;
  written_end_ = kept_end;
  ring_valid_from_ = valid_from;
  ReleaseUnused();
  return Status::Ok();
}

void KvCache::GuardWrites(int from, int to) {
  DropGuard();
  guarding_ = true;
  guard_written_end_ = written_end_;
  guard_from_ = from;
  for (size_t li = 0; li < layers_.size(); ++li) {
    const Layer& l = layers_[li];
    if (l.capacity == 0 || l.spec.window <= 0) continue;  // a layer holding every position loses nothing
    // Position p takes the slot of p - capacity, which matters only if no earlier write took it.
    for (int p = std::max(from, written_end_); p < to; ++p) {
      if (p - l.capacity < 0) continue;
      const int layer = static_cast<int>(li);
      const uint8_t* k = static_cast<const uint8_t*>(KeyRow(layer, p));
      const uint8_t* v = static_cast<const uint8_t*>(ValueRow(layer, p));
      guard_.push_back({layer, p, std::vector<uint8_t>(k, k + l.k_row_bytes), std::vector<uint8_t>(v, v + l.v_row_bytes)});
    }
  }
}

void KvCache::TakeBack(int n) {
  if (!guarding_) {
    SetPast(n);
    return;
  }
  for (const GuardedSlot& g : guard_) {
    if (g.pos < n) continue;  // kept: its write stands
    std::memcpy(KeyRow(g.layer, g.pos), g.k.data(), g.k.size());
    std::memcpy(ValueRow(g.layer, g.pos), g.v.data(), g.v.size());
  }
  n_past_ = n;
  written_end_ = std::max(guard_written_end_, n);
  DropGuard();
}

void* KvCache::RowPtr(int layer, int64_t pos, bool value) {
  const Layer& l = layers_[layer];
  const size_t slot = static_cast<size_t>(pos % l.capacity);
  return storage_.get() + (value ? l.v_offset + slot * l.v_row_bytes : l.k_offset + slot * l.k_row_bytes);
}

KvView KvCache::View(int layer) const {
  const Layer& l = layers_[layer];
  KvView view;
  view.type = type_;
  view.k = storage_.get() + l.k_offset;
  view.v = storage_.get() + l.v_offset;
  view.k_row_bytes = l.k_row_bytes;
  view.v_row_bytes = l.v_row_bytes;
  view.capacity = l.capacity;
  view.n_kv_heads = l.spec.n_kv_heads;
  view.head_dim_k = l.spec.head_dim_k;
  view.head_dim_v = l.spec.head_dim_v;
  return view;
}

Result<std::unique_ptr<KvCache>> KvCache::ConvertedTo(DType type) const {
  std::vector<KvLayerSpec> specs;
  for (const Layer& l : layers_) specs.push_back(l.spec);
  ASSIGN_OR_RETURN(std::unique_ptr<KvCache> out, Create(specs, n_ctx_, type, ring_spare_));
  std::vector<float> row;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const int layer = static_cast<int>(i);
    const KvLayerSpec& s = layers_[i].spec;
    if (s.source >= 0) continue;
    const int64_t nk = static_cast<int64_t>(s.n_kv_heads) * s.head_dim_k;
    const int64_t nv = static_cast<int64_t>(s.n_kv_heads) * s.head_dim_v;
    row.resize(static_cast<size_t>(std::max(nk, nv)));
    for (int pos = OldestHeld(layer); pos < n_past_; ++pos) {
      RowToFloat(type_, KeyRow(layer, pos), nk, row.data());
      FloatToRow(type, row.data(), nk, out->KeyRow(layer, pos));
      RowToFloat(type_, ValueRow(layer, pos), nv, row.data());
      FloatToRow(type, row.data(), nv, out->ValueRow(layer, pos));
    }
  }
  out->n_past_ = n_past_;
  out->written_end_ = written_end_;
  out->ring_valid_from_ = ring_valid_from_;
  out->rollback_room_ = rollback_room_;
  out->lora_ = lora_;
  return out;
}

void KvCache::RoundRows(int layer, float* k, float* v, int n) const {
  if (type_ == DType::kF32) return;
  const KvLayerSpec& spec = layers_[layer].spec;
  const int64_t kn = static_cast<int64_t>(spec.n_kv_heads) * spec.head_dim_k;
  const int64_t vn = static_cast<int64_t>(spec.n_kv_heads) * spec.head_dim_v;
  if (type_ == DType::kF16) {  // in place: a prompt's rows on every layer, so no buffer
    for (int64_t i = 0; i < n * kn; ++i) k[i] = F16ToF32(F32ToF16(k[i]));
    for (int64_t i = 0; i < n * vn; ++i) v[i] = F16ToF32(F32ToF16(v[i]));
    return;
  }
  thread_local std::vector<uint8_t> row;  // every layer of every prompt chunk: no allocation each time
  row.resize(std::max(RowBytes(type_, kn), RowBytes(type_, vn)));
  for (int t = 0; t < n; ++t) {
    FloatToRow(type_, k + t * kn, kn, row.data());
    RowToFloat(type_, row.data(), kn, k + t * kn);
    FloatToRow(type_, v + t * vn, vn, row.data());
    RowToFloat(type_, row.data(), vn, v + t * vn);
  }
}

void KvCache::Store(int layer, int64_t pos, const float* k, const float* v) {
  const Layer& l = layers_[layer];
  FloatToRow(type_, k, static_cast<int64_t>(l.spec.n_kv_heads) * l.spec.head_dim_k, KeyRow(layer, pos));
  FloatToRow(type_, v, static_cast<int64_t>(l.spec.n_kv_heads) * l.spec.head_dim_v, ValueRow(layer, pos));
}

}  // namespace gemlet
