// Gemma 3 and Gemma 4 image preprocessing: pan-and-scan geometry, resize, rescale/normalise, patches.
#include "media/image_preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace gemlet::media {
namespace {

// The per-channel affine map of PixelScaling, in float32 as torch computes it.
struct ScalingPlan {
  enum Mode { kNone, kRescale, kNormalize } mode = kNone;
  float factor = 1.f;
  float mean[3] = {0.f, 0.f, 0.f};
  float std[3] = {1.f, 1.f, 1.f};

  float Apply(uint8_t v, int c) const {
    const float x = static_cast<float>(v);
    switch (mode) {
      case kRescale: return x * factor;
      case kNormalize: return (x - mean[c]) / std[c];
      case kNone: break;
    }
    return x;
  }
};

// HF's torchvision backend fuses rescale into normalise: mean and std become float32 tensors times
// the Python float 1 / rescale_factor (a float32 multiply: 0.5 * 255 = 127.5), and the uint8 image
// is cast to float32, minus mean, divided by std. Rescale alone multiplies by the factor as a
// float32 scalar.
ScalingPlan Plan(const PixelScaling& s) {
  ScalingPlan plan;
  if (s.do_normalize) {
    plan.mode = ScalingPlan::kNormalize;
    const float inverse = static_cast<float>(1.0 / s.rescale_factor);
    for (int c = 0; c < 3; ++c) {
      plan.mean[c] = s.do_rescale ? s.mean[c] * inverse : s.mean[c];
      plan.std[c] = s.do_rescale ? s.std[c] * inverse : s.std[c];
    }
  } else if (s.do_rescale) {
    plan.mode = ScalingPlan::kRescale;
    plan.factor = static_cast<float>(s.rescale_factor);
  }
  return plan;
}

Status CheckScaling(const PixelScaling& s) {
  if (s.do_rescale && !(s.rescale_factor > 0.0 && std::isfinite(s.rescale_factor))) {
    return Status::Error("rescale_factor must be a positive number, not " + std::to_string(s.rescale_factor));
  }
  for (int c = 0; c < 3; ++c) {
    if (s.do_normalize && (s.std[c] == 0.f || !std::isfinite(s.std[c]) || !std::isfinite(s.mean[c]))) {
      return Status::Error("image_std must be finite and non-zero, and image_mean finite");
    }
  }
  return Status::Ok();
}

Result<Image> ResizeIfNeeded(const Image& image, int width, int height, Resample resample) {
  // torchvision returns the tensor untouched when the size already matches.
  if (image.width == width && image.height == height) return image;
  return ResizeImage(image, width, height, resample);
}

}  // namespace

std::vector<CropBox> PanAndScanCrops(int width, int height, const PanAndScanParams& params) {
  if (!params.enabled || width <= 0 || height <= 0 || params.min_crop_size <= 0) return {};
  int num_w = 1, num_h = 1;
  // Python's true division and floor, as HF writes them (int(math.floor(x + 0.5)): half rounds up).
  if (width >= height) {
    if (static_cast<double>(width) / height < params.min_ratio_to_activate) return {};
    num_w = static_cast<int>(std::floor(static_cast<double>(width) / height + 0.5));
    num_w = std::min(static_cast<int>(std::floor(static_cast<double>(width) / params.min_crop_size)), num_w);
    num_w = std::min(params.max_num_crops, std::max(2, num_w));
  } else {
    if (static_cast<double>(height) / width < params.min_ratio_to_activate) return {};
    num_h = static_cast<int>(std::floor(static_cast<double>(height) / width + 0.5));
    num_h = std::min(static_cast<int>(std::floor(static_cast<double>(height) / params.min_crop_size)), num_h);
    num_h = std::min(params.max_num_crops, std::max(2, num_h));
  }
  if (num_w <= 0 || num_h <= 0) return {};  // max_num_crops below 1: HF would slice nothing
  const int crop_w = static_cast<int>(std::ceil(static_cast<double>(width) / num_w));
  const int crop_h = static_cast<int>(std::ceil(static_cast<double>(height) / num_h));
  if (std::min(crop_w, crop_h) < params.min_crop_size) return {};
  std::vector<CropBox> crops;
  for (int r = 0; r < num_h; ++r) {
    for (int c = 0; c < num_w; ++c) {
      // image[y : y + crop_h, x : x + crop_w] stops at the edge.
      CropBox box{c * crop_w, r * crop_h, 0, 0};
      box.width = std::min(crop_w, width - box.x);
      box.height = std::min(crop_h, height - box.y);
      if (box.width > 0 && box.height > 0) crops.push_back(box);
    }
  }
  return crops;
}

Image CropImage(const Image& image, const CropBox& box) {
  Image out;
  out.width = box.width;
  out.height = box.height;
  out.rgb.resize(static_cast<size_t>(box.width) * box.height * 3);
  for (int y = 0; y < box.height; ++y) {
    std::memcpy(out.Pixel(0, y), image.Pixel(box.x, box.y + y), static_cast<size_t>(box.width) * 3);
  }
  return out;
}

Result<std::vector<Gemma3Pixels>> PreprocessGemma3(const Image& image, const Gemma3ImageParams& params) {
  if (image.width <= 0 || image.height <= 0) return Status::Error("Gemma 3 preprocessing: the image is empty");
  if (params.do_resize && (params.width <= 0 || params.height <= 0)) {
    return Status::Error("Gemma 3 preprocessing: size must be positive, not " + std::to_string(params.height) +
                         " x " + std::to_string(params.width));
  }
  RETURN_IF_ERROR(CheckScaling(params.scaling));
  const ScalingPlan plan = Plan(params.scaling);
  std::vector<Image> sources;
  sources.push_back(image);
  for (const CropBox& box : PanAndScanCrops(image.width, image.height, params.pan_and_scan)) {
    sources.push_back(CropImage(image, box));
  }
  std::vector<Gemma3Pixels> out;
  for (const Image& source : sources) {
    Image resized = source;
    if (params.do_resize) {
      ASSIGN_OR_RETURN(resized, ResizeIfNeeded(source, params.width, params.height, params.resample));
    }
    Gemma3Pixels pixels;
    pixels.height = resized.height;
    pixels.width = resized.width;
    const size_t plane = static_cast<size_t>(resized.width) * resized.height;
    pixels.values.resize(plane * 3);
    for (size_t i = 0; i < plane; ++i) {
      for (int c = 0; c < 3; ++c) pixels.values[c * plane + i] = plan.Apply(resized.rgb[i * 3 + c], c);
    }
    out.push_back(std::move(pixels));
  }
  return out;
}

Result<Gemma4Size> Gemma4ResizedSize(int height, int width, int patch_size, int max_patches, int pooling_kernel_size) {
  if (height <= 0 || width <= 0 || patch_size <= 0 || max_patches <= 0 || pooling_kernel_size <= 0) {
    return Status::Error("Gemma 4 resize: sizes must be positive (image " + std::to_string(height) + " x " +
                         std::to_string(width) + ", patch " + std::to_string(patch_size) + ", max_patches " +
                         std::to_string(max_patches) + ", pooling " + std::to_string(pooling_kernel_size) + ")");
  }
  const double total_px = static_cast<double>(height) * width;
  const double target_px = static_cast<double>(max_patches) * patch_size * patch_size;
  const double factor = std::sqrt(target_px / total_px);
  const double ideal_h = factor * height, ideal_w = factor * width;
  const int side = pooling_kernel_size * patch_size;
  int64_t th = static_cast<int64_t>(std::floor(ideal_h / side)) * side;
  int64_t tw = static_cast<int64_t>(std::floor(ideal_w / side)) * side;
  if (th == 0 && tw == 0) {
    return Status::Error("Gemma 4 resize: a " + std::to_string(height) + " x " + std::to_string(width) +
                         " image would shrink to 0 x 0 (sides must be multiples of " + std::to_string(side) + ")");
  }
  // A very thin image: the short side gets one pooling cell, the long side the aspect ratio's
  // multiple of it, capped at the budget's row length.
  const int64_t max_side = static_cast<int64_t>(max_patches / (pooling_kernel_size * pooling_kernel_size)) * side;
  if (th == 0) {
    th = side;
    tw = std::min<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(width) / height)) * side, max_side);
  } else if (tw == 0) {
    tw = side;
    th = std::min<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(height) / width)) * side, max_side);
  }
  if (static_cast<double>(th) * static_cast<double>(tw) > target_px || th <= 0 || tw <= 0) {
    return Status::Error("Gemma 4 resize: " + std::to_string(height) + " x " + std::to_string(width) + " -> " +
                         std::to_string(th) + " x " + std::to_string(tw) + " exceeds " + std::to_string(max_patches) +
                         " patches of " + std::to_string(patch_size));
  }
  return Gemma4Size{static_cast<int>(th), static_cast<int>(tw)};
}

Result<Gemma4Pixels> PreprocessGemma4(const Image& image, const Gemma4ImageParams& params) {
  const int p = params.patch_size, k = params.pooling_kernel_size;
  if (p <= 0 || k <= 0 || params.max_soft_tokens <= 0) {
    return Status::Error("Gemma 4 preprocessing: patch_size, pooling_kernel_size and max_soft_tokens must be positive");
  }
  if (image.width <= 0 || image.height <= 0) return Status::Error("Gemma 4 preprocessing: the image is empty");
  RETURN_IF_ERROR(CheckScaling(params.scaling));
  Gemma4Pixels out;
  out.max_patches = params.max_soft_tokens * k * k;
  out.patch_dim = 3 * p * p;
  Image resized = image;
  if (params.do_resize) {
    ASSIGN_OR_RETURN(const Gemma4Size size, Gemma4ResizedSize(image.height, image.width, p, out.max_patches, k));
    ASSIGN_OR_RETURN(resized, ResizeIfNeeded(image, size.width, size.height, params.resample));
  }
  out.resized_height = resized.height;
  out.resized_width = resized.width;
  // Without a resize the sides need not be multiples of the patch (HF's reshape would raise); the
  // pixels past the last whole patch are left out.
  const int rows = resized.height / p, cols = resized.width / p;
  out.num_patches = rows * cols;
  if (out.num_patches > out.max_patches) {
    return Status::Error("Gemma 4 preprocessing: " + std::to_string(out.num_patches) + " patches exceed max_patches " +
                         std::to_string(out.max_patches));
  }
  out.num_soft_tokens = out.num_patches / (k * k);
  const ScalingPlan plan = Plan(params.scaling);
  out.pixel_values.assign(static_cast<size_t>(out.max_patches) * out.patch_dim, 0.f);
  out.position_ids.assign(static_cast<size_t>(out.max_patches) * 2, -1);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const size_t patch = static_cast<size_t>(r) * cols + c;
      float* dst = out.pixel_values.data() + patch * out.patch_dim;
      for (int y = 0; y < p; ++y) {
        const uint8_t* src = resized.Pixel(c * p, r * p + y);
        for (int x = 0; x < p * 3; ++x) *dst++ = plan.Apply(src[x], x % 3);
      }
      out.position_ids[patch * 2 + 0] = c;
      out.position_ids[patch * 2 + 1] = r;
    }
  }
  return out;
}

}  // namespace gemlet::media
