// HF-exact image preprocessing for Gemma vision: Gemma 3 (fixed S x S, normalised, channels first,
// optional pan-and-scan crops) and Gemma 4 (aspect-preserving resize to a patch budget, patches and
// their positions), as transformers 5.17's Gemma3ImageProcessor / Gemma4ImageProcessor compute them.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "media/image.h"
#include "media/resize.h"

namespace gemlet::media {

// Rescale and normalise as HF's torchvision backend does: with both on, mean and std are divided by
// the rescale factor once (float32) and the uint8 value v becomes (v - mean') / std'; rescale alone
// is v * factor in float32; normalise alone is (v - mean) / std.
struct PixelScaling {
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<float, 3> mean = {0.5f, 0.5f, 0.5f};
  std::array<float, 3> std = {0.5f, 0.5f, 0.5f};
};

// Gemma 3's pan-and-scan: extra crops of a long image, each then preprocessed like the whole one.
// Off by default; the numbers are Gemma3Processor's defaults.
struct PanAndScanParams {
  bool enabled = false;
  int min_crop_size = 256;
  int max_num_crops = 4;
  double min_ratio_to_activate = 1.2;
};

struct Gemma3ImageParams {
  int height = 224;  // HF "size"; the released Gemma 3 checkpoints use 896 x 896
  int width = 224;
  bool do_resize = true;
  Resample resample = Resample::kBilinear;
  PixelScaling scaling;  // HF defaults: 1/255, mean = std = 0.5 (IMAGENET_STANDARD)
  PanAndScanParams pan_and_scan;
};

struct Gemma4ImageParams {
  int patch_size = 16;
  int pooling_kernel_size = 3;
  int max_soft_tokens = 280;  // HF allows 70, 140, 280, 560, 1120; any positive budget works here
  bool do_resize = true;
  Resample resample = Resample::kBicubic;
  PixelScaling scaling = {true, 1.0 / 255.0, false, {0.f, 0.f, 0.f}, {1.f, 1.f, 1.f}};
};

// A crop of the source image: x, y of its top-left pixel and its size.
struct CropBox {
  int x = 0, y = 0, width = 0, height = 0;
};

// HF's pan_and_scan geometry for a width x height image: nothing when disabled, when the aspect
// ratio is below min_ratio_to_activate, or when the crops would be smaller than min_crop_size;
// otherwise 2..max_num_crops side-by-side crops along the long side, row-major. The crop size is
// ceil(side / n), so the last crop can be narrower (it is cut at the image's edge).
std::vector<CropBox> PanAndScanCrops(int width, int height, const PanAndScanParams& params);

// The pixels of `box` (which must lie inside the image).
Image CropImage(const Image& image, const CropBox& box);

// One preprocessed Gemma 3 image: [3, height, width] float32, channels first.
struct Gemma3Pixels {
  int height = 0, width = 0;
  std::vector<float> values;
};

// Gemma 3: the whole image first, then its pan-and-scan crops (HF's order; num_crops = size - 1).
Result<std::vector<Gemma3Pixels>> PreprocessGemma3(const Image& image, const Gemma3ImageParams& params);

// The resized height and width Gemma 4 picks for an image: the largest multiples of
// patch_size * pooling_kernel_size, at the image's aspect ratio, holding at most max_patches patches
// (HF's get_aspect_ratio_preserving_size, including its fallbacks for a very thin image).
struct Gemma4Size {
  int height = 0, width = 0;
};
Result<Gemma4Size> Gemma4ResizedSize(int height, int width, int patch_size, int max_patches, int pooling_kernel_size);

struct Gemma4Pixels {
  int resized_height = 0, resized_width = 0;
  int max_patches = 0;      // max_soft_tokens * k^2: rows of pixel_values
  int patch_dim = 0;        // 3 * p * p
  int num_patches = 0;      // real (non-padding) rows, row-major over the patch grid
  int num_soft_tokens = 0;  // num_patches / k^2 = (rows / k) * (cols / k)
  std::vector<float> pixel_values;     // [max_patches, patch_dim]: (row in patch, column, channel)
  std::vector<int32_t> position_ids;   // [max_patches, 2]: (x = column, y = row); (-1, -1) = padding
};

Result<Gemma4Pixels> PreprocessGemma4(const Image& image, const Gemma4ImageParams& params);

// The parameters from an HF preprocessor_config.json / image_processor_config.json text. Keys that are
// absent keep the HF class defaults; a present key of the wrong type, or an image_processor_type of
// another model, is an error that names it.
Result<Gemma3ImageParams> Gemma3ImageParamsFromHfJson(std::string_view json_text);
Result<Gemma4ImageParams> Gemma4ImageParamsFromHfJson(std::string_view json_text);

}  // namespace gemlet::media
