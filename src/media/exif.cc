// The EXIF orientation reader (TIFF header, IFD0) and the pixel transforms it selects.
#include "media/exif.h"

#include <cstring>
#include <utility>

namespace gemlet::media {
namespace {

constexpr uint16_t kOrientationTag = 0x0112;
constexpr uint16_t kTypeShort = 3;
constexpr uint16_t kTypeLong = 4;

// Reads TIFF integers in the block's byte order; every read is checked against the block's end.
class TiffReader {
 public:
  TiffReader(std::span<const uint8_t> bytes, bool big_endian) : bytes_(bytes), big_endian_(big_endian) {}

  bool U16(size_t offset, uint16_t* out) const {
    if (offset > bytes_.size() || bytes_.size() - offset < 2) return false;
    const uint8_t* p = bytes_.data() + offset;
    *out = big_endian_ ? static_cast<uint16_t>(p[0] << 8 | p[1]) : static_cast<uint16_t>(p[1] << 8 | p[0]);
    return true;
  }
  bool U32(size_t offset, uint32_t* out) const {
    if (offset > bytes_.size() || bytes_.size() - offset < 4) return false;
    const uint8_t* p = bytes_.data() + offset;
    *out = big_endian_ ? (uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3])
                       : (uint32_t{p[3]} << 24 | uint32_t{p[2]} << 16 | uint32_t{p[1]} << 8 | p[0]);
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  bool big_endian_;
};

// Where output pixel (x, y) of the transformed image comes from in the source (width w, height h).
// The names are PIL's transposes that exif_transpose picks for each orientation.
std::pair<int, int> SourceOf(int orientation, int x, int y, int w, int h) {
  switch (orientation) {
    case 2: return {w - 1 - x, y};              // FLIP_LEFT_RIGHT
    case 3: return {w - 1 - x, h - 1 - y};      // ROTATE_180
    case 4: return {x, h - 1 - y};              // FLIP_TOP_BOTTOM
    case 5: return {y, x};                      // TRANSPOSE
    case 6: return {y, h - 1 - x};              // ROTATE_270 (90 degrees clockwise)
    case 7: return {w - 1 - y, h - 1 - x};      // TRANSVERSE
    case 8: return {w - 1 - y, x};              // ROTATE_90 (90 degrees counter-clockwise)
    default: return {x, y};
  }
}

}  // namespace

int ExifOrientation(std::span<const uint8_t> exif) {
  static constexpr uint8_t kExifHeader[6] = {'E', 'x', 'i', 'f', 0, 0};
  if (exif.size() >= 6 && std::memcmp(exif.data(), kExifHeader, 6) == 0) exif = exif.subspan(6);
  if (exif.size() < 8) return 1;
  bool big_endian;
  if (exif[0] == 'I' && exif[1] == 'I') big_endian = false;
  else if (exif[0] == 'M' && exif[1] == 'M') big_endian = true;
  else return 1;
  const TiffReader tiff(exif, big_endian);
  uint16_t magic = 0;
  uint32_t ifd0 = 0;
  if (!tiff.U16(2, &magic) || magic != 42 || !tiff.U32(4, &ifd0)) return 1;
  uint16_t count = 0;
  if (!tiff.U16(ifd0, &count)) return 1;
  for (uint32_t i = 0; i < count; ++i) {
    const size_t entry = size_t{ifd0} + 2 + size_t{i} * 12;
    uint16_t tag = 0, type = 0;
    uint32_t n = 0;
    if (!tiff.U16(entry, &tag) || !tiff.U16(entry + 2, &type) || !tiff.U32(entry + 4, &n)) return 1;
    if (tag != kOrientationTag) continue;
    if (n < 1) return 1;
    // A value that fits in four bytes sits in the entry itself, in the file's byte order.
    uint32_t value = 0;
    if (type == kTypeShort) {
      uint16_t v16 = 0;
      if (!tiff.U16(entry + 8, &v16)) return 1;
      value = v16;
    } else if (type == kTypeLong) {
      if (!tiff.U32(entry + 8, &value)) return 1;
    } else {
      return 1;
    }
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

void ApplyExifOrientation(Image& image, int orientation) {
  if (orientation < 2 || orientation > 8) return;
  const int w = image.width, h = image.height;
  const bool swaps = orientation >= 5;
  Image out;
  out.width = swaps ? h : w;
  out.height = swaps ? w : h;
  out.rgb.resize(image.rgb.size());
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      const auto [sx, sy] = SourceOf(orientation, x, y, w, h);
      std::memcpy(out.Pixel(x, y), image.Pixel(sx, sy), 3);
    }
  }
  image = std::move(out);
}

}  // namespace gemlet::media
