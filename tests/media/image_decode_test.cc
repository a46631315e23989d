// DecodeImage and LoadImageFile on files made here by the Debian encoders (and one committed HEIC):
// exact round trips for the lossless formats, colour conversions, and one clear error for every
// refused input.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/test_util.h"
#include "media/image.h"
#include "test_images.h"

namespace gemlet::media {
namespace {

using testing::Bytes;

// A smooth image (no hard edges), for the lossy formats' tolerances.
Image Smooth(int width, int height) {
  Image image;
  image.width = width;
  image.height = height;
  image.rgb.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = image.Pixel(x, y);
      p[0] = static_cast<uint8_t>(40 + x * 160 / width);
      p[1] = static_cast<uint8_t>(60 + y * 150 / height);
      p[2] = static_cast<uint8_t>(120 + (x + y) * 80 / (width + height));
    }
  }
  return image;
}

Image Decoded(const Bytes& bytes, const ImageLimits& limits = {}) {
  auto image = DecodeImage(bytes, limits);
  EXPECT_TRUE(image.ok()) << image.message();
  return image.ok() ? std::move(image).value() : Image{};
}

std::string ErrorOf(const Bytes& bytes, const ImageLimits& limits = {}) {
  auto image = DecodeImage(bytes, limits);
  EXPECT_FALSE(image.ok()) << "decoded a " << image->width << " x " << image->height << " image";
  return image.ok() ? std::string() : image.message();
}

// Every prefix shorter than `end` (the file, by default) is refused with a message, in steps: no
// crash, no read past the end (the sanitizer build runs this too).
void ExpectEveryTruncationRefused(const Bytes& bytes, size_t step, size_t end = 0) {
  if (end == 0) end = bytes.size();
  for (size_t n = 1; n < end; n += step) {
    const Bytes cut(bytes.begin(), bytes.begin() + n);
    auto image = DecodeImage(cut);
    EXPECT_FALSE(image.ok()) << "a prefix of " << n << " of " << bytes.size() << " bytes decoded";
    if (!image.ok()) {
      EXPECT_FALSE(image.message().empty());
    }
  }
}

TEST(ImageDecode, PngRgbRoundTripIsExact) {
  const Image pattern = testing::Pattern(37, 23);
  const Image image = Decoded(testing::EncodePngRgb(pattern));
  EXPECT_EQ(image.width, 37);
  EXPECT_EQ(image.height, 23);
  EXPECT_EQ(testing::MaxPixelDiff(image, pattern), 0);
}

TEST(ImageDecode, PngInterlacedRoundTripIsExact) {
  const Image pattern = testing::Pattern(29, 17);
  testing::PngSpec spec{29, 17, 2, 8, /*interlaced=*/true, {pattern.rgb.begin(), pattern.rgb.end()}, {}, {}};
  EXPECT_EQ(testing::MaxPixelDiff(Decoded(testing::EncodePng(spec)), pattern), 0);
}

TEST(ImageDecode, PngGreyOfEveryDepthBecomesRgb) {
  // PIL's L (and 1) modes: a sample of depth d scales to 8 bits by 255 / (2^d - 1).
  for (int depth : {1, 2, 4, 8}) {
    const int max = (1 << depth) - 1;
    testing::PngSpec spec{9, 2, 0, depth, false, {}, {}, {}};
    for (int i = 0; i < 18; ++i) spec.samples.push_back(static_cast<uint32_t>(i % (max + 1)));
    const Image image = Decoded(testing::EncodePng(spec));
    ASSERT_EQ(image.width, 9) << depth;
    for (int i = 0; i < 18; ++i) {
      const uint8_t want = static_cast<uint8_t>(spec.samples[i] * 255 / max);
      const uint8_t* p = image.Pixel(i % 9, i / 9);
      EXPECT_TRUE(p[0] == want && p[1] == want && p[2] == want) << "depth " << depth << " sample " << i;
    }
  }
}

TEST(ImageDecode, PngAlphaIsDroppedNotComposited) {
  // Grey+alpha and RGBA, with fully transparent pixels: their colour stays, as convert("RGB") keeps it.
  testing::PngSpec grey_alpha{2, 1, 4, 8, false, {200, 0, 30, 128}, {}, {}};
  Image image = Decoded(testing::EncodePng(grey_alpha));
  EXPECT_EQ((std::vector<uint8_t>(image.rgb.begin(), image.rgb.end())), (std::vector<uint8_t>{200, 200, 200, 30, 30, 30}));
  testing::PngSpec rgba{2, 1, 6, 8, false, {200, 10, 30, 0, 1, 2, 3, 255}, {}, {}};
  image = Decoded(testing::EncodePng(rgba));
  EXPECT_EQ(image.rgb, (std::vector<uint8_t>{200, 10, 30, 1, 2, 3}));
}

TEST(ImageDecode, PngPaletteWithTransparencyGivesPaletteColours) {
  testing::PngSpec spec{3, 1, 3, 8, false, {2, 0, 1}, {10, 20, 30, 40, 50, 60, 70, 80, 90}, {0, 128, 255}};
  EXPECT_EQ(Decoded(testing::EncodePng(spec)).rgb, (std::vector<uint8_t>{70, 80, 90, 10, 20, 30, 40, 50, 60}));
  spec.bit_depth = 2;  // packed indices
  EXPECT_EQ(Decoded(testing::EncodePng(spec)).rgb, (std::vector<uint8_t>{70, 80, 90, 10, 20, 30, 40, 50, 60}));
}

TEST(ImageDecode, Png16BitKeepsTheHighByte) {
  testing::PngSpec rgb16{2, 1, 2, 16, false, {0x1234, 0xffff, 0x00ff, 0x8000, 0x80ff, 0x0100}, {}, {}};
  EXPECT_EQ(Decoded(testing::EncodePng(rgb16)).rgb, (std::vector<uint8_t>{0x12, 0xff, 0x00, 0x80, 0x80, 0x01}));
  testing::PngSpec grey16{2, 1, 0, 16, false, {0xabcd, 0x0042}, {}, {}};
  EXPECT_EQ(Decoded(testing::EncodePng(grey16)).rgb, (std::vector<uint8_t>{0xab, 0xab, 0xab, 0, 0, 0}));
  testing::PngSpec rgba16{1, 1, 6, 16, false, {0xfe01, 0x7f7f, 0x0203, 0x0000}, {}, {}};
  EXPECT_EQ(Decoded(testing::EncodePng(rgba16)).rgb, (std::vector<uint8_t>{0xfe, 0x7f, 0x02}));
}

TEST(ImageDecode, AnimatedPngIsRefused) {
  const Bytes png = testing::EncodePngRgb(testing::Pattern(8, 8));
  const uint8_t actl[8] = {0, 0, 0, 2, 0, 0, 0, 0};  // 2 frames, loop forever
  EXPECT_NE(ErrorOf(testing::InsertPngChunk(png, "acTL", actl)).find("animated PNG"), std::string::npos);
}

TEST(ImageDecode, TruncatedOrCorruptPngIsRefused) {
  const Bytes png = testing::EncodePngRgb(testing::Pattern(40, 30));
  // Cut anywhere up to the end of the pixel data. A file that lacks only its IEND chunk decodes,
  // as PIL (which stops reading there) takes it.
  ExpectEveryTruncationRefused(png, 7, png.size() - 12);
  EXPECT_TRUE(DecodeImage(Bytes(png.begin(), png.end() - 12)).ok());
  Bytes bad_crc = png;
  bad_crc[8 + 8 + 5] ^= 0x40;  // inside IHDR's data
  EXPECT_NE(ErrorOf(bad_crc).find("corrupt PNG"), std::string::npos);
  Bytes bad_data = png;
  bad_data[bad_data.size() - 12 - 6] ^= 0xff;  // inside IDAT, before IEND
  EXPECT_NE(ErrorOf(bad_data).find("corrupt PNG"), std::string::npos);
}

TEST(ImageDecode, JpegRoundTripIsClose) {
  const Image smooth = Smooth(48, 40);
  const Image image = Decoded(testing::EncodeJpeg(smooth, 95));
  EXPECT_EQ(image.width, 48);
  EXPECT_EQ(image.height, 40);
  EXPECT_LE(testing::MaxPixelDiff(image, smooth), 4);
  // A grey JPEG becomes R = G = B.
  const Image grey = Decoded(testing::EncodeJpeg(smooth, 95, {}, /*grey=*/true));
  int worst = 0;
  for (int i = 0; i < grey.width * grey.height; ++i) {
    EXPECT_TRUE(grey.rgb[3 * i] == grey.rgb[3 * i + 1] && grey.rgb[3 * i] == grey.rgb[3 * i + 2]);
    worst = std::max(worst, std::abs(int{grey.rgb[3 * i]} - int{smooth.rgb[3 * i]}));
  }
  EXPECT_LE(worst, 4);
}

// Four 8x8 blocks of flat colour in CMYK ink amounts (0 = none, 255 = full), stored inverted as
// Adobe's convention has it; PIL's conversion is R = (255 - K) * (255 - C) / 255 (and so on).
TEST(ImageDecode, CmykAndYcckJpegBecomeRgb) {
  const uint8_t inks[4][4] = {{255, 0, 0, 0}, {0, 255, 0, 0}, {0, 0, 255, 0}, {0, 0, 0, 128}};
  std::vector<uint8_t> stored(16 * 16 * 4);
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 16; ++x) {
      const uint8_t* ink = inks[(y / 8) * 2 + x / 8];
      for (int c = 0; c < 4; ++c) stored[(y * 16 + x) * 4 + c] = static_cast<uint8_t>(255 - ink[c]);
    }
  }
  for (bool ycck : {false, true}) {
    const Image image = Decoded(testing::EncodeJpegCmyk(16, 16, stored, ycck));
    ASSERT_EQ(image.width, 16);
    for (int block = 0; block < 4; ++block) {
      const uint8_t* p = image.Pixel((block % 2) * 8 + 4, (block / 2) * 8 + 4);
      for (int c = 0; c < 3; ++c) {
        const int want = (255 - inks[block][3]) * (255 - inks[block][c]) / 255;
        EXPECT_NEAR(p[c], want, 3) << (ycck ? "YCCK" : "CMYK") << " block " << block << " channel " << c;
      }
    }
  }
}

TEST(ImageDecode, TruncatedOrCorruptJpegIsRefused) {
  const Bytes jpeg = testing::EncodeJpeg(Smooth(64, 48), 90);
  ExpectEveryTruncationRefused(jpeg, 23);
  // Even without just its EOI marker, as PIL refuses it ("image file is truncated").
  EXPECT_FALSE(DecodeImage(Bytes(jpeg.begin(), jpeg.end() - 2)).ok());
  Bytes garbage = jpeg;
  for (size_t i = 2; i < 40 && i < garbage.size(); ++i) garbage[i] = 0xff;
  EXPECT_NE(ErrorOf(garbage).find("corrupt JPEG"), std::string::npos);
}

TEST(ImageDecode, WebpLosslessRoundTripIsExactAndLossyIsClose) {
  const Image pattern = testing::Pattern(33, 21);
  EXPECT_EQ(testing::MaxPixelDiff(Decoded(testing::EncodeWebpLossless(pattern)), pattern), 0);
  const Image smooth = Smooth(64, 48);
  EXPECT_LE(testing::MaxPixelDiff(Decoded(testing::EncodeWebpLossy(smooth, 95)), smooth), 12);
}

TEST(ImageDecode, WebpAlphaIsDroppedNotComposited) {
  const std::vector<uint8_t> rgba = {200, 10, 30, 0, 1, 2, 3, 255, 90, 80, 70, 128};
  EXPECT_EQ(Decoded(testing::EncodeWebpLosslessRgba(3, 1, rgba)).rgb,
            (std::vector<uint8_t>{200, 10, 30, 1, 2, 3, 90, 80, 70}));
}

TEST(ImageDecode, AnimatedWebpIsRefused) {
  const Bytes webp = testing::EncodeWebpAnimated(testing::Pattern(16, 16), Smooth(16, 16));
  ASSERT_FALSE(webp.empty());
  EXPECT_NE(ErrorOf(webp).find("animated WebP"), std::string::npos);
}

TEST(ImageDecode, TruncatedWebpIsRefused) {
  ExpectEveryTruncationRefused(testing::EncodeWebpLossless(testing::Pattern(30, 20)), 5);
  ExpectEveryTruncationRefused(testing::EncodeWebpLossy(Smooth(30, 20), 80), 5);
}

// tests/data/media/quadrants.heic: 32x32, red / green over blue / white (made by heif-enc, see the
// README there).
TEST(ImageDecode, CommittedHeicDecodes) {
  const Image image = Decoded(testing::ReadFileBytes(std::string(GEMLET_MEDIA_TESTDATA) + "/quadrants.heic"));
  ASSERT_EQ(image.width, 32);
  ASSERT_EQ(image.height, 32);
  const uint8_t want[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};
  for (int q = 0; q < 4; ++q) {
    const uint8_t* p = image.Pixel((q % 2) * 16 + 8, (q / 2) * 16 + 8);
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(p[c], want[q][c], 12) << "quadrant " << q << " channel " << c;
  }
}

TEST(ImageDecode, HeicEncodedHereRoundTripsAndTruncationIsRefused) {
  const Image smooth = Smooth(64, 48);
  const Bytes heic = testing::EncodeHeic(smooth, 95);
  if (heic.empty()) GTEST_SKIP() << "libheif has no HEVC encoder here (x265)";
  const Image image = Decoded(heic);
  EXPECT_EQ(image.width, 64);
  EXPECT_EQ(image.height, 48);
  EXPECT_LE(testing::MaxPixelDiff(image, smooth), 12);
  ExpectEveryTruncationRefused(heic, 37);
}

TEST(ImageDecode, BombsAreRefusedFromTheHeader) {
  // A PNG whose IHDR claims 30000 x 30000 (2.7 GB of RGB) with a few bytes of data.
  const Bytes png = testing::EncodePngRgb(testing::Pattern(4, 4));
  Bytes ihdr(png.begin() + 16, png.begin() + 16 + 13);
  for (int at : {0, 4}) {
    ihdr[at + 2] = 0x75;  // 30000 = 0x7530, big-endian
    ihdr[at + 3] = 0x30;
  }
  Bytes forged(png.begin(), png.begin() + 8);
  const Bytes chunk = testing::PngChunk("IHDR", ihdr);
  forged.insert(forged.end(), chunk.begin(), chunk.end());
  forged.insert(forged.end(), png.begin() + 33, png.end());
  EXPECT_EQ(ErrorOf(forged), "PNG image is 30000 x 30000 = 900000000 pixels, over the limit of 50000000 pixels");

  // The same limit on real files of each format, from their headers.
  const ImageLimits small{.max_pixels = 999, .max_bytes = size_t{64} << 20};
  const Image image = Smooth(40, 25);
  EXPECT_NE(ErrorOf(testing::EncodeJpeg(image), small).find("JPEG image is 40 x 25 = 1000 pixels, over the limit of 999"),
            std::string::npos);
  EXPECT_NE(ErrorOf(testing::EncodeWebpLossless(image), small).find("WebP image is 40 x 25"), std::string::npos);
  const Bytes heic = testing::EncodeHeic(image, 50);
  if (!heic.empty()) {
    EXPECT_NE(ErrorOf(heic, small).find("HEIC image is 40 x 25"), std::string::npos);
  }
}

TEST(ImageDecode, UnknownEmptyAndOversizedInputsAreRefused) {
  const std::string gif = "GIF89a\x01\x00\x01\x00";
  EXPECT_EQ(ErrorOf(Bytes(gif.begin(), gif.end())),
            "not an image gemlet can read: PNG, JPEG, WebP or HEIC (this looks like GIF)");
  const std::string text = "hello";
  EXPECT_EQ(ErrorOf(Bytes(text.begin(), text.end())), "not an image gemlet can read: PNG, JPEG, WebP or HEIC");
  EXPECT_EQ(ErrorOf(Bytes{}), "the image is empty (0 bytes)");
  const Bytes png = testing::EncodePngRgb(testing::Pattern(8, 8));
  const ImageLimits tiny{.max_pixels = 1000, .max_bytes = 10};
  EXPECT_NE(ErrorOf(png, tiny).find("over the limit of 10 bytes"), std::string::npos);
}

TEST(ImageDecode, FormatComesFromTheBytesNotTheName) {
  test::TempDir dir;
  const Image pattern = testing::Pattern(12, 10);
  const Bytes png = testing::EncodePngRgb(pattern);
  const std::string path = dir.File("photo.jpg");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  EXPECT_EQ(SniffImageFormat(png), ImageFormat::kPng);
  auto image = LoadImageFile(path);
  ASSERT_TRUE(image.ok()) << image.message();
  EXPECT_EQ(testing::MaxPixelDiff(*image, pattern), 0);
}

TEST(ImageDecode, LoadImageFileNamesThePathInErrors) {
  test::TempDir dir;
  auto missing = LoadImageFile(dir.File("none.png"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("none.png"), std::string::npos);
  EXPECT_FALSE(LoadImageFile(dir.path()).ok());  // a directory
  const Bytes png = testing::EncodePngRgb(testing::Pattern(8, 8));
  const std::string path = dir.File("big.png");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
  auto big = LoadImageFile(path, ImageLimits{.max_pixels = 1000, .max_bytes = 16});
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.message().find("big.png"), std::string::npos);
  EXPECT_NE(big.message().find("over the limit of 16 bytes"), std::string::npos);
  const std::string text_path = dir.File("notes.png");
  std::ofstream(text_path) << "not a picture";
  auto text = LoadImageFile(text_path);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.message(), "image '" + text_path + "': not an image gemlet can read: PNG, JPEG, WebP or HEIC");
}

// A light mutation pass over one file of each format: every result is an image or a message.
TEST(ImageDecode, FlippedBytesNeverCrash) {
  std::vector<Bytes> files = {testing::EncodePngRgb(testing::Pattern(20, 12)),
                              testing::EncodeJpeg(Smooth(24, 16), 80),
                              testing::EncodeWebpLossless(testing::Pattern(20, 12)),
                              testing::EncodeWebpLossy(Smooth(24, 16), 70)};
  const Bytes heic = testing::EncodeHeic(Smooth(24, 16), 60);
  if (!heic.empty()) files.push_back(heic);
  uint32_t rng = 12345;
  for (const Bytes& file : files) {
    for (int trial = 0; trial < 60; ++trial) {
      Bytes mutated = file;
      for (int k = 0; k < 3; ++k) {
        rng = rng * 1664525u + 1013904223u;
        mutated[rng % mutated.size()] ^= static_cast<uint8_t>(1u << ((rng >> 16) % 8));
      }
      auto image = DecodeImage(mutated);
      if (image.ok()) {
        EXPECT_EQ(image->rgb.size(), static_cast<size_t>(image->width) * image->height * 3);
      } else {
        EXPECT_FALSE(image.message().empty());
      }
    }
  }
}

}  // namespace
}  // namespace gemlet::media
