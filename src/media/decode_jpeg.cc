// JPEG through libjpeg(-turbo)'s API: errors and data-losing warnings end the decode by longjmp
// (never exit()), the EXIF orientation comes from the APP1 segment, CMYK and YCCK become RGB.
#include <cstdio>
// jpeglib.h needs size_t and FILE declared before it, and jerror.h jpeglib.h's configuration.
#include <jpeglib.h>
// (after jpeglib.h)
#include <jerror.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "media/exif.h"
#include "media/image_codecs.h"

namespace gemlet::media::internal {
namespace {

// A progressive file can hold thousands of tiny scans, each a full pass over the coefficients:
// beyond this many the file is refused rather than decoded slowly (libjpeg-turbo's own fuzzers and
// djpeg -maxscans use the same guard).
constexpr int kMaxScans = 1000;

// Warnings that mean pixels are missing or wrong (libjpeg would fill them with grey and carry on);
// PIL refuses a truncated JPEG, and so does this decoder. Cosmetic warnings (an unknown JFIF
// revision, stray bytes between markers) are ignored.
bool LosesData(int code) {
  switch (code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
#if JPEG_LIB_VERSION >= 70 || defined(C_ARITH_CODING_SUPPORTED) || defined(D_ARITH_CODING_SUPPORTED)
    case JWRN_ARITH_BAD_CODE:  // declared only where arithmetic coding is built in
#endif
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_BOGUS_PROGRESSION:
      return true;
    default:
      return false;
  }
}

struct ErrorManager {
  jpeg_error_mgr base;  // first, so that cinfo->err points at the whole struct
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 64];
};

[[noreturn]] void Bail(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  std::longjmp(err->jump, 1);
}

void OnErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  Bail(cinfo);
}

void OnEmitMessage(j_common_ptr cinfo, int level) {
  if (level >= 0 || !LosesData(cinfo->err->msg_code)) return;  // trace output, or a cosmetic warning
  OnErrorExit(cinfo);
}

void OnOutputMessage(j_common_ptr) {}  // a library prints nothing

void OnProgress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  if (reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > kMaxScans) {
    auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "more than %d progressive scans", kMaxScans);
    Bail(cinfo);
  }
}

// Pillow's CMYK -> RGB for a 4-component JPEG: it reads every one as Adobe-inverted CMYK ("CMYK;I",
// Photoshop's convention, with or without an Adobe marker; libjpeg has already turned YCCK into
// that CMYK), then R = (255 - K) - (255 - K) * C / 255 with its rounding MULDIV255.
inline uint8_t CmykChannel(int stored_c, int stored_k) {
  const int c = 255 - stored_c, nk = stored_k;  // nk = 255 - K, K = 255 - stored_k
  const int t = c * nk + 128;
  const int v = nk - (((t >> 8) + t) >> 8);
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// Everything that may longjmp lives in this class's two methods, whose frames hold nothing with a
// destructor; the caller owns the buffers.
class JpegReader {
 public:
  explicit JpegReader(std::span<const uint8_t> bytes) : bytes_(bytes) {
    std::memset(&cinfo_, 0, sizeof(cinfo_));
    cinfo_.err = jpeg_std_error(&err_.base);
    err_.base.error_exit = &OnErrorExit;
    err_.base.emit_message = &OnEmitMessage;
    err_.base.output_message = &OnOutputMessage;
    err_.message[0] = '\0';
    progress_.progress_monitor = &OnProgress;
  }
  ~JpegReader() {
    if (created_) jpeg_destroy_decompress(&cinfo_);
  }
  JpegReader(const JpegReader&) = delete;
  JpegReader& operator=(const JpegReader&) = delete;

  // Reads the markers up to the first scan: dimensions, colour space, the EXIF orientation.
  bool ReadHeader() {
    if (setjmp(err_.jump)) return false;
    jpeg_create_decompress(&cinfo_);
    created_ = true;
    cinfo_.progress = &progress_;
    jpeg_mem_src(&cinfo_, bytes_.data(), static_cast<unsigned long>(bytes_.size()));
    jpeg_save_markers(&cinfo_, JPEG_APP0 + 1, 0xffff);
    if (jpeg_read_header(&cinfo_, TRUE) != JPEG_HEADER_OK) {
      std::snprintf(err_.message, sizeof(err_.message), "no image in the file (tables only)");
      return false;
    }
    // PIL keeps the first APP1 segment that starts with "Exif\0\0".
    for (jpeg_saved_marker_ptr m = cinfo_.marker_list; m != nullptr; m = m->next) {
      if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && std::memcmp(m->data, "Exif\0\0", 6) == 0) {
        orientation_ = ExifOrientation(std::span<const uint8_t>(m->data, m->data_length));
        break;
      }
    }
    switch (cinfo_.jpeg_color_space) {
      case JCS_GRAYSCALE:
      case JCS_YCbCr:
      case JCS_RGB:
        cinfo_.out_color_space = JCS_RGB;
        break;
      case JCS_CMYK:
      case JCS_YCCK:
        cinfo_.out_color_space = JCS_CMYK;
        break;
      default:
        std::snprintf(err_.message, sizeof(err_.message), "unsupported colour space (%d components)",
                      cinfo_.num_components);
        return false;
    }
    return true;
  }

  // Decodes into `image` (already sized to the header's dimensions); `row` holds one scanline of
  // up to 4 components.
  bool ReadPixels(Image* image, uint8_t* row) {
    if (setjmp(err_.jump)) return false;
    jpeg_start_decompress(&cinfo_);
    if (static_cast<int>(cinfo_.output_width) != image->width ||
        static_cast<int>(cinfo_.output_height) != image->height || cinfo_.output_components > 4) {
      std::snprintf(err_.message, sizeof(err_.message), "unexpected output layout");
      return false;
    }
    const bool cmyk = cinfo_.out_color_space == JCS_CMYK;
    while (cinfo_.output_scanline < cinfo_.output_height) {
      uint8_t* out = image->Pixel(0, static_cast<int>(cinfo_.output_scanline));
      JSAMPROW target = cmyk ? row : out;
      if (jpeg_read_scanlines(&cinfo_, &target, 1) != 1) {
        std::snprintf(err_.message, sizeof(err_.message), "the file is truncated");
        return false;
      }
      if (!cmyk) continue;
      for (int x = 0; x < image->width; ++x) {
        const uint8_t* p = row + 4 * x;
        for (int c = 0; c < 3; ++c) out[3 * x + c] = CmykChannel(p[c], p[3]);
      }
    }
    // Reads on to the EOI marker: a file cut anywhere, even just before EOI, is refused (the source
    // manager then reports JWRN_JPEG_EOF), as PIL refuses it ("image file is truncated").
    jpeg_finish_decompress(&cinfo_);
    return true;
  }

  uint32_t width() const { return cinfo_.image_width; }
  uint32_t height() const { return cinfo_.image_height; }
  int orientation() const { return orientation_; }
  const char* error() const { return err_.message; }

 private:
  std::span<const uint8_t> bytes_;
  jpeg_decompress_struct cinfo_;
  ErrorManager err_;
  jpeg_progress_mgr progress_{};
  bool created_ = false;
  int orientation_ = 1;
};

}  // namespace

Result<Image> DecodeJpeg(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  JpegReader reader(bytes);
  if (!reader.ReadHeader()) return Status::Error(std::string("corrupt JPEG: ") + reader.error());
  RETURN_IF_ERROR(CheckDimensions(reader.width(), reader.height(), limits, "JPEG"));
  Image image = MakeImage(static_cast<int>(reader.width()), static_cast<int>(reader.height()));
  std::vector<uint8_t> row(static_cast<size_t>(image.width) * 4);
  if (!reader.ReadPixels(&image, row.data())) return Status::Error(std::string("corrupt JPEG: ") + reader.error());
  ApplyExifOrientation(image, reader.orientation());
  return image;
}

}  // namespace gemlet::media::internal
