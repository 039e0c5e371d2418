// Fuzz target: bytes through decodeImage (libpng and libjpeg-turbo, their
// errors caught by longjmp): refused with an error naming the image, or
// decoded to an RGB image with as many bytes as pixels times 3; a decoded
// image is resized (bilinear and nearest) and preprocessed without crashing.
#include "runtime/host/Image.h"
#include "tests/fuzz/FuzzUtil.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  auto image = transfuse::rt::decodeImage(bytes, "fuzz.img");
  if (!image.isOk()) {
    FUZZ_CHECK(image.status().message().find("fuzz.img") != std::string::npos, "%s",
               image.status().message().c_str());
    return 0;
  }
  FUZZ_CHECK(image->width > 0 && image->height > 0 &&
                 image->rgb.size() == static_cast<size_t>(image->width * image->height * 3),
             "decoded %lldx%lld with %zu bytes", static_cast<long long>(image->width),
             static_cast<long long>(image->height), image->rgb.size());
  if (image->width * image->height > (1 << 20)) return 0;  // keep each run short
  transfuse::rt::ImagePreprocessing prep;
  prep.height = 7;
  prep.width = 5;
  std::vector<float> pixels(3 * 7 * 5);
  for (auto filter : {transfuse::rt::Resample::kBilinear, transfuse::rt::Resample::kNearest}) {
    prep.resample = filter;
    FUZZ_CHECK(transfuse::rt::preprocessImage(*image, prep, pixels.data()).isOk(),
               "preprocessing a decoded image failed");
  }
  return 0;
}
