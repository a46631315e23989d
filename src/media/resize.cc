// Separable antialiased uint8 resizing, PyTorch's integer arithmetic step for step (see resize.h).
#include "media/resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace gemlet::media {
namespace {

// Per output index along one axis: the first input index, how many taps, and their weights.
struct AxisWeights {
  int taps = 0;                 // the stride of `weights`: ceil(support) * 2 + 1
  unsigned precision = 0;       // fractional bits of the int16 weights
  std::vector<int64_t> start;   // [out]
  std::vector<int64_t> count;   // [out]
  std::vector<int16_t> weights; // [out, taps]
};

double Triangle(double x) {
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic with a = -0.5: PyTorch's antialiased bicubic, matching PIL's BICUBIC.
double KeysCubic(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// aten's _compute_index_ranges_weights (antialias=True) in double, then
// _compute_index_ranges_int16_weights. Same expressions in the same order, so that the double
// weights, and hence their int16 roundings, come out identical.
AxisWeights ComputeAxisWeights(int64_t in_size, int64_t out_size, Resample resample) {
  const int interp_size = resample == Resample::kBilinear ? 2 : 4;
  double (*filter)(double) = resample == Resample::kBilinear ? &Triangle : &KeysCubic;
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double support = scale >= 1.0 ? (interp_size * 0.5) * scale : interp_size * 0.5;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  AxisWeights axis;
  axis.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  axis.start.resize(out_size);
  axis.count.resize(out_size);
  std::vector<double> w(static_cast<size_t>(out_size) * axis.taps, 0.0);
  double w_max = 0.0;
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = scale * (i + 0.5);
    const int64_t xmin = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    int64_t xsize = std::min(static_cast<int64_t>(center + support + 0.5), in_size) - xmin;
    // Rounding can make one more tap than the table holds; PyTorch clips it the same way.
    xsize = std::clamp(xsize, int64_t{0}, static_cast<int64_t>(axis.taps));
    double* wi = w.data() + i * axis.taps;
    double total = 0.0;
    for (int64_t j = 0; j < xsize; ++j) {
      wi[j] = filter((j + xmin - center + 0.5) * invscale);
      total += wi[j];
    }
    if (total != 0.0) {
      for (int64_t j = 0; j < xsize; ++j) {
        wi[j] /= total;
        w_max = std::max(w_max, wi[j]);
      }
    }
    axis.start[i] = xmin;
    axis.count[i] = xsize;
  }
  // The most fractional bits (up to 22) for which the largest weight still fits in int16.
  unsigned precision = 0;
  for (; precision < 22; ++precision) {
    const int next = static_cast<int>(0.5 + w_max * (1 << (precision + 1)));
    if (next >= (1 << 15)) break;
  }
  axis.precision = precision;
  axis.weights.resize(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    const double v = w[k] * (1 << precision);
    axis.weights[k] = static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return axis;
}

// One pass along an axis: out[o] = clamp((sum_k w[o,k] * in[start[o] + k] + half) >> precision).
// `in_step` and `out_step` are the strides (in bytes) between neighbours along the axis; `lines`
// lines of `line_len` bytes each run across it with strides in_line / out_line.
void ResamplePass(const uint8_t* in, uint8_t* out, const AxisWeights& axis, int64_t out_size, int64_t in_step,
                  int64_t out_step, int64_t lines, int64_t in_line, int64_t out_line) {
  const int64_t half = int64_t{1} << (axis.precision - 1);
  for (int64_t line = 0; line < lines; ++line) {
    const uint8_t* src = in + line * in_line;
    uint8_t* dst = out + line * out_line;
    for (int64_t o = 0; o < out_size; ++o) {
      const int16_t* w = axis.weights.data() + o * axis.taps;
      const uint8_t* s = src + axis.start[o] * in_step;
      // int64 where PyTorch sums in int32: the same value wherever int32 does not overflow.
      int64_t sum = half;
      for (int64_t k = 0; k < axis.count[o]; ++k) sum += int64_t{w[k]} * s[k * in_step];
      const int64_t v = sum >> axis.precision;
      dst[o * out_step] = static_cast<uint8_t>(std::clamp<int64_t>(v, 0, 255));
    }
  }
}

}  // namespace

Result<Resample> ResampleFromPil(int pil_code) {
  if (pil_code == 2) return Resample::kBilinear;
  if (pil_code == 3) return Resample::kBicubic;
  return Status::Error("resample " + std::to_string(pil_code) +
                       " is not supported: gemlet reproduces bilinear (2) and bicubic (3)");
}

Result<Image> ResizeImage(const Image& image, int width, int height, Resample resample) {
  if (width <= 0 || height <= 0 || image.width <= 0 || image.height <= 0 ||
      image.rgb.size() != static_cast<size_t>(image.width) * image.height * 3) {
    return Status::Error("cannot resize a " + std::to_string(image.width) + " x " + std::to_string(image.height) +
                         " image to " + std::to_string(width) + " x " + std::to_string(height));
  }
  Image current = image;
  // Pixels are interleaved RGB: the three channels are three lines per row, one byte apart.
  if (width != current.width) {
    const AxisWeights axis = ComputeAxisWeights(current.width, width, resample);
    Image next;
    next.width = width;
    next.height = current.height;
    next.rgb.resize(static_cast<size_t>(width) * current.height * 3);
    for (int c = 0; c < 3; ++c) {
      ResamplePass(current.rgb.data() + c, next.rgb.data() + c, axis, width, 3, 3, current.height,
                   int64_t{current.width} * 3, int64_t{width} * 3);
    }
    current = std::move(next);
  }
  if (height != current.height) {
    const AxisWeights axis = ComputeAxisWeights(current.height, height, resample);
    Image next;
    next.width = current.width;
    next.height = height;
    next.rgb.resize(static_cast<size_t>(current.width) * height * 3);
    // Each byte column (a channel of one x) is a line down the image.
    const int64_t row = int64_t{current.width} * 3;
    ResamplePass(current.rgb.data(), next.rgb.data(), axis, height, row, row, row, 1, 1);
    current = std::move(next);
  }
  return current;
}

}  // namespace gemlet::media
