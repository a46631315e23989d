// ResizeImage: a case worked out by hand, invariants (identity, flat images), and agreement with a
// direct double-precision evaluation of the antialiased filters. The bit-exact check against
// PyTorch is the preprocessing goldens' (image_preprocess_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "media/resize.h"
#include "test_images.h"

namespace gemlet::media {
namespace {

Image Row(std::vector<uint8_t> grey) {
  Image image;
  image.width = static_cast<int>(grey.size());
  image.height = 1;
  for (uint8_t v : grey) image.rgb.resize(image.rgb.size() + 3, v);
  return image;
}

TEST(Resize, HalvingARowByHand) {
  // 4 -> 2, bilinear: scale 2, support 2. Output 0 is centred at 1.0 and reads inputs 0..2 with
  // triangle weights (1 - |x + 0.5 - 1| / 2) = 3/4, 3/4, 1/4, i.e. 3/7, 3/7, 1/7 after
  // normalising; output 1 (centre 3.0) reads inputs 1..3 with 1/7, 3/7, 3/7.
  // (0*3 + 70*3 + 140) / 7 = 50 and (70 + 140*3 + 210*3) / 7 = 160.
  auto out = ResizeImage(Row({0, 70, 140, 210}), 2, 1, Resample::kBilinear);
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(out->rgb, (std::vector<uint8_t>{50, 50, 50, 160, 160, 160}));
}

TEST(Resize, SameSizeIsIdentityAndFlatStaysFlat) {
  const Image pattern = testing::Pattern(13, 9);
  for (Resample r : {Resample::kBilinear, Resample::kBicubic}) {
    auto same = ResizeImage(pattern, 13, 9, r);
    ASSERT_TRUE(same.ok());
    EXPECT_EQ(same->rgb, pattern.rgb);
    Image flat = pattern;
    for (size_t i = 0; i < flat.rgb.size(); ++i) flat.rgb[i] = static_cast<uint8_t>(i % 3 == 0 ? 7 : i % 3 == 1 ? 128 : 251);
    for (auto [w, h] : {std::pair{5, 3}, {40, 31}, {13, 50}, {1, 1}}) {
      auto out = ResizeImage(flat, w, h, r);
      ASSERT_TRUE(out.ok());
      for (size_t i = 0; i < out->rgb.size(); ++i) {
        ASSERT_EQ(out->rgb[i], flat.rgb[i % 3]) << w << "x" << h << " byte " << i;
      }
    }
  }
}

// The antialiased filter evaluated directly: per axis, taps where the filter (stretched by the
// scale when shrinking) is non-zero, normalised; the 2-D result summed in double and rounded once.
std::vector<std::vector<double>> Weights(int in, int out, bool cubic, std::vector<int>* first) {
  const double scale = static_cast<double>(in) / out, stretch = std::max(scale, 1.0);
  const auto filter = [cubic](double x) {
    x = std::fabs(x);
    if (!cubic) return x < 1 ? 1 - x : 0.0;
    if (x < 1) return 1.5 * x * x * x - 2.5 * x * x + 1;            // Keys, a = -0.5
    if (x < 2) return -0.5 * x * x * x + 2.5 * x * x - 4 * x + 2;
    return 0.0;
  };
  std::vector<std::vector<double>> all(out);
  first->assign(out, 0);
  for (int i = 0; i < out; ++i) {
    const double centre = (i + 0.5) * scale, support = (cubic ? 2.0 : 1.0) * stretch;
    const int lo = std::max(0, static_cast<int>(std::floor(centre - support))), hi = std::min(in - 1, static_cast<int>(std::ceil(centre + support)));
    double total = 0;
    (*first)[i] = lo;
    for (int j = lo; j <= hi; ++j) {
      all[i].push_back(filter((j + 0.5 - centre) / stretch));
      total += all[i].back();
    }
    for (double& w : all[i]) w /= total;
  }
  return all;
}

Image DirectResize(const Image& in, int width, int height, bool cubic) {
  std::vector<int> x0, y0;
  const auto wx = Weights(in.width, width, cubic, &x0), wy = Weights(in.height, height, cubic, &y0);
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        double sum = 0;
        for (size_t j = 0; j < wy[y].size(); ++j) {
          for (size_t i = 0; i < wx[x].size(); ++i) sum += wy[y][j] * wx[x][i] * in.Pixel(x0[x] + static_cast<int>(i), y0[y] + static_cast<int>(j))[c];
        }
        out.Pixel(x, y)[c] = static_cast<uint8_t>(std::clamp(std::lround(sum), 0L, 255L));
      }
    }
  }
  return out;
}

// Waves within [48, 208], so that no filter overshoots [0, 255] in the width pass (where PyTorch
// clamps the intermediate image and a direct evaluation does not).
Image Waves(int width, int height) {
  Image image;
  image.width = width;
  image.height = height;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (double phase : {0.0, 1.0, 2.0}) {
        const double v = 128 + 60 * std::sin(0.7 * x + 0.4 * y + phase) + 20 * std::cos(0.23 * x * phase - 0.9 * y);
        image.rgb.push_back(static_cast<uint8_t>(std::lround(v)));
      }
    }
  }
  return image;
}

TEST(Resize, AgreesWithTheFiltersEvaluatedDirectly) {
  // The integer path rounds the weights to int16 and the width pass to uint8 before the height
  // pass: within 1 of the direct value for the triangle, 2 for the cubic (its negative lobes can
  // amplify the intermediate rounding).
  const Image pattern = Waves(61, 43);
  for (bool cubic : {false, true}) {
    for (auto [w, h] : {std::pair{20, 14}, {97, 61}, {64, 64}, {120, 72}, {7, 90}}) {
      auto out = ResizeImage(pattern, w, h, cubic ? Resample::kBicubic : Resample::kBilinear);
      ASSERT_TRUE(out.ok());
      EXPECT_LE(testing::MaxPixelDiff(*out, DirectResize(pattern, w, h, cubic)), cubic ? 2 : 1)
          << (cubic ? "bicubic " : "bilinear ") << w << "x" << h;
    }
  }
}

TEST(Resize, ResampleCodesAndBadSizes) {
  EXPECT_EQ(*ResampleFromPil(2), Resample::kBilinear);
  EXPECT_EQ(*ResampleFromPil(3), Resample::kBicubic);
  for (int code : {0, 1, 4, 5, -1}) {
    auto r = ResampleFromPil(code);
    ASSERT_FALSE(r.ok()) << code;
    EXPECT_NE(r.message().find("bilinear (2) and bicubic (3)"), std::string::npos);
  }
  EXPECT_FALSE(ResizeImage(testing::Pattern(4, 4), 0, 3, Resample::kBilinear).ok());
  EXPECT_FALSE(ResizeImage(Image{}, 3, 3, Resample::kBilinear).ok());
}

}  // namespace
}  // namespace gemlet::media
