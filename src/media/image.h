// Decoded images (8-bit RGB) and the one entry that reads PNG, JPEG, WebP and HEIC bytes into one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace gemlet::media {

// 8-bit RGB, row-major, 3 bytes per pixel: rgb.size() == width * height * 3.
struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;

  uint8_t* Pixel(int x, int y) { return rgb.data() + (static_cast<size_t>(y) * width + x) * 3; }
  const uint8_t* Pixel(int x, int y) const { return rgb.data() + (static_cast<size_t>(y) * width + x) * 3; }
};

// What an image from outside may cost. The pixel limit is checked against the header's dimensions
// before anything is decoded, so a small file that claims 30,000 x 30,000 pixels (a decompression
// bomb) is refused without the allocation.
struct ImageLimits {
  uint64_t max_pixels = 50'000'000;
  size_t max_bytes = size_t{64} << 20;
};

enum class ImageFormat { kUnknown, kPng, kJpeg, kWebp, kHeic };
const char* ImageFormatName(ImageFormat format);

// The format from the first bytes (never from a file name).
ImageFormat SniffImageFormat(std::span<const uint8_t> bytes);

// Decodes a whole still image to RGB the way PIL's Image.open(...).convert("RGB") followed by
// ImageOps.exif_transpose does (what transformers' load_image gives a processor): grey and palette
// expand to RGB, alpha is dropped (not composited), 16-bit samples keep their high byte, CMYK JPEGs
// are converted, and the EXIF orientation is applied. Animated PNG/WebP, truncated or corrupt data,
// unknown formats and anything over `limits` are refused with a message.
Result<Image> DecodeImage(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

// Reads `path` (refused above limits.max_bytes before it is read) and decodes it as DecodeImage does;
// messages name the path.
Result<Image> LoadImageFile(const std::string& path, const ImageLimits& limits = {});

}  // namespace gemlet::media
