// The EXIF orientation: the TIFF reader on good and hostile blocks, the eight transforms against
// grids worked out by hand from PIL's transposes, and the orientation applied end to end in JPEG
// (APP1), PNG (eXIf), WebP (EXIF chunk) and HEIC (irot/imir).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "media/exif.h"
#include "media/image.h"
#include "test_images.h"

namespace gemlet::media {
namespace {

using testing::Bytes;

TEST(Exif, OrientationIsReadInBothByteOrders) {
  for (int orientation = 1; orientation <= 8; ++orientation) {
    for (bool big_endian : {false, true}) {
      for (bool header : {false, true}) {
        EXPECT_EQ(ExifOrientation(testing::ExifWithOrientation(orientation, big_endian, header)), orientation)
            << orientation << (big_endian ? " MM" : " II") << (header ? " with Exif header" : "");
      }
    }
  }
}

TEST(Exif, MalformedBlocksMeanUpright) {
  EXPECT_EQ(ExifOrientation({}), 1);
  EXPECT_EQ(ExifOrientation(testing::ExifWithOrientation(0, false, false)), 1);
  EXPECT_EQ(ExifOrientation(testing::ExifWithOrientation(9, true, false)), 1);
  const Bytes good = testing::ExifWithOrientation(6, true, true);
  // Every truncation: never a read past the end, never a wrong answer other than "upright".
  for (size_t n = 0; n < good.size(); ++n) {
    const int got = ExifOrientation(std::span(good.data(), n));
    EXPECT_TRUE(got == 1 || (got == 6 && n >= good.size() - 6)) << n << " bytes gave " << got;
  }
  Bytes bad_magic = good;
  bad_magic[6 + 3] = 43;
  EXPECT_EQ(ExifOrientation(bad_magic), 1);
  Bytes far_ifd = good;
  far_ifd[6 + 4] = 0x7f;  // IFD0 offset 0x7f000008, past the end
  EXPECT_EQ(ExifOrientation(far_ifd), 1);
  Bytes huge_count = good;
  huge_count[6 + 8] = 0xff;  // 65535 entries claimed, 2 present
  huge_count[6 + 9] = 0xff;
  EXPECT_EQ(ExifOrientation(huge_count), 6);  // the tag is found before the walk runs out
  Bytes wrong_type = good;
  wrong_type[6 + 10 + 12 + 3] = 2;  // Orientation as ASCII
  EXPECT_EQ(ExifOrientation(wrong_type), 1);
}

// A 3 x 2 image whose pixels are labelled a..f (row-major), and the grids each orientation gives:
//   a b c     2: c b a   3: f e d   4: d e f   5: a d   6: d a   7: f c   8: c f
//   d e f        f e d      c b a      a b c      b e      e b      e b      b e
//                                                 c f      f c      d a      a d
TEST(Exif, EachOrientationMovesPixelsAsPilDoes) {
  Image image;
  image.width = 3;
  image.height = 2;
  for (char label : std::string("abcdef")) {
    image.rgb.push_back(static_cast<uint8_t>(label));
    image.rgb.push_back(0);
    image.rgb.push_back(0);
  }
  const std::vector<std::pair<std::string, int>> want = {
      {"abcdef", 3}, {"cbafed", 3}, {"fedcba", 3}, {"defabc", 3},
      {"adbecf", 2}, {"daebfc", 2}, {"fcebda", 2}, {"cfbead", 2}};
  for (int orientation = 1; orientation <= 8; ++orientation) {
    Image turned = image;
    ApplyExifOrientation(turned, orientation);
    std::string labels;
    for (size_t i = 0; i < turned.rgb.size(); i += 3) labels += static_cast<char>(turned.rgb[i]);
    EXPECT_EQ(labels, want[orientation - 1].first) << "orientation " << orientation;
    EXPECT_EQ(turned.width, want[orientation - 1].second) << "orientation " << orientation;
  }
}

// Quadrants of flat colour (red, green / blue, white) survive any lossy codec, so the corners
// tell where each went.
Image Quadrants(int width, int height) {
  Image image;
  image.width = width;
  image.height = height;
  image.rgb.resize(static_cast<size_t>(width) * height * 3);
  const uint8_t colours[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const uint8_t* c = colours[(y >= height / 2) * 2 + (x >= width / 2)];
      std::copy(c, c + 3, image.Pixel(x, y));
    }
  }
  return image;
}

// Which quadrant colour (0 red, 1 green, 2 blue, 3 white) a pixel is closest to.
int QuadrantAt(const Image& image, int x, int y) {
  const uint8_t* p = image.Pixel(x, y);
  if (p[0] > 128 && p[1] > 128) return 3;
  if (p[0] > 128) return 0;
  return p[1] > 128 ? 1 : 2;
}

// Orientation 6 (turn 90 degrees clockwise): the output is as tall as the input is wide, and the
// top-left corner shows what was bottom-left (blue), the top-right what was top-left (red).
void ExpectTurnedClockwise(const Image& image, int source_width, int source_height, const char* what) {
  ASSERT_EQ(image.width, source_height) << what;
  ASSERT_EQ(image.height, source_width) << what;
  EXPECT_EQ(QuadrantAt(image, 2, 2), 2) << what;
  EXPECT_EQ(QuadrantAt(image, image.width - 3, 2), 0) << what;
  EXPECT_EQ(QuadrantAt(image, 2, image.height - 3), 3) << what;
  EXPECT_EQ(QuadrantAt(image, image.width - 3, image.height - 3), 1) << what;
}

TEST(Exif, JpegApp1OrientationIsApplied) {
  const Image source = Quadrants(48, 32);
  const Bytes exif = testing::ExifWithOrientation(6, false, /*exif_header=*/true);
  auto image = DecodeImage(testing::EncodeJpeg(source, 95, exif));
  ASSERT_TRUE(image.ok()) << image.message();
  ExpectTurnedClockwise(*image, 48, 32, "JPEG");
  // An APP1 segment that is not EXIF (XMP) is ignored.
  const std::string xmp = "http://ns.adobe.com/xap/1.0/";
  auto plain = DecodeImage(testing::EncodeJpeg(source, 95, std::span(reinterpret_cast<const uint8_t*>(xmp.data()), xmp.size() + 1)));
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_EQ(plain->width, 48);
}

TEST(Exif, PngExifChunkOrientationIsApplied) {
  const Bytes png = testing::EncodePngRgb(Quadrants(40, 24));
  auto image = DecodeImage(testing::InsertPngChunk(png, "eXIf", testing::ExifWithOrientation(6, true, false)));
  ASSERT_TRUE(image.ok()) << image.message();
  ExpectTurnedClockwise(*image, 40, 24, "PNG");
}

TEST(Exif, WebpExifChunkOrientationIsApplied) {
  const Bytes webp = testing::AddWebpExif(testing::EncodeWebpLossless(Quadrants(40, 24)),
                                          testing::ExifWithOrientation(6, false, false));
  auto image = DecodeImage(webp);
  ASSERT_TRUE(image.ok()) << image.message();
  ExpectTurnedClockwise(*image, 40, 24, "WebP");
}

TEST(Exif, HeicTransformsAreApplied) {
  const Bytes heic = testing::EncodeHeic(Quadrants(64, 32), 90, /*orientation=*/6);
  if (heic.empty()) GTEST_SKIP() << "libheif has no HEVC encoder here (x265)";
  auto image = DecodeImage(heic);
  ASSERT_TRUE(image.ok()) << image.message();
  ExpectTurnedClockwise(*image, 64, 32, "HEIC");
}

}  // namespace
}  // namespace gemlet::media
