// The encoders behind test_images.h: libpng, libjpeg, libwebp (+mux), libheif.
#include "test_images.h"

#include <cstdio>
// jpeglib.h needs size_t and FILE declared before it.
#include <jpeglib.h>
#include <libheif/heif.h>
#include <png.h>
#include <webp/encode.h>
#include <webp/mux.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define GEMLET_LSAN_OFF() __lsan_disable()
#define GEMLET_LSAN_ON() __lsan_enable()
#else
#define GEMLET_LSAN_OFF()
#define GEMLET_LSAN_ON()
#endif

#include <algorithm>
#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace gemlet::media::testing {
namespace {

int PngChannels(int color_type) {
  switch (color_type) {
    case PNG_COLOR_TYPE_GRAY: return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA: return 2;
    case PNG_COLOR_TYPE_RGB: return 3;
    case PNG_COLOR_TYPE_RGB_ALPHA: return 4;
    default: return 1;  // palette indices
  }
}

// Rows packed as the file stores them: 16-bit big-endian, sub-byte depths MSB first.
std::vector<Bytes> PackRows(const PngSpec& s) {
  const int per_row = s.width * PngChannels(s.color_type);
  std::vector<Bytes> rows(s.height);
  for (int y = 0; y < s.height; ++y) {
    Bytes& row = rows[y];
    row.assign((static_cast<size_t>(per_row) * s.bit_depth + 7) / 8, 0);
    for (int i = 0; i < per_row; ++i) {
      const uint32_t v = s.samples[static_cast<size_t>(y) * per_row + i];
      if (s.bit_depth == 16) {
        row[2 * i] = static_cast<uint8_t>(v >> 8);
        row[2 * i + 1] = static_cast<uint8_t>(v);
      } else if (s.bit_depth == 8) {
        row[i] = static_cast<uint8_t>(v);
      } else {
        const int bit = i * s.bit_depth;
        row[bit / 8] |= static_cast<uint8_t>(v << (8 - s.bit_depth - bit % 8));
      }
    }
  }
  return rows;
}

void AppendToBytes(png_structp png, png_bytep data, size_t n) {
  auto* out = static_cast<Bytes*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}

uint32_t Crc32(const uint8_t* data, size_t n, uint32_t crc = 0) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

struct JpegError {
  jpeg_error_mgr base;
  std::jmp_buf jump;
};
void JpegErrorExit(j_common_ptr cinfo) { std::longjmp(reinterpret_cast<JpegError*>(cinfo->err)->jump, 1); }

// Compresses `rows` (height rows of width * components bytes) with the colour spaces given.
Bytes CompressJpeg(int width, int height, int components, J_COLOR_SPACE in_space, J_COLOR_SPACE file_space,
                   int quality, std::span<const uint8_t> app1, const uint8_t* pixels) {
  jpeg_compress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.base);
  err.base.error_exit = &JpegErrorExit;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&cinfo);
    std::free(buffer);
    return {};
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = components;
  cinfo.in_color_space = in_space;
  jpeg_set_defaults(&cinfo);
  jpeg_set_colorspace(&cinfo, file_space);
  jpeg_set_quality(&cinfo, quality, TRUE);
  for (int c = 0; c < cinfo.num_components; ++c) {  // no chroma subsampling: 4:4:4
    cinfo.comp_info[c].h_samp_factor = 1;
    cinfo.comp_info[c].v_samp_factor = 1;
  }
  jpeg_start_compress(&cinfo, TRUE);
  if (!app1.empty()) jpeg_write_marker(&cinfo, JPEG_APP0 + 1, app1.data(), static_cast<unsigned>(app1.size()));
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels) + static_cast<size_t>(cinfo.next_scanline) * width * components;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  Bytes out(buffer, buffer + size);
  std::free(buffer);
  return out;
}

Bytes FromWebp(uint8_t* data, size_t size) {
  Bytes out(data, data + size);
  WebPFree(data);
  return out;
}

heif_error AppendHeif(heif_context*, const void* data, size_t size, void* userdata) {
  auto* out = static_cast<Bytes*>(userdata);
  out->insert(out->end(), static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + size);
  return heif_error{heif_error_Ok, heif_suberror_Unspecified, "ok"};
}

}  // namespace

Image Pattern(int width, int height) {
  Image image;
  image.width = width;
  image.height = height;
  image.rgb.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = image.Pixel(x, y);
      p[0] = static_cast<uint8_t>(x * 255 / std::max(1, width - 1));
      p[1] = static_cast<uint8_t>(y * 255 / std::max(1, height - 1));
      p[2] = static_cast<uint8_t>(((x / 2 + y / 2) % 2) * 200 + 20);
    }
  }
  return image;
}

Bytes EncodePng(const PngSpec& spec) {
  const std::vector<Bytes> packed = PackRows(spec);
  std::vector<png_bytep> rows;
  for (const Bytes& row : packed) rows.push_back(const_cast<uint8_t*>(row.data()));
  std::vector<png_color> palette;
  for (size_t i = 0; i + 2 < spec.palette.size(); i += 3) {
    palette.push_back(png_color{spec.palette[i], spec.palette[i + 1], spec.palette[i + 2]});
  }
  Bytes out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return {};
  }
  png_set_write_fn(png, &out, &AppendToBytes, nullptr);
  png_set_IHDR(png, info, spec.width, spec.height, spec.bit_depth, spec.color_type,
               spec.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  if (!spec.trns.empty()) {
    png_set_tRNS(png, info, spec.trns.data(), static_cast<int>(spec.trns.size()), nullptr);
  }
  png_write_info(png, info);
  png_write_image(png, rows.data());  // runs the interlace passes itself
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

Bytes EncodePngRgb(const Image& image) {
  PngSpec spec;
  spec.width = image.width;
  spec.height = image.height;
  spec.samples.assign(image.rgb.begin(), image.rgb.end());
  return EncodePng(spec);
}

Bytes PngChunk(const char* type, std::span<const uint8_t> data) {
  // Sized up front and filled in place (growing it byte by byte trips GCC 12's -Wstringop-overflow).
  Bytes chunk(12 + data.size());
  const auto put_u32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) chunk[at + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  };
  put_u32(0, static_cast<uint32_t>(data.size()));
  std::memcpy(chunk.data() + 4, type, 4);
  if (!data.empty()) std::memcpy(chunk.data() + 8, data.data(), data.size());
  put_u32(8 + data.size(), Crc32(chunk.data() + 4, 4 + data.size()));
  return chunk;
}

Bytes InsertPngChunk(const Bytes& png, const char* type, std::span<const uint8_t> data) {
  const size_t after_ihdr = 8 + 8 + 13 + 4;
  const Bytes chunk = PngChunk(type, data);
  Bytes out(png.size() + chunk.size());
  std::memcpy(out.data(), png.data(), after_ihdr);
  std::memcpy(out.data() + after_ihdr, chunk.data(), chunk.size());
  std::memcpy(out.data() + after_ihdr + chunk.size(), png.data() + after_ihdr, png.size() - after_ihdr);
  return out;
}

Bytes EncodeJpeg(const Image& image, int quality, std::span<const uint8_t> app1, bool grey) {
  if (!grey) return CompressJpeg(image.width, image.height, 3, JCS_RGB, JCS_YCbCr, quality, app1, image.rgb.data());
  std::vector<uint8_t> luma(static_cast<size_t>(image.width) * image.height);
  for (size_t i = 0; i < luma.size(); ++i) luma[i] = image.rgb[3 * i];
  return CompressJpeg(image.width, image.height, 1, JCS_GRAYSCALE, JCS_GRAYSCALE, quality, app1, luma.data());
}

Bytes EncodeJpegCmyk(int width, int height, const std::vector<uint8_t>& cmyk, bool ycck) {
  return CompressJpeg(width, height, 4, JCS_CMYK, ycck ? JCS_YCCK : JCS_CMYK, 95, {}, cmyk.data());
}

Bytes EncodeWebpLossless(const Image& image) {
  uint8_t* data = nullptr;
  const size_t size = WebPEncodeLosslessRGB(image.rgb.data(), image.width, image.height, image.width * 3, &data);
  return FromWebp(data, size);
}

Bytes EncodeWebpLosslessRgba(int width, int height, const std::vector<uint8_t>& rgba) {
  // exact: keep the colour under fully transparent pixels (the encoder may otherwise rewrite it).
  WebPConfig config;
  WebPConfigInit(&config);
  config.lossless = 1;
  config.exact = 1;
  WebPPicture picture;
  WebPPictureInit(&picture);
  picture.use_argb = 1;
  picture.width = width;
  picture.height = height;
  WebPPictureImportRGBA(&picture, rgba.data(), width * 4);
  WebPMemoryWriter writer;
  WebPMemoryWriterInit(&writer);
  picture.writer = WebPMemoryWrite;
  picture.custom_ptr = &writer;
  const bool ok = WebPEncode(&config, &picture) != 0;
  WebPPictureFree(&picture);
  Bytes out = ok ? Bytes(writer.mem, writer.mem + writer.size) : Bytes{};
  WebPMemoryWriterClear(&writer);
  return out;
}

Bytes EncodeWebpLossy(const Image& image, float quality) {
  uint8_t* data = nullptr;
  const size_t size = WebPEncodeRGB(image.rgb.data(), image.width, image.height, image.width * 3, quality, &data);
  return FromWebp(data, size);
}

Bytes EncodeWebpAnimated(const Image& frame0, const Image& frame1) {
  WebPAnimEncoderOptions options;
  WebPAnimEncoderOptionsInit(&options);
  WebPAnimEncoder* encoder = WebPAnimEncoderNew(frame0.width, frame0.height, &options);
  WebPConfig config;
  WebPConfigInit(&config);
  config.lossless = 1;
  int timestamp = 0;
  for (const Image* frame : {&frame0, &frame1}) {
    WebPPicture picture;
    WebPPictureInit(&picture);
    picture.use_argb = 1;
    picture.width = frame->width;
    picture.height = frame->height;
    WebPPictureImportRGB(&picture, frame->rgb.data(), frame->width * 3);
    WebPAnimEncoderAdd(encoder, &picture, timestamp, &config);
    WebPPictureFree(&picture);
    timestamp += 100;
  }
  WebPAnimEncoderAdd(encoder, nullptr, timestamp, nullptr);
  WebPData data;
  WebPDataInit(&data);
  WebPAnimEncoderAssemble(encoder, &data);
  Bytes out(data.bytes, data.bytes + data.size);
  WebPDataClear(&data);
  WebPAnimEncoderDelete(encoder);
  return out;
}

Bytes AddWebpExif(const Bytes& webp, std::span<const uint8_t> exif) {
  const WebPData image{webp.data(), webp.size()};
  WebPMux* mux = WebPMuxCreate(&image, /*copy_data=*/1);
  const WebPData chunk{exif.data(), exif.size()};
  WebPMuxSetChunk(mux, "EXIF", &chunk, /*copy_data=*/1);
  WebPData assembled;
  WebPDataInit(&assembled);
  WebPMuxAssemble(mux, &assembled);
  Bytes out(assembled.bytes, assembled.bytes + assembled.size);
  WebPDataClear(&assembled);
  WebPMuxDelete(mux);
  return out;
}

Bytes EncodeHeic(const Image& image, int quality, int orientation) {
  heif_init(nullptr);
  Bytes out;
  heif_context* context = heif_context_alloc();
  heif_encoder* encoder = nullptr;
  if (heif_context_get_encoder_for_format(context, heif_compression_HEVC, &encoder).code != heif_error_Ok) {
    heif_context_free(context);
    return {};
  }
  heif_encoder_set_lossy_quality(encoder, quality);
  heif_image* picture = nullptr;
  heif_image_create(image.width, image.height, heif_colorspace_RGB, heif_chroma_interleaved_RGB, &picture);
  heif_image_add_plane(picture, heif_channel_interleaved, image.width, image.height, 8);
  int stride = 0;
  uint8_t* plane = heif_image_get_plane(picture, heif_channel_interleaved, &stride);
  for (int y = 0; y < image.height; ++y) {
    std::memcpy(plane + static_cast<size_t>(y) * stride, image.Pixel(0, y), static_cast<size_t>(image.width) * 3);
  }
  heif_encoding_options* options = heif_encoding_options_alloc();
  options->image_orientation = static_cast<heif_orientation>(orientation);
  // Encoding through libheif's x265 plugin (x265 3.5, Debian 12) leaves 1168 bytes from each
  // x265_encoder_open unfreed after the encoder is released; only this test helper encodes, so
  // LeakSanitizer looks away here (decoding is watched as everywhere else).
  GEMLET_LSAN_OFF();
  const bool encoded = heif_context_encode_image(context, picture, encoder, options, nullptr).code == heif_error_Ok;
  GEMLET_LSAN_ON();
  heif_writer writer{1, &AppendHeif};
  if (!encoded || heif_context_write(context, &writer, &out).code != heif_error_Ok) out.clear();
  heif_encoding_options_free(options);
  heif_image_release(picture);
  heif_encoder_release(encoder);
  heif_context_free(context);
  return out;
}

Bytes ExifWithOrientation(int orientation, bool big_endian, bool exif_header) {
  Bytes out;
  if (exif_header) out = {'E', 'x', 'i', 'f', 0, 0};
  const auto u16 = [&](uint16_t v) {
    out.push_back(static_cast<uint8_t>(big_endian ? v >> 8 : v));
    out.push_back(static_cast<uint8_t>(big_endian ? v : v >> 8));
  };
  const auto u32 = [&](uint32_t v) {
    if (big_endian) { u16(static_cast<uint16_t>(v >> 16)); u16(static_cast<uint16_t>(v)); }
    else { u16(static_cast<uint16_t>(v)); u16(static_cast<uint16_t>(v >> 16)); }
  };
  out.push_back(big_endian ? 'M' : 'I');
  out.push_back(big_endian ? 'M' : 'I');
  u16(42);
  u32(8);       // IFD0 right after the header
  u16(2);       // two entries: an unrelated one first
  u16(0x010f);  // Make, ASCII, 4 bytes in place
  u16(2);
  u32(4);
  for (uint8_t c : {'a', 'b', 'c', '\0'}) out.push_back(c);
  u16(0x0112);  // Orientation, SHORT, 1 value in place (padded to 4 bytes)
  u16(3);
  u32(1);
  u16(static_cast<uint16_t>(orientation));
  u16(0);
  u32(0);       // no next IFD
  return out;
}

int MaxPixelDiff(const Image& a, const Image& b) {
  if (a.width != b.width || a.height != b.height || a.rgb.size() != b.rgb.size()) return 256;
  int worst = 0;
  for (size_t i = 0; i < a.rgb.size(); ++i) worst = std::max(worst, std::abs(int{a.rgb[i]} - int{b.rgb[i]}));
  return worst;
}

Bytes ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace gemlet::media::testing
