// WebP through libwebp: still images only (lossy, lossless, with or without alpha), the EXIF
// orientation from the container's EXIF chunk.
#include <webp/decode.h>

#include <string>

#include "media/exif.h"
#include "media/image_codecs.h"

namespace gemlet::media::internal {
namespace {

// The EXIF chunk of an extended (VP8X) file, found by walking the RIFF chunks; every length is
// checked against the end.
std::span<const uint8_t> FindExifChunk(std::span<const uint8_t> bytes) {
  size_t offset = 12;  // "RIFF", size, "WEBP"
  while (bytes.size() - offset >= 8) {
    const uint8_t* p = bytes.data() + offset;
    const uint32_t size = uint32_t{p[4]} | uint32_t{p[5]} << 8 | uint32_t{p[6]} << 16 | uint32_t{p[7]} << 24;
    if (size > bytes.size() - offset - 8) break;
    if (std::string_view(reinterpret_cast<const char*>(p), 4) == "EXIF") return bytes.subspan(offset + 8, size);
    offset += size_t{8} + size + (size & 1);  // chunks are padded to an even length
    if (offset > bytes.size()) break;
  }
  return {};
}

}  // namespace

Result<Image> DecodeWebp(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  WebPBitstreamFeatures features;
  const VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (status == VP8_STATUS_NOT_ENOUGH_DATA) return Status::Error("corrupt WebP: the file is truncated");
  if (status != VP8_STATUS_OK) return Status::Error("corrupt WebP: bad header (libwebp status " + std::to_string(status) + ")");
  if (features.has_animation) {
    return Status::Error("animated WebP is not supported: give one frame as a still image");
  }
  RETURN_IF_ERROR(CheckDimensions(features.width < 0 ? 0 : features.width, features.height < 0 ? 0 : features.height,
                                  limits, "WebP"));
  Image image = MakeImage(features.width, features.height);
  // MODE_RGB writes the colour channels as stored: alpha is dropped, not composited, as PIL's
  // convert("RGB") does.
  const int stride = image.width * 3;
  if (WebPDecodeRGBInto(bytes.data(), bytes.size(), image.rgb.data(), image.rgb.size(), stride) == nullptr) {
    return Status::Error("corrupt WebP: the image data does not decode (truncated or damaged)");
  }
  ApplyExifOrientation(image, ExifOrientation(FindExifChunk(bytes)));
  return image;
}

}  // namespace gemlet::media::internal
