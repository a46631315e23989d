// libFuzzer target for the image decoders behind DecodeImage (PNG, JPEG, WebP, HEIC, and the EXIF
// reader): any bytes decode to a consistent RGB image within the limits or are refused with a
// message; a small decoded image also goes through both Gemma preprocessors.
//
// GEMLET_FUZZ_FORMAT=png|jpeg|webp|heic holds a run to one decoder (the per-format campaigns of
// bench/RESULTS.md): an input that does not start as that format gets its signature put in front,
// so no execution is spent on the sniffer's refusal.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

#include "media/exif.h"
#include "media/image.h"
#include "media/image_preprocess.h"

namespace {

// The signature put in front of inputs of another format, and the format it makes.
struct Forced {
  gemlet::media::ImageFormat format = gemlet::media::ImageFormat::kUnknown;
  std::string_view signature;
};

Forced ForcedFormat() {
  using gemlet::media::ImageFormat;
  const char* name = std::getenv("GEMLET_FUZZ_FORMAT");
  const std::string_view n = name == nullptr ? "" : name;
  static constexpr char kPng[] = "\x89PNG\r\n\x1a\n";
  static constexpr char kJpeg[] = "\xff\xd8\xff";
  static constexpr char kWebp[] = "RIFF\x00\x10\x00\x00WEBPVP8 ";
  static constexpr char kHeic[] = "\x00\x00\x00\x18" "ftypheic\x00\x00\x00\x00" "mif1heic";
  if (n == "png") return {ImageFormat::kPng, {kPng, sizeof kPng - 1}};
  if (n == "jpeg") return {ImageFormat::kJpeg, {kJpeg, sizeof kJpeg - 1}};
  if (n == "webp") return {ImageFormat::kWebp, {kWebp, sizeof kWebp - 1}};
  if (n == "heic") return {ImageFormat::kHeic, {kHeic, sizeof kHeic - 1}};
  return {};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Forced forced = ForcedFormat();
  std::vector<uint8_t> with_signature;
  std::span<const uint8_t> bytes(data, size);
  if (forced.format != gemlet::media::ImageFormat::kUnknown && gemlet::media::SniffImageFormat(bytes) != forced.format) {
    with_signature.assign(forced.signature.begin(), forced.signature.end());
    with_signature.insert(with_signature.end(), data, data + size);
    bytes = with_signature;
  }
  const int orientation = gemlet::media::ExifOrientation(bytes);
  if (orientation < 1 || orientation > 8) std::abort();
  // A lower pixel limit than the default keeps each run fast; the check is the same.
  gemlet::media::ImageLimits limits;
  limits.max_pixels = uint64_t{1} << 22;
  auto image = gemlet::media::DecodeImage(bytes, limits);
  if (!image.ok()) {
    if (image.message().empty()) std::abort();
    return 0;
  }
  const uint64_t pixels = static_cast<uint64_t>(image->width) * static_cast<uint64_t>(image->height);
  if (image->width <= 0 || image->height <= 0 || pixels > limits.max_pixels || image->rgb.size() != pixels * 3) {
    std::abort();
  }
  if (pixels > 4096) return 0;
  gemlet::media::Gemma3ImageParams g3;
  g3.height = g3.width = 16;
  g3.pan_and_scan = {.enabled = true, .min_crop_size = 4, .max_num_crops = 4, .min_ratio_to_activate = 1.2};
  auto g3_pixels = gemlet::media::PreprocessGemma3(*image, g3);
  if (!g3_pixels.ok() || g3_pixels->empty() || (*g3_pixels)[0].values.size() != 3 * 16 * 16) std::abort();
  gemlet::media::Gemma4ImageParams g4;
  g4.patch_size = 4;
  g4.pooling_kernel_size = 2;
  g4.max_soft_tokens = 16;
  auto g4_pixels = gemlet::media::PreprocessGemma4(*image, g4);
  // A very thin image can have no size within the budget: then a message, never a bad layout.
  if (g4_pixels.ok() && (g4_pixels->num_patches > g4_pixels->max_patches ||
                         g4_pixels->pixel_values.size() != size_t{16} * 4 * 48)) {
    std::abort();
  }
  if (!g4_pixels.ok() && g4_pixels.message().empty()) std::abort();
  return 0;
}
