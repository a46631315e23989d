// What the vision tower files share: the default refusals, the tensor reader, full attention.
#include "encoders/vision_tower.h"

#include <algorithm>

#include "tensor/dtype.h"

namespace gemlet {

Status VisionTower::Encode(const float*, float*, KernelContext&, std::vector<float>*) const {
  return Status::Error("this vision tower takes an image cut into patches (EncodePatches), not a fixed square");
}

Result<int> VisionTower::EncodePatches(const ImagePatches&, std::vector<float>*, KernelContext&, std::vector<float>*) const {
  return Status::Error("this vision tower takes a fixed square of pixels (Encode), not patches");
}

Status VisionTower::EmbedHardToken(int32_t, float*, KernelContext&) const {
  return Status::Error("this vision tower has no hard tokens (only Gemma 3n embeds its end-of-image marker)");
}

Result<const GgufTensor*> TowerTensors::Find(const std::string& name, std::initializer_list<int64_t> ne) const {
  const GgufTensor* t = f_.FindTensor(name);
  if (t == nullptr) return Status::Error("mmproj: missing tensor '" + name + "'");
  int i = 0;
  bool same = true;
  for (int64_t n : ne) same = same && t->ne[i++] == n;
  for (; i < kGgufMaxDims; ++i) same = same && t->ne[i] == 1;
  if (!same) return Status::Error("mmproj: tensor '" + name + "' has shape " + t->ShapeString() + ", not the tower's");
  if (!GetDTypeInfo(t->type).can_compute) {
    return Status::Error("mmproj: tensor '" + name + "' has type " + DTypeName(t->type) + ", which gemlet cannot compute");
  }
  return t;
}

Result<std::vector<float>> TowerTensors::Vector(const std::string& name, int64_t n) const {
  ASSIGN_OR_RETURN(const GgufTensor* t, Find(name, {n}));
  std::vector<float> out(static_cast<size_t>(n));
  DequantizeRow(t->type, t->data, out.data(), n);
  return out;
}

Result<WeightMatrix> TowerTensors::Matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  ASSIGN_OR_RETURN(const GgufTensor* t, Find(name, {n_in, n_out}));
  return View(*t, n_in, n_out);
}

WeightMatrix TowerTensors::View(const GgufTensor& t, int64_t n_in, int64_t n_out) {
  WeightMatrix m;
  m.type = t.type;
  m.data = t.data;
  m.n_in = n_in;
  m.n_out = n_out;
  m.row_bytes = RowBytes(t.type, n_in);
  return m;
}

void AttendAll(const FullAttention& a, const float* q, const float* k, const float* v, float* out, KernelContext& ctx) {
  const int64_t n = a.n, nk = a.n_keys > 0 ? a.n_keys : a.n, hd = a.head_dim;
  const size_t q_stride = static_cast<size_t>(a.n_heads) * hd, kv_stride = static_cast<size_t>(a.n_kv_heads) * hd;
  const int group = a.n_heads / a.n_kv_heads;
  constexpr int64_t kQueries = 16;
  const int64_t blocks_per_head = (n + kQueries - 1) / kQueries;
  std::vector<std::vector<float>> scores(static_cast<size_t>(ctx.n_threads()));
  std::fill(out, out + n * static_cast<int64_t>(q_stride), 0.0f);
  ctx.pool().ParallelFor(static_cast<size_t>(a.n_heads * blocks_per_head), [&](size_t begin, size_t end, int thread) {
    std::vector<float>& s = scores[static_cast<size_t>(thread)];
    s.resize(static_cast<size_t>(kQueries * nk));
    const KernelTable& kt = ctx.kernels();
    for (size_t item = begin; item < end; ++item) {
      const int64_t h = static_cast<int64_t>(item) / blocks_per_head;
      const int64_t kv = h / group;
      const int64_t t0 = static_cast<int64_t>(item) % blocks_per_head * kQueries;
      const int nq = static_cast<int>(std::min(kQueries, n - t0));
      kt.dot_rows_f32(q + t0 * q_stride + h * hd, q_stride, nq, k + kv * hd, kv_stride, nk, hd, s.data(), nk);
      for (int r = 0; r < nq; ++r) {
        float* row = s.data() + r * nk;
        if (a.scale != 1.0f) {
          for (int64_t j = 0; j < nk; ++j) row[j] *= a.scale;
        }
        kt.softmax(row, nk);
      }
      kt.weighted_sum_f32(s.data(), nk, nq, v + kv * hd, kv_stride, nk, hd, out + t0 * q_stride + h * hd, q_stride);
    }
  });
}

}  // namespace gemlet
