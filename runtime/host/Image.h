// Images in for vision models: PNG and JPEG files decoded with Debian's
// libpng and libjpeg-turbo (the decoders Pillow uses), converted to 8-bit
// RGB, resized and normalized as a Hugging Face directory's
// preprocessor_config.json says (ViTImageProcessor and its relatives), into
// the pixel_values [3, H, W] a model takes.
//
// Conversion to RGB follows Pillow's convert("RGB"), which Hugging Face
// applies: grey is repeated, alpha is dropped (not composited), palettes are
// expanded, 16-bit RGB samples keep their high byte. One difference: a
// 16-bit greyscale PNG is scaled to 8 bits here (its high byte) where Pillow
// clips its values at 255 (a white image for most photographs).
//
// Resizing is Pillow's Image.resize (Pillow 13): a separable convolution,
// rows then columns (columns first when the height shrinks by more than
// twice as many pixels as the width), with the filter stretched by the scale
// when shrinking (antialiasing), coefficients in 22-bit fixed point and each
// pass rounded to 8 bits; nearest-neighbour samples each pixel's centre.
// docs/vision.md gives what was measured against Hugging Face's processors.
#ifndef TRANSFUSE_RUNTIME_HOST_IMAGE_H
#define TRANSFUSE_RUNTIME_HOST_IMAGE_H

#include "runtime/Status.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace transfuse::rt {

// 8-bit RGB, rows top to bottom, pixels interleaved (r, g, b).
struct Image {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;
};

// The largest image decoded (width · height), against decompression bombs.
constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

// Decodes `bytes` (a PNG or a JPEG, told by its signature); errors name
// `name`: not a PNG or JPEG, truncated or corrupt (the decoder's words), zero
// or too many pixels.
StatusOr<Image> decodeImage(const std::vector<uint8_t>& bytes, const std::string& name);
// The same on the file at `path`.
StatusOr<Image> readImage(const std::string& path);

// Pillow's resampling filters, by Pillow's numbers (preprocessor_config's
// "resample").
enum class Resample { kNearest = 0, kLanczos = 1, kBilinear = 2, kBicubic = 3, kBox = 4, kHamming = 5 };

Image resize(const Image& image, int64_t width, int64_t height, Resample filter);

// What preprocessor_config.json asks of an image (the keys of
// ViTImageProcessor; BaseImageProcessor's defaults where a key is absent).
struct ImagePreprocessing {
  bool resize = true;
  int64_t height = 224, width = 224;
  Resample resample = Resample::kBilinear;
  bool rescale = true;
  double rescaleFactor = 1.0 / 255.0;
  bool normalize = true;
  std::array<double, 3> mean = {0.5, 0.5, 0.5}, std = {0.5, 0.5, 0.5};
};

// Reads preprocessor_config.json at `path`; errors name the file and the
// key. Keys that change the pixels and are not supported (center crop, a
// shortest-edge size, padding) are refused by name.
StatusOr<ImagePreprocessing> readPreprocessorConfig(const std::string& path);

// pixel_values [3, height, width] of `image` (out holds 3·height·width
// floats; without resizing the image must already have that size):
// resized, then (x · rescaleFactor - mean) / std per channel, in double and
// rounded once, as NumPy does.
Status preprocessImage(const Image& image, const ImagePreprocessing& p, float* out);

}  // namespace transfuse::rt

#endif  // TRANSFUSE_RUNTIME_HOST_IMAGE_H
