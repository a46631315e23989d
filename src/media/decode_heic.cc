// HEIC through libheif (HEVC by libde265 on Debian 12): the primary image, with the file's own
// rotation, mirroring and crop (irot, imir, clap) applied by libheif.
#include <libheif/heif.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "media/image_codecs.h"

namespace gemlet::media::internal {
namespace {

struct ContextFree {
  void operator()(heif_context* c) const { heif_context_free(c); }
};
struct HandleFree {
  void operator()(heif_image_handle* h) const { heif_image_handle_release(h); }
};
struct ImageFree {
  void operator()(heif_image* i) const { heif_image_release(i); }
};
struct OptionsFree {
  void operator()(heif_decoding_options* o) const { heif_decoding_options_free(o); }
};

Status HeifError(const heif_error& error, const char* what) {
  return Status::Error(std::string("corrupt HEIC: ") + what + ": " + (error.message != nullptr ? error.message : "?"));
}

// libheif registers its decoders in heif_init; once per process, never undone (the plugins stay
// loaded for the next image).
void InitLibheifOnce() {
  static const bool initialized = [] {
    heif_init(nullptr);
    return true;
  }();
  (void)initialized;
}

}  // namespace

Result<Image> DecodeHeic(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  InitLibheifOnce();
  std::unique_ptr<heif_context, ContextFree> context(heif_context_alloc());
  if (!context) return Status::Error("libheif could not start (out of memory)");
  // A grid image's tiles and output size come from its own data, not from the ispe checked below:
  // a 570-byte file found by fuzzing declared a grid that made libheif allocate over 2 GB. libheif's
  // limit per side (default 32768: 3 GB of RGB) is lowered to twice the side of a square of
  // max_pixels (at least 4096, so that the header check below words the refusal of a small limit),
  // which bounds any allocation to 4 x max_pixels pixels; real photos stay far inside.
  const double side = std::clamp(2.0 * std::sqrt(static_cast<double>(limits.max_pixels)), 4096.0, 32768.0);
  heif_context_set_maximum_image_size_limit(context.get(), static_cast<int>(side));
  // The bytes outlive the context, so libheif reads them in place.
  heif_error error = heif_context_read_from_memory_without_copy(context.get(), bytes.data(), bytes.size(), nullptr);
  if (error.code != heif_error_Ok) return HeifError(error, "cannot read the file");
  heif_image_handle* raw_handle = nullptr;
  error = heif_context_get_primary_image_handle(context.get(), &raw_handle);
  if (error.code != heif_error_Ok) return HeifError(error, "no primary image");
  std::unique_ptr<heif_image_handle, HandleFree> handle(raw_handle);
  // The size before the transformations (ispe): a rotation only swaps the sides and a crop only
  // shrinks them, so this bounds what decoding allocates.
  const int ispe_w = heif_image_handle_get_ispe_width(handle.get());
  const int ispe_h = heif_image_handle_get_ispe_height(handle.get());
  RETURN_IF_ERROR(CheckDimensions(ispe_w < 0 ? 0 : ispe_w, ispe_h < 0 ? 0 : ispe_h, limits, "HEIC"));

  std::unique_ptr<heif_decoding_options, OptionsFree> options(heif_decoding_options_alloc());
  if (!options) return Status::Error("libheif could not start (out of memory)");
  options->ignore_transformations = 0;  // irot/imir/clap applied (libheif's default, stated)
  options->convert_hdr_to_8bit = 1;     // 10-bit HEIC to 8-bit RGB
  heif_image* raw_image = nullptr;
  // interleaved_RGB has no alpha plane: alpha is dropped, as PIL's convert("RGB") does.
  error = heif_decode_image(handle.get(), &raw_image, heif_colorspace_RGB, heif_chroma_interleaved_RGB, options.get());
  if (error.code != heif_error_Ok) return HeifError(error, "the image data does not decode");
  std::unique_ptr<heif_image, ImageFree> decoded(raw_image);
  const int width = heif_image_get_width(decoded.get(), heif_channel_interleaved);
  const int height = heif_image_get_height(decoded.get(), heif_channel_interleaved);
  RETURN_IF_ERROR(CheckDimensions(width < 0 ? 0 : width, height < 0 ? 0 : height, limits, "HEIC"));
  int stride = 0;
  const uint8_t* plane = heif_image_get_plane_readonly(decoded.get(), heif_channel_interleaved, &stride);
  if (plane == nullptr || stride < width * 3) return Status::Error("corrupt HEIC: no RGB plane after decoding");
  Image image = MakeImage(width, height);
  for (int y = 0; y < height; ++y) {
    std::memcpy(image.Pixel(0, y), plane + static_cast<size_t>(y) * stride, static_cast<size_t>(width) * 3);
  }
  // The EXIF orientation of a HEIC is not applied on top: HEIF (ISO/IEC 23008-12) makes irot/imir
  // authoritative, and libheif has applied them; applying both would turn a photo twice.
  return image;
}

}  // namespace gemlet::media::internal
