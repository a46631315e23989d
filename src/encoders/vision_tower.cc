// What the vision tower files share: the default refusals, the tensor reader, full attention.
#include "encoders/vision_tower.h"

#include <algorithm>

#include "encoders/tower_ops.h"
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

// Each head as two matrix products, so the towers' GEMM (TowerMatMul) does the work at its rate:
// scores S = Q K^T for a block of queries (K's rows as the "weights"), softmax per row, then
// O = S V (V transposed as the "weights"). Hundreds to thousands of patches attend to each other
// here, so the per-query dot and axpy loops of the decoder's attention would read V once per query.
// Every output sums in order over its inputs, so a query's result does not depend on the threads.
void AttendAll(const FullAttention& a, const float* q, const float* k, const float* v, float* out, KernelContext& ctx) {
  const int64_t n = a.n, nk = a.n_keys > 0 ? a.n_keys : a.n, hd = a.head_dim;
  const size_t q_stride = static_cast<size_t>(a.n_heads) * hd, kv_stride = static_cast<size_t>(a.n_kv_heads) * hd;
  const int group = a.n_heads / a.n_kv_heads;
  constexpr int64_t kQueries = 256;
  const int64_t block = std::min(kQueries, n);
  std::vector<float> keys(static_cast<size_t>(nk * hd)), values_t(static_cast<size_t>(hd * nk));
  std::vector<float> queries(static_cast<size_t>(block * hd)), scores(static_cast<size_t>(block * nk));
  std::vector<float> heads(static_cast<size_t>(block * hd));
  auto view = [](const std::vector<float>& m, int64_t rows, int64_t cols) {
    WeightMatrix w;
    w.type = DType::kF32;
    w.data = reinterpret_cast<const uint8_t*>(m.data());
    w.n_in = cols;
    w.n_out = rows;
    w.row_bytes = static_cast<size_t>(cols) * sizeof(float);
    return w;
  };
  for (int kv = 0; kv < a.n_kv_heads; ++kv) {
    for (int64_t j = 0; j < nk; ++j) {
      const float* kr = k + j * static_cast<int64_t>(kv_stride) + kv * hd;
      const float* vr = v + j * static_cast<int64_t>(kv_stride) + kv * hd;
      std::copy(kr, kr + hd, keys.data() + j * hd);
      for (int64_t d = 0; d < hd; ++d) values_t[static_cast<size_t>(d * nk + j)] = vr[d];
    }
    const WeightMatrix key_rows = view(keys, nk, hd), value_rows = view(values_t, hd, nk);
    for (int h = kv * group; h < (kv + 1) * group; ++h) {
      for (int64_t t0 = 0; t0 < n; t0 += block) {
        const int64_t nq = std::min(block, n - t0);
        for (int64_t t = 0; t < nq; ++t) {
          const float* qr = q + (t0 + t) * static_cast<int64_t>(q_stride) + h * hd;
          std::copy(qr, qr + hd, queries.data() + t * hd);
        }
        TowerMatMul(key_rows, queries.data(), nq, scores.data(), ctx);
        ForEachRow(ctx, nq, [&](int64_t r) {
          float* row = scores.data() + r * nk;
          if (a.scale != 1.0f) {
            for (int64_t j = 0; j < nk; ++j) row[j] *= a.scale;
          }
          ctx.kernels().softmax(row, nk);
        });
        TowerMatMul(value_rows, scores.data(), nq, heads.data(), ctx);
        for (int64_t t = 0; t < nq; ++t) {
          std::copy(heads.data() + t * hd, heads.data() + (t + 1) * hd, out + (t0 + t) * static_cast<int64_t>(q_stride) + h * hd);
        }
      }
    }
  }
}

}  // namespace gemlet
