// Image decoding, resizing and preprocessing (Image.h).

#include "runtime/host/Image.h"

#include "runtime/Json.h"

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace transfuse::rt {
namespace {

Status sizeError(const std::string& name, int64_t width, int64_t height) {
  if (width <= 0 || height <= 0)
    return Status::error(name + ": the image has no pixels (" + std::to_string(width) + "x" +
                         std::to_string(height) + ")");
  return Status::error(name + ": the image is too large (" + std::to_string(width) + "x" +
                       std::to_string(height) + "; at most " + std::to_string(kMaxImagePixels) +
                       " pixels)");
}

bool sizeOk(int64_t width, int64_t height) {
  return width > 0 && height > 0 && width <= kMaxImagePixels / height;
}

//--- PNG (libpng; its errors longjmp back here) ------------------------------

struct PngState {
  const std::vector<uint8_t>* bytes;
  size_t at = 0;
  char message[256] = {0};
};

void pngError(png_structp png, png_const_charp message) {
  auto* s = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(s->message, sizeof s->message, "%s", message);
  png_longjmp(png, 1);
}

void pngWarning(png_structp, png_const_charp) {}

void pngRead(png_structp png, png_bytep out, png_size_t n) {
  auto* s = static_cast<PngState*>(png_get_io_ptr(png));
  if (s->bytes->size() - s->at < n) png_error(png, "the file is truncated");
  std::memcpy(out, s->bytes->data() + s->at, n);
  s->at += n;
}

StatusOr<Image> decodePng(const std::vector<uint8_t>& bytes, const std::string& name) {
  PngState state;
  state.bytes = &bytes;
  Image image;
  std::vector<png_bytep> rows;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, pngError, pngWarning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return Status::error(name + ": out of memory decoding the PNG");
  }
  bool sizeBad = false;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    if (sizeBad) return sizeError(name, image.width, image.height);
    return Status::error(name + ": not a valid PNG: " + state.message);
  }
  png_set_read_fn(png, &state, pngRead);
  png_set_user_limits(png, 1 << 20, 1 << 20);
  png_read_info(png, info);
  image.width = png_get_image_width(png, info);
  image.height = png_get_image_height(png, info);
  if (!sizeOk(image.width, image.height)) {
    sizeBad = true;
    png_error(png, "size");
  }
  // Pillow's convert("RGB"): 16-bit samples to their high byte, palettes and
  // low bit depths expanded, grey repeated, alpha dropped.
  const int type = png_get_color_type(png, info);
  png_set_strip_16(png);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA) {
    png_set_expand_gray_1_2_4_to_8(png);
    png_set_gray_to_rgb(png);
  }
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<size_t>(image.width) * 3)
    png_error(png, "unexpected row layout after conversion to RGB");
  image.rgb.resize(static_cast<size_t>(image.width * image.height * 3));
  rows.resize(static_cast<size_t>(image.height));
  for (int64_t y = 0; y < image.height; ++y) rows[y] = image.rgb.data() + y * image.width * 3;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return image;
}

//--- JPEG (libjpeg-turbo; its errors longjmp back here) -----------------------

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  bool truncated = false;
  char message[JMSG_LENGTH_MAX] = {0};
};

void jpegFail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// A warning that the data ended early is an error (Pillow: "image file is
// truncated"); other warnings are tolerated, as Pillow does.
void jpegMessage(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF)
    reinterpret_cast<JpegError*>(cinfo->err)->truncated = true;
}

StatusOr<Image> decodeJpeg(const std::vector<uint8_t>& bytes, const std::string& name) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpegFail;
  err.mgr.emit_message = jpegMessage;
  Image image;
  bool sizeBad = false;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    if (sizeBad) return sizeError(name, image.width, image.height);
    return Status::error(name + ": not a valid JPEG: " + err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(err.message, sizeof err.message, "CMYK JPEGs are not supported (convert to RGB)");
    std::longjmp(err.jump, 1);
  }
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  image.width = cinfo.output_width;
  image.height = cinfo.output_height;
  if (!sizeOk(image.width, image.height) || cinfo.output_components != 3) {
    sizeBad = cinfo.output_components == 3;
    std::snprintf(err.message, sizeof err.message, "unexpected output components");
    std::longjmp(err.jump, 1);
  }
  image.rgb.resize(static_cast<size_t>(image.width * image.height * 3));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = image.rgb.data() + static_cast<size_t>(cinfo.output_scanline) * image.width * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
    if (err.truncated) {
      std::snprintf(err.message, sizeof err.message, "the file is truncated");
      std::longjmp(err.jump, 1);
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  if (err.truncated) return Status::error(name + ": not a valid JPEG: the file is truncated");
  return image;
}

//--- Resampling (Pillow's Resample.c, reimplemented) -------------------------

constexpr int kPrecisionBits = 32 - 8 - 2;

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}

double filterValue(Resample f, double x) {
  switch (f) {
    case Resample::kBox: return x > -0.5 && x <= 0.5 ? 1.0 : 0.0;
    case Resample::kBilinear: x = std::fabs(x); return x < 1.0 ? 1.0 - x : 0.0;
    case Resample::kHamming:
      x = std::fabs(x);
      if (x == 0.0) return 1.0;
      if (x >= 1.0) return 0.0;
      x *= M_PI;
      return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));
    case Resample::kBicubic: {
      constexpr double a = -0.5;
      x = std::fabs(x);
      if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
      if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
      return 0.0;
    }
    case Resample::kLanczos: return x >= -3.0 && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0;
    case Resample::kNearest: break;
  }
  return 0.0;
}

double filterSupport(Resample f) {
  switch (f) {
    case Resample::kBox: return 0.5;
    case Resample::kBilinear: return 1.0;
    case Resample::kHamming: return 1.0;
    case Resample::kBicubic: return 2.0;
    case Resample::kLanczos: return 3.0;
    case Resample::kNearest: break;
  }
  return 0.0;
}

// Per output position: the first input position and its fixed-point
// coefficients.
struct Coefficients {
  std::vector<int64_t> first;
  std::vector<std::vector<int32_t>> k;
};

Coefficients coefficients(int64_t inSize, int64_t outSize, Resample f) {
  const double scale = static_cast<double>(inSize) / outSize;
  const double filterScale = std::max(scale, 1.0);
  const double support = filterSupport(f) * filterScale;
  Coefficients c;
  for (int64_t o = 0; o < outSize; ++o) {
    const double center = (o + 0.5) * scale;
    const double ss = 1.0 / filterScale;
    int64_t lo = static_cast<int64_t>(center - support + 0.5);
    lo = std::max<int64_t>(lo, 0);
    int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), inSize);
    std::vector<double> w;
    double total = 0.0;
    for (int64_t i = lo; i < hi; ++i) {
      double v = filterValue(f, (i - center + 0.5) * ss);
      w.push_back(v);
      total += v;
    }
    std::vector<int32_t> k;
    for (double v : w) {
      double n = total != 0.0 ? v / total : 0.0;
      k.push_back(static_cast<int32_t>(n < 0 ? -0.5 + n * (1 << kPrecisionBits)
                                             : 0.5 + n * (1 << kPrecisionBits)));
    }
    c.first.push_back(lo);
    c.k.push_back(std::move(k));
  }
  return c;
}

uint8_t clip8(int64_t v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(std::clamp<int64_t>(v, 0, 255));
}

// One pass along rows (`horizontal`) or columns.
Image pass(const Image& in, int64_t outSize, Resample f, bool horizontal) {
  Image out;
  out.width = horizontal ? outSize : in.width;
  out.height = horizontal ? in.height : outSize;
  out.rgb.resize(static_cast<size_t>(out.width * out.height * 3));
  const Coefficients c = coefficients(horizontal ? in.width : in.height, outSize, f);
  for (int64_t y = 0; y < out.height; ++y)
    for (int64_t x = 0; x < out.width; ++x) {
      const int64_t o = horizontal ? x : y;
      const std::vector<int32_t>& k = c.k[o];
      for (int ch = 0; ch < 3; ++ch) {
        int64_t sum = int64_t{1} << (kPrecisionBits - 1);
        for (size_t i = 0; i < k.size(); ++i) {
          const int64_t at = c.first[o] + static_cast<int64_t>(i);
          const int64_t src = horizontal ? (y * in.width + at) : (at * in.width + x);
          sum += static_cast<int64_t>(in.rgb[src * 3 + ch]) * k[i];
        }
        out.rgb[(y * out.width + x) * 3 + ch] = clip8(sum);
      }
    }
  return out;
}

Image nearest(const Image& in, int64_t width, int64_t height) {
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.resize(static_cast<size_t>(width * height * 3));
  const double sx = static_cast<double>(in.width) / width, sy = static_cast<double>(in.height) / height;
  for (int64_t y = 0; y < height; ++y) {
    const int64_t iy = std::min<int64_t>(static_cast<int64_t>((y + 0.5) * sy), in.height - 1);
    for (int64_t x = 0; x < width; ++x) {
      const int64_t ix = std::min<int64_t>(static_cast<int64_t>((x + 0.5) * sx), in.width - 1);
      std::memcpy(&out.rgb[(y * width + x) * 3], &in.rgb[(iy * in.width + ix) * 3], 3);
    }
  }
  return out;
}

}  // namespace

StatusOr<Image> decodeImage(const std::vector<uint8_t>& bytes, const std::string& name) {
  static const uint8_t kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.empty()) return Status::error(name + ": the file is empty");
  if (bytes.size() >= sizeof kPng && std::equal(std::begin(kPng), std::end(kPng), bytes.begin()))
    return decodePng(bytes, name);
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff)
    return decodeJpeg(bytes, name);
  return Status::error(name + ": not a PNG or JPEG image");
}

StatusOr<Image> readImage(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read '" + path + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::error("cannot read '" + path + "'");
  return decodeImage(bytes, path);
}

Image resize(const Image& image, int64_t width, int64_t height, Resample filter) {
  if (width == image.width && height == image.height) return image;
  if (filter == Resample::kNearest) return nearest(image, width, height);
  // Pillow 13's order: columns first when the height shrinks by more than
  // twice as many pixels as the width does, else rows first. (Each pass
  // rounds to 8 bits, so the order can change a pixel by one level.)
  const int64_t shrinkY = image.height - height, shrinkX = image.width - width;
  const bool columnsFirst = shrinkY > 0 && shrinkY > 2 * shrinkX;
  auto rows = [&](const Image& in) {
    return width == in.width ? in : pass(in, width, filter, /*horizontal=*/true);
  };
  auto columns = [&](const Image& in) {
    return height == in.height ? in : pass(in, height, filter, /*horizontal=*/false);
  };
  return columnsFirst ? rows(columns(image)) : columns(rows(image));
}

StatusOr<ImagePreprocessing> readPreprocessorConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::error("cannot read '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  StatusOr<JsonValue> json = JsonValue::parse(text);
  if (!json.isOk()) return Status::error(path + ": " + json.status().message());
  if (!json->isObject()) return Status::error(path + ": not a JSON object");
  auto keyError = [&](const std::string& key, const std::string& what) {
    return Status::error(path + ": key '" + key + "': " + what);
  };
  ImagePreprocessing p;
  auto flag = [&](const char* key, bool& out) -> Status {
    if (const JsonValue* v = json->find(key)) {
      if (!v->isBool()) return keyError(key, "expected true or false");
      out = v->asBool();
    }
    return Status::ok();
  };
  // A number for every channel, or one number for all three.
  auto triple = [&](const char* key, std::array<double, 3>& out, bool positive) -> Status {
    const JsonValue* v = json->find(key);
    if (!v) return Status::ok();
    std::array<const JsonValue*, 3> items = {v, v, v};
    if (v->isArray() && v->size() == 3)
      items = {&v->asArray()[0], &v->asArray()[1], &v->asArray()[2]};
    else if (!v->isNumber())
      return keyError(key, "expected 3 numbers (RGB) or one");
    for (int i = 0; i < 3; ++i) {
      const double x = items[i]->asNumber();
      if (!items[i]->isNumber() || !std::isfinite(x) || (positive && !(x > 0)))
        return keyError(key, positive ? "expected numbers > 0" : "expected numbers");
      out[i] = x;
    }
    return Status::ok();
  };
  for (Status s : {flag("do_resize", p.resize), flag("do_rescale", p.rescale),
                   flag("do_normalize", p.normalize), triple("image_mean", p.mean, false),
                   triple("image_std", p.std, true)})
    if (!s.isOk()) return s;
  for (const char* key : {"do_center_crop", "do_pad"})
    if (const JsonValue* v = json->find(key); v && v->asBool())
      return keyError(key, "not supported (resize to the model's size, without cropping or padding)");
  if (const JsonValue* v = json->find("size")) {
    const JsonValue *h = v->find("height"), *w = v->find("width");
    if (v->isInteger()) {
      p.height = p.width = v->asInt64();
    } else if (h && w && h->isInteger() && w->isInteger()) {
      p.height = h->asInt64();
      p.width = w->asInt64();
    } else {
      return keyError("size", "expected {\"height\": H, \"width\": W} or an integer "
                              "(shortest_edge and longest_edge sizes are not supported)");
    }
    if (p.height < 1 || p.width < 1 || p.height > 65536 || p.width > 65536)
      return keyError("size", "expected sizes in [1, 65536]");
  }
  if (const JsonValue* v = json->find("resample")) {
    if (!v->isInteger() || v->asInt64() < 0 || v->asInt64() > 5)
      return keyError("resample", "expected one of Pillow's filters 0-5");
    p.resample = static_cast<Resample>(v->asInt64());
  }
  if (const JsonValue* v = json->find("rescale_factor")) {
    if (!v->isNumber() || !(v->asNumber() > 0)) return keyError("rescale_factor", "expected a number > 0");
    p.rescaleFactor = v->asNumber();
  }
  return p;
}

Status preprocessImage(const Image& image, const ImagePreprocessing& p, float* out) {
  Image sized = p.resize ? resize(image, p.width, p.height, p.resample) : image;
  if (sized.width != p.width || sized.height != p.height)
    return Status::error("the image is " + std::to_string(sized.width) + "x" +
                         std::to_string(sized.height) + ", the model takes " +
                         std::to_string(p.width) + "x" + std::to_string(p.height));
  const int64_t plane = p.width * p.height;
  for (int ch = 0; ch < 3; ++ch)
    for (int64_t i = 0; i < plane; ++i) {
      double v = sized.rgb[i * 3 + ch];
      if (p.rescale) v *= p.rescaleFactor;
      if (p.normalize) v = (v - p.mean[ch]) / p.std[ch];
      out[ch * plane + i] = static_cast<float>(v);
    }
  return Status::ok();
}

}  // namespace transfuse::rt
