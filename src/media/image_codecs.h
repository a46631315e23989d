// The per-format decoders behind DecodeImage, and the checks they share (media-internal).
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "media/image.h"

namespace gemlet::media::internal {

// Each gets non-empty bytes of its own format (sniffed) and returns the RGB image before the EXIF
// orientation, except HEIC, whose decoder applies the file's own transformations.
Result<Image> DecodePng(std::span<const uint8_t> bytes, const ImageLimits& limits);
Result<Image> DecodeJpeg(std::span<const uint8_t> bytes, const ImageLimits& limits);
Result<Image> DecodeWebp(std::span<const uint8_t> bytes, const ImageLimits& limits);
Result<Image> DecodeHeic(std::span<const uint8_t> bytes, const ImageLimits& limits);

// The header's dimensions against the limit, before any pixel is allocated: "PNG image is
// 30000 x 30000 = 900000000 pixels, over the limit of 50000000".
Status CheckDimensions(uint64_t width, uint64_t height, const ImageLimits& limits, const char* format);

// An RGB image of width x height (checked by CheckDimensions first), zero-filled.
Image MakeImage(int width, int height);

}  // namespace gemlet::media::internal
