// Image decoding, resizing and preprocessing (runtime/host/Image.h) against
// what each step must give by definition: resizing a constant image keeps
// it, a box filter halving an image averages 2x2 blocks (rounded as
// Pillow's fixed point does), nearest samples pixel centres, bilinear
// upsampling interpolates; preprocessing rescales and normalizes per
// channel into CHW; bad bytes are refused naming the image. (Equality with
// Pillow and Hugging Face's processors on real files: tests/oracle/vit_e2e.py.)
#include "runtime/host/Image.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

namespace transfuse::rt {
namespace {

Image make(int64_t w, int64_t h, uint8_t (*pixel)(int64_t x, int64_t y, int c)) {
  Image im;
  im.width = w;
  im.height = h;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) im.rgb.push_back(pixel(x, y, c));
  return im;
}

uint8_t at(const Image& im, int64_t x, int64_t y, int c) { return im.rgb[(y * im.width + x) * 3 + c]; }

TEST(Image, ResizingAConstantImageKeepsIt) {
  const Image flat = make(13, 7, [](int64_t, int64_t, int c) { return uint8_t(40 + 70 * c); });
  for (Resample f : {Resample::kNearest, Resample::kLanczos, Resample::kBilinear,
                     Resample::kBicubic, Resample::kBox, Resample::kHamming})
    for (auto [w, h] : {std::pair{5, 3}, {29, 11}, {13, 2}}) {
      Image r = resize(flat, w, h, f);
      ASSERT_EQ(r.width, w);
      ASSERT_EQ(r.height, h);
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          for (int c = 0; c < 3; ++c)
            ASSERT_EQ(at(r, x, y, c), 40 + 70 * c) << "filter " << int(f) << " at " << x << "," << y;
    }
}

TEST(Image, BoxHalvingAveragesBlocks) {
  const Image im = make(8, 6, [](int64_t x, int64_t y, int c) { return uint8_t((x * 37 + y * 11 + c * 5) % 256); });
  const Image r = resize(im, 4, 3, Resample::kBox);
  for (int64_t y = 0; y < 3; ++y)
    for (int64_t x = 0; x < 4; ++x)
      for (int c = 0; c < 3; ++c) {
        // Rows first, rounded to 8 bits, then columns: as Pillow does.
        auto row = [&](int64_t yy) {
          return std::floor((at(im, 2 * x, yy, c) + at(im, 2 * x + 1, yy, c)) / 2.0 + 0.5);
        };
        const double want = std::floor((row(2 * y) + row(2 * y + 1)) / 2.0 + 0.5);
        ASSERT_EQ(at(r, x, y, c), want) << x << "," << y << "," << c;
      }
}

TEST(Image, NearestSamplesPixelCentres) {
  const Image im = make(6, 4, [](int64_t x, int64_t y, int c) { return uint8_t(x * 40 + y * 3 + c); });
  const Image r = resize(im, 4, 3, Resample::kNearest);
  for (int64_t y = 0; y < 3; ++y)
    for (int64_t x = 0; x < 4; ++x) {
      const int64_t sx = static_cast<int64_t>((x + 0.5) * 6 / 4), sy = static_cast<int64_t>((y + 0.5) * 4 / 3);
      for (int c = 0; c < 3; ++c) ASSERT_EQ(at(r, x, y, c), at(im, sx, sy, c));
    }
}

TEST(Image, BilinearDoublingInterpolates) {
  // A horizontal ramp 0, 100, 200 doubled: output centres at 0.25, 0.75, ...
  // of an input pixel, weights 3/4 and 1/4 inside, the edge pixel alone at the ends.
  const Image im = make(3, 1, [](int64_t x, int64_t, int) { return uint8_t(100 * x); });
  const Image r = resize(im, 6, 1, Resample::kBilinear);
  const int want[] = {0, 25, 75, 125, 175, 200};
  for (int64_t x = 0; x < 6; ++x) EXPECT_EQ(at(r, x, 0, 0), want[x]) << x;
}

// Each pass rounds to 8 bits, so the order of the passes shows: columns
// first when the height shrinks by more than twice as many pixels as the
// width (Pillow 13), rows first otherwise.
TEST(Image, PassOrderFollowsPillow) {
  const Image tall = make(24, 40, [](int64_t x, int64_t y, int c) { return uint8_t((x * 53 + y * 29 + c * 71) % 256); });
  const Image wide = make(40, 24, [](int64_t x, int64_t y, int c) { return uint8_t((x * 29 + y * 53 + c * 71) % 256); });
  for (Resample f : {Resample::kBilinear, Resample::kBicubic, Resample::kLanczos}) {
    const Image columnsFirst = resize(resize(tall, 24, 32, f), 32, 32, f);
    const Image rowsFirst = resize(resize(tall, 32, 40, f), 32, 32, f);
    ASSERT_NE(columnsFirst.rgb, rowsFirst.rgb) << "the orders should differ on this image";
    EXPECT_EQ(resize(tall, 32, 32, f).rgb, columnsFirst.rgb) << "filter " << int(f);
    EXPECT_EQ(resize(wide, 32, 32, f).rgb, resize(resize(wide, 32, 24, f), 32, 32, f).rgb)
        << "filter " << int(f);
  }
}

TEST(Image, PreprocessRescalesAndNormalizesIntoChw) {
  const Image im = make(2, 2, [](int64_t x, int64_t y, int c) { return uint8_t(10 * (x + 2 * y) + 100 * c); });
  ImagePreprocessing p;
  p.width = p.height = 2;
  p.mean = {0.1, 0.2, 0.3};
  p.std = {0.5, 0.25, 2.0};
  float out[12];
  ASSERT_TRUE(preprocessImage(im, p, out).isOk());
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[c * 4 + i], static_cast<float>(((10 * i + 100 * c) / 255.0 - p.mean[c]) / p.std[c]));
  p.resize = false;
  p.width = 3;
  Status s = preprocessImage(im, p, out);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("the model takes 3x2"), std::string::npos) << s.message();
}

TEST(Image, BadBytesAreRefusedNamingTheImage) {
  const std::vector<std::pair<std::vector<uint8_t>, std::string>> cases = {
      {{}, "the file is empty"},
      {{'G', 'I', 'F', '8', '9', 'a'}, "not a PNG or JPEG image"},
      {{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0}, "not a valid PNG"},
      {{0xff, 0xd8, 0xff, 0xe0, 0, 16}, "not a valid JPEG"},
  };
  for (const auto& [bytes, expect] : cases) {
    auto r = decodeImage(bytes, "pic.x");
    ASSERT_FALSE(r.isOk()) << expect;
    EXPECT_NE(r.status().message().find("pic.x: " + expect), std::string::npos)
        << r.status().message();
  }
}

// preprocessor_config.json: what ViTImageProcessor writes is read; each key
// that would change the pixels in a way not supported is refused by name.
TEST(Image, PreprocessorConfigKeysAreReadOrRefusedByName) {
  const std::string path = ::testing::TempDir() + "/preprocessor_config.json";
  auto read = [&](const std::string& text) {
    std::ofstream(path) << text;
    return readPreprocessorConfig(path);
  };
  auto p = read(R"({"do_normalize": true, "do_rescale": true, "do_resize": true,
                    "image_mean": [0.485, 0.456, 0.406], "image_std": 0.25, "resample": 3,
                    "rescale_factor": 0.00392156862745098, "size": {"height": 384, "width": 320},
                    "image_processor_type": "ViTImageProcessor"})");
  ASSERT_TRUE(p.isOk()) << p.status().message();
  EXPECT_EQ(p->height, 384);
  EXPECT_EQ(p->width, 320);
  EXPECT_EQ(p->resample, Resample::kBicubic);
  EXPECT_EQ(p->mean[2], 0.406);
  EXPECT_EQ(p->std[1], 0.25);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"do_center_crop": true})", "key 'do_center_crop': not supported"},
      {R"({"do_pad": true})", "key 'do_pad': not supported"},
      {R"({"size": {"shortest_edge": 224}})", "key 'size': expected"},
      {R"({"image_std": [0.5, 0, 0.5]})", "key 'image_std': expected numbers > 0"},
      {R"({"image_mean": [0.5, 0.5]})", "key 'image_mean': expected 3 numbers"},
      {R"({"resample": 9})", "key 'resample': expected one of Pillow's filters"},
      {R"({"do_resize": "yes"})", "key 'do_resize': expected true or false"},
      {R"([1, 2])", "not a JSON object"},
  };
  for (const auto& [text, expect] : bad) {
    auto r = read(text);
    ASSERT_FALSE(r.isOk()) << text;
    EXPECT_NE(r.status().message().find(path + ": "), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace transfuse::rt
