// Image resizing as HF's torchvision-backed processors do it: PyTorch's antialiased interpolate on a
// uint8 CPU tensor (separable passes with Pillow-style fixed-point weights).
#pragma once

#include "base/status.h"
#include "media/image.h"

namespace gemlet::media {

// The filters HF configs name by PIL's numbers ("resample": 2 or 3). Under torchvision, NEAREST,
// BOX, HAMMING and LANCZOS take other paths (or none), and no Gemma processor uses them.
enum class Resample { kBilinear, kBicubic };

// 2 -> kBilinear, 3 -> kBicubic; any other PIL number is refused with a message.
Result<Resample> ResampleFromPil(int pil_code);

// Resizes to width x height exactly as torchvision's F.resize(uint8 tensor, antialias=True) on
// the CPU computes it (aten's upsample_{bilinear,bicubic}2d_aa, uint8 path):
// - per axis, a filter of support 1 (bilinear, triangle) or 2 (bicubic, Keys a = -0.5, which PyTorch
//   uses with antialias for PIL compatibility; -0.75 is its non-antialiased cubic), widened by the
//   scale when shrinking, centred at scale * (i + 0.5), taps normalised to sum 1;
// - the weights rounded to int16 with the most fractional bits that keep the largest below 2^15;
// - the width pass first (when the width changes), rounded and clamped to uint8, then the height
//   pass over that (when the height changes).
// The result is bit-exact with PyTorch's AVX2 and generic kernels, which share these integer steps.
// (torchvision takes this uint8 path for bicubic everywhere, and for bilinear where PyTorch reports
// AVX2 or AVX512; elsewhere, e.g. on arm64, its bilinear resizes in float32 and rounds once, which
// can differ by one step: this function follows the x86 path the goldens were made on.)
// Sides must be positive.
Result<Image> ResizeImage(const Image& image, int width, int height, Resample resample);

}  // namespace gemlet::media
