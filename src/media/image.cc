// DecodeImage and LoadImageFile: the format sniffed from the first bytes, the limits, the dispatch to
// one decoder per format.
#include "media/image.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>

#include "media/image_codecs.h"

namespace gemlet::media {
namespace {

bool StartsWith(std::span<const uint8_t> bytes, size_t offset, std::string_view magic) {
  return bytes.size() >= offset + magic.size() && std::memcmp(bytes.data() + offset, magic.data(), magic.size()) == 0;
}

// HEIF brands whose images are HEVC-coded (ISO/IEC 23008-12 and the HEVC image brands); a file whose
// major brand is generic (mif1, msf1) says HEVC in its compatible brands. AVIF (av1 in the same
// container) is not among them.
bool IsHeicBrand(std::string_view brand) {
  return brand == "heic" || brand == "heix" || brand == "heim" || brand == "heis" || brand == "hevc" || brand == "hevx";
}

bool LooksLikeHeic(std::span<const uint8_t> bytes) {
  if (!StartsWith(bytes, 4, "ftyp") || bytes.size() < 16) return false;
  const auto brand_at = [&](size_t offset) {
    return std::string_view(reinterpret_cast<const char*>(bytes.data() + offset), 4);
  };
  if (IsHeicBrand(brand_at(8))) return true;
  const uint32_t box_size = uint32_t{bytes[0]} << 24 | uint32_t{bytes[1]} << 16 | uint32_t{bytes[2]} << 8 | bytes[3];
  const size_t end = std::min<size_t>(box_size, bytes.size());
  for (size_t offset = 16; offset + 4 <= end; offset += 4) {
    if (IsHeicBrand(brand_at(offset))) return true;
  }
  return false;
}

// What an unreadable file seems to be, for the message ("" when nothing is recognised).
const char* Resemblance(std::span<const uint8_t> bytes) {
  if (StartsWith(bytes, 0, "GIF8")) return "GIF";
  if (StartsWith(bytes, 0, "BM")) return "BMP";
  if (StartsWith(bytes, 0, "II*") || StartsWith(bytes, 0, "MM")) return "TIFF";
  if (StartsWith(bytes, 4, "ftypavif") || StartsWith(bytes, 4, "ftypavis")) return "AVIF";
  if (StartsWith(bytes, 4, "ftyp")) return "an ISO media file (MP4, MOV, ...)";
  if (StartsWith(bytes, 0, "%PDF")) return "PDF";
  if (StartsWith(bytes, 0, "<") || StartsWith(bytes, 0, "<?xml")) return "text or markup (SVG?)";
  return "";
}

}  // namespace

const char* ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kHeic: return "HEIC";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat SniffImageFormat(std::span<const uint8_t> bytes) {
  if (StartsWith(bytes, 0, "\x89PNG\r\n\x1a\n")) return ImageFormat::kPng;
  if (StartsWith(bytes, 0, "\xff\xd8\xff")) return ImageFormat::kJpeg;
  if (StartsWith(bytes, 0, "RIFF") && StartsWith(bytes, 8, "WEBP")) return ImageFormat::kWebp;
  if (LooksLikeHeic(bytes)) return ImageFormat::kHeic;
  return ImageFormat::kUnknown;
}

Result<Image> DecodeImage(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  if (bytes.empty()) return Status::Error("the image is empty (0 bytes)");
  if (bytes.size() > limits.max_bytes) {
    return Status::Error("the image is " + std::to_string(bytes.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_bytes) + " bytes");
  }
  switch (SniffImageFormat(bytes)) {
    case ImageFormat::kPng: return internal::DecodePng(bytes, limits);
    case ImageFormat::kJpeg: return internal::DecodeJpeg(bytes, limits);
    case ImageFormat::kWebp: return internal::DecodeWebp(bytes, limits);
    case ImageFormat::kHeic: return internal::DecodeHeic(bytes, limits);
    case ImageFormat::kUnknown: break;
  }
  std::string message = "not an image gemlet can read: PNG, JPEG, WebP or HEIC";
  if (const char* like = Resemblance(bytes); *like != '\0') message += std::string(" (this looks like ") + like + ")";
  return Status::Error(message);
}

Result<Image> LoadImageFile(const std::string& path, const ImageLimits& limits) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::Error("cannot open image '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::Error("image '" + path + "' is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > limits.max_bytes) {
    return Status::Error("image '" + path + "' is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                         std::to_string(limits.max_bytes) + " bytes");
  }
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) return Status::Error("cannot open image '" + path + "': " + std::strerror(errno));
  // One byte more than the limit allows shows a file that grew since stat.
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size) + 1);
  const size_t got = std::fread(bytes.data(), 1, bytes.size(), file.get());
  if (std::ferror(file.get())) return Status::Error("cannot read image '" + path + "'");
  bytes.resize(got);
  auto image = DecodeImage(bytes, limits);
  if (!image.ok()) return image.status().WithContext("image '" + path + "'");
  return image;
}

namespace internal {

Status CheckDimensions(uint64_t width, uint64_t height, const ImageLimits& limits, const char* format) {
  if (width == 0 || height == 0) {
    return Status::Error(std::string(format) + " image has no pixels (" + std::to_string(width) + " x " +
                         std::to_string(height) + ")");
  }
  // Both sides fit in 32 bits in every format read here, so the product cannot overflow.
  const uint64_t pixels = width * height;
  if (pixels > limits.max_pixels || width > 0x7fffffff || height > 0x7fffffff) {
    return Status::Error(std::string(format) + " image is " + std::to_string(width) + " x " + std::to_string(height) +
                         " = " + std::to_string(pixels) + " pixels, over the limit of " +
                         std::to_string(limits.max_pixels) + " pixels");
  }
  return Status::Ok();
}

Image MakeImage(int width, int height) {
  Image image;
  image.width = width;
  image.height = height;
  image.rgb.assign(static_cast<size_t>(width) * height * 3, 0);
  return image;
}

}  // namespace internal
}  // namespace gemlet::media
