// Inside src/encoders: the interface each vision tower file implements, and what the towers share
// (reading their tensors with checks, full attention over a set of patches).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "encoders/mmproj.h"
#include "encoders/vision_encoder.h"
#include "gguf/gguf_reader.h"
#include "kernels/kernels.h"

namespace gemlet {

// One tower, bound to its file's tensors. A tower implements the input form its model takes and
// refuses the other.
class VisionTower {
 public:
  virtual ~VisionTower() = default;
  virtual Status Encode(const float* pixels, float* embeddings, KernelContext& ctx, std::vector<float>* tower_out) const;
  virtual Result<int> EncodePatches(const ImagePatches& patches, std::vector<float>* embeddings, KernelContext& ctx,
                                    std::vector<float>* tower_out) const;
  virtual Status EmbedHardToken(int32_t token, float* out, KernelContext& ctx) const;
};

Result<std::unique_ptr<VisionTower>> BindGemma3Tower(const GgufFile& file, const VisionTowerConfig& c);
Result<std::unique_ptr<VisionTower>> BindGemma3nTower(const GgufFile& file, const VisionTowerConfig& c);
Result<std::unique_ptr<VisionTower>> BindGemma4Tower(const GgufFile& file, const VisionTowerConfig& c);

// Looks a tower's tensors up and checks name, shape and type before anything is computed.
class TowerTensors {
 public:
  explicit TowerTensors(const GgufFile& f) : f_(f) {}

  bool Has(const std::string& name) const { return f_.FindTensor(name) != nullptr; }
  // The tensor as stored (null if absent), for a caller that accepts more than one shape.
  const GgufTensor* Raw(const std::string& name) const { return f_.FindTensor(name); }
  // ne: the GGUF shape, innermost first; missing trailing dimensions must be 1.
  Result<const GgufTensor*> Find(const std::string& name, std::initializer_list<int64_t> ne) const;
  Result<std::vector<float>> Vector(const std::string& name, int64_t n) const;
  // [n_out, n_in] rows read in place.
  Result<WeightMatrix> Matrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  static WeightMatrix View(const GgufTensor& t, int64_t n_in, int64_t n_out);

 private:
  const GgufFile& f_;
};

// Every row attends to every row of the set (no mask, no cache): softmax(scale q k^T) v per head,
// query head h reading KV head h / (n_heads / n_kv_heads). q, out: [n, n_heads * head_dim]; k, v:
// [n_keys, n_kv_heads * head_dim] (n_keys 0: n; MobileNet-V5 attends from every pixel to a
// downsampled grid). A head and a block of queries per task.
struct FullAttention {
  int64_t n = 0;
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float scale = 1.0f;
  int64_t n_keys = 0;
};
void AttendAll(const FullAttention& a, const float* q, const float* k, const float* v, float* out, KernelContext& ctx);

}  // namespace gemlet
