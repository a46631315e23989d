// PNG through libpng: a chunk walk first (animation, EXIF), then the header, the limit, the pixels.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "media/exif.h"
#include "media/image_codecs.h"

namespace gemlet::media::internal {
namespace {

struct PngChunks {
  bool animated = false;             // an acTL chunk before the first IDAT (APNG)
  std::span<const uint8_t> exif;     // the eXIf chunk's data, if any
};

// Walks the chunk list without trusting it: a length that runs past the end stops the walk, and
// libpng then reports the truncation. PIL reads eXIf wherever it sits, before or after the pixels.
PngChunks WalkChunks(std::span<const uint8_t> bytes) {
  PngChunks chunks;
  bool seen_idat = false;
  size_t offset = 8;
  while (bytes.size() - offset >= 12) {
    const uint8_t* p = bytes.data() + offset;
    const uint32_t length = uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
    const std::string_view type(reinterpret_cast<const char*>(p + 4), 4);
    if (length > bytes.size() - offset - 12) break;
    if (type == "IDAT") seen_idat = true;
    if (type == "acTL" && !seen_idat) chunks.animated = true;
    if (type == "eXIf" && chunks.exif.empty()) chunks.exif = bytes.subspan(offset + 8, length);
    if (type == "IEND") break;
    offset += size_t{12} + length;
  }
  return chunks;
}

// libpng reports errors by longjmp. Everything that may jump lives in this class's two methods,
// whose frames hold nothing with a destructor; the caller owns the pixel buffer.
class PngReader {
 public:
  explicit PngReader(std::span<const uint8_t> bytes) : bytes_(bytes) {
    png_ = png_create_read_struct(PNG_LIBPNG_VER_STRING, this, &OnError, &OnWarning);
    if (png_ != nullptr) info_ = png_create_info_struct(png_);
  }
  ~PngReader() { png_destroy_read_struct(&png_, info_ != nullptr ? &info_ : nullptr, nullptr); }
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;

  // Reads the header and sets the transforms that end in 8-bit RGB; false with error() set.
  bool ReadHeader() {
    if (png_ == nullptr || info_ == nullptr) return Fail("libpng could not start (out of memory)");
    if (setjmp(png_jmpbuf(png_))) return false;
    png_set_read_fn(png_, this, &OnRead);
    // The dimensions are checked against ImageLimits by the caller; libpng's own cap (1,000,000 a
    // side) would refuse some shapes first, with a message of its own.
    png_set_user_limits(png_, 0x7fffffff, 0x7fffffff);
    png_read_info(png_, info_);
    width_ = png_get_image_width(png_, info_);
    height_ = png_get_image_height(png_, info_);
    const int depth = png_get_bit_depth(png_, info_);
    const int color = png_get_color_type(png_, info_);
    // 16-bit samples keep their high byte: PIL reads 16-bit RGB, RGBA and grey+alpha PNGs through
    // its "RGB;16B"-style raw modes, which take the high byte. (PIL opens 16-bit grey as mode I;16,
    // whose convert("RGB") clamps values above 255 to white; the high byte is used here instead.)
    if (depth == 16) png_set_strip_16(png_);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png_);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png_);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png_);
    // Alpha (and a palette's tRNS, which palette_to_rgb turns into alpha) is dropped, not
    // composited, as PIL's convert("RGB") does.
    png_set_strip_alpha(png_);
    png_set_interlace_handling(png_);  // png_read_image then runs every pass
    png_read_update_info(png_, info_);
    if (png_get_bit_depth(png_, info_) != 8 || png_get_channels(png_, info_) != 3 ||
        png_get_rowbytes(png_, info_) != size_t{width_} * 3) {
      return Fail("unsupported PNG layout (colour type " + std::to_string(color) + ", depth " + std::to_string(depth) + ")");
    }
    return true;
  }

  // Reads every row (all passes of an interlaced image) into `rows`.
  bool ReadPixels(png_bytepp rows) {
    if (setjmp(png_jmpbuf(png_))) return false;
    png_read_image(png_, rows);
    return true;
  }

  uint32_t width() const { return width_; }
  uint32_t height() const { return height_; }
  const char* error() const { return error_; }

 private:
  bool Fail(const std::string& message) {
    std::snprintf(error_, sizeof(error_), "%s", message.c_str());
    return false;
  }
  static void OnError(png_structp png, png_const_charp message) {
    auto* self = static_cast<PngReader*>(png_get_error_ptr(png));
    std::snprintf(self->error_, sizeof(self->error_), "%s", message);
    png_longjmp(png, 1);
  }
  static void OnWarning(png_structp, png_const_charp) {}  // benign: an odd ancillary chunk
  static void OnRead(png_structp png, png_bytep out, size_t n) {
    auto* self = static_cast<PngReader*>(png_get_io_ptr(png));
    if (self->bytes_.size() - self->offset_ < n) png_error(png, "the file is truncated");
    std::memcpy(out, self->bytes_.data() + self->offset_, n);
    self->offset_ += n;
  }

  std::span<const uint8_t> bytes_;
  size_t offset_ = 0;
  png_structp png_ = nullptr;
  png_infop info_ = nullptr;
  uint32_t width_ = 0, height_ = 0;
  char error_[256] = "";
};

}  // namespace

Result<Image> DecodePng(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  const PngChunks chunks = WalkChunks(bytes);
  if (chunks.animated) {
    return Status::Error("animated PNG (APNG) is not supported: give one frame as a still image");
  }
  PngReader reader(bytes);
  if (!reader.ReadHeader()) return Status::Error(std::string("corrupt PNG: ") + reader.error());
  RETURN_IF_ERROR(CheckDimensions(reader.width(), reader.height(), limits, "PNG"));
  Image image = MakeImage(static_cast<int>(reader.width()), static_cast<int>(reader.height()));
  std::vector<png_bytep> rows(image.height);
  for (int y = 0; y < image.height; ++y) rows[y] = image.Pixel(0, y);
  if (!reader.ReadPixels(rows.data())) return Status::Error(std::string("corrupt PNG: ") + reader.error());
  ApplyExifOrientation(image, ExifOrientation(chunks.exif));
  return image;
}

}  // namespace gemlet::media::internal
