// Test images made in the test with the Debian encoders (libpng, libjpeg, libwebp, libheif/x265),
// so that each decoding test states its input exactly and no binary needs committing.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "media/image.h"

namespace gemlet::media::testing {

using Bytes = std::vector<uint8_t>;

// A deterministic pattern: a gradient in R and G, a checker in B, so that every pixel differs and
// a flip, a rotation or a channel swap shows.
Image Pattern(int width, int height);

// Raw PNG samples: `samples` holds height rows of width * channels samples of bit_depth bits
// (16-bit samples as uint16 values, big-endian in the file), before packing.
struct PngSpec {
  int width = 0, height = 0;
  int color_type = 2;  // PNG_COLOR_TYPE_*: 0 grey, 2 RGB, 3 palette, 4 grey+alpha, 6 RGBA
  int bit_depth = 8;
  bool interlaced = false;
  std::vector<uint32_t> samples;
  std::vector<uint8_t> palette;  // RGB triples, colour type 3
  std::vector<uint8_t> trns;     // palette alpha, colour type 3
};
Bytes EncodePng(const PngSpec& spec);
Bytes EncodePngRgb(const Image& image);
// One chunk: length, type, data, CRC.
Bytes PngChunk(const char* type, std::span<const uint8_t> data);
// Inserts a chunk of `type` right after IHDR (length and CRC computed).
Bytes InsertPngChunk(const Bytes& png, const char* type, std::span<const uint8_t> data);

// JPEG of an RGB image (quality 95 by default, 4:4:4), optionally with an APP1 segment.
Bytes EncodeJpeg(const Image& image, int quality = 95, std::span<const uint8_t> app1 = {}, bool grey = false);
// A 4-component JPEG of `cmyk` (width * height * 4 bytes as stored, i.e. Adobe-inverted), written as
// CMYK or, with ycck, converted by libjpeg to YCCK.
Bytes EncodeJpegCmyk(int width, int height, const std::vector<uint8_t>& cmyk, bool ycck);

Bytes EncodeWebpLossless(const Image& image);
Bytes EncodeWebpLosslessRgba(int width, int height, const std::vector<uint8_t>& rgba);
Bytes EncodeWebpLossy(const Image& image, float quality);
Bytes EncodeWebpAnimated(const Image& frame0, const Image& frame1);
Bytes AddWebpExif(const Bytes& webp, std::span<const uint8_t> exif);

// HEIC by libheif's x265 encoder (empty when no HEVC encoder is available); `orientation` (1-8)
// becomes irot/imir boxes.
Bytes EncodeHeic(const Image& image, int quality, int orientation = 1);

// A TIFF block with IFD0 holding one Orientation entry (type SHORT), prefixed by "Exif\0\0" if asked.
Bytes ExifWithOrientation(int orientation, bool big_endian, bool exif_header);

// Largest |a - b| over the RGB bytes (images of different sizes: 256).
int MaxPixelDiff(const Image& a, const Image& b);

Bytes ReadFileBytes(const std::string& path);

}  // namespace gemlet::media::testing
