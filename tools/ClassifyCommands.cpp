//===- ClassifyCommands.cpp - image labels from a vision model ------------===//
//
// `transfuse classify MODEL IMAGE...`: the top-k labels of each image through
// a model's `classify` entry (a ViTForImageClassification directory). MODEL
// is a Hugging Face directory, compiled on first use into the cache
// (compiler/Cache.h), or an artifact (which carries config.json and
// preprocessor_config.json) with --weights. Every image is decoded and
// preprocessed (runtime/host/Image.h) before anything runs, so a bad image
// fails the command with nothing printed.
//
//===----------------------------------------------------------------------===//

#include "tools/Cli.h"
#include "tools/Commands.h"

#include "runtime/Json.h"
#include "runtime/host/CompiledModel.h"
#include "runtime/host/Image.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

using namespace mlir::transfuse;
using namespace mlir::transfuse::tools;
namespace rt = ::transfuse::rt;

namespace {

/// config.json's id2label (LABEL_i where it has none).
std::vector<std::string> labelNames(const std::string &configPath, int64_t count) {
  std::vector<std::string> names(count);
  for (int64_t i = 0; i < count; ++i)
    names[i] = "LABEL_" + std::to_string(i);
  std::ifstream in(configPath);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto json = rt::JsonValue::parse(text);
  if (!json.isOk())
    die(configPath + ": " + json.status().message());
  const rt::JsonValue *map = json->find("id2label");
  if (!map)
    return names;
  if (!map->isObject())
    die(configPath + ": key 'id2label': expected an object of id -> label");
  for (const auto &[key, value] : map->members()) {
    char *end = nullptr;
    const long id = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || id >= count || !value.isString())
      die(configPath + ": key 'id2label': entry '" + key + "' is not a label of an id in [0, " +
          std::to_string(count) + ")");
    names[id] = value.asString();
  }
  return names;
}

} // namespace

int tools::runClassify(const Positional &positional, const Flags &flags) {
  if (positional.size() < 2)
    die("classify expects a model and at least one image");
  const int64_t topK = intFlag(flags, "--top-k", 5, 1, 1 << 20);
  const int64_t batch = intFlag(flags, "--batch", 8, 1, 4096);
  // A directory and an artifact (which carries it) both hold the
  // preprocessor's config; a directory is compiled for its image size
  // (positions interpolated when it is not the config's image_size).
  const std::string preprocessorPath = positional[0] + "/preprocessor_config.json";
  if (!llvm::sys::fs::exists(preprocessorPath))
    die("'" + positional[0] + "' has no preprocessor_config.json (how its images are resized "
        "and normalized)");
  const rt::ImagePreprocessing prep = orDie(rt::readPreprocessorConfig(preprocessorPath));
  const bool artifact = llvm::sys::fs::exists(positional[0] + "/manifest.json");
  ModelArtifact m = modelArtifact(positional[0], flags, batch,
                                  artifact ? std::array<int64_t, 2>{0, 0}
                                           : std::array<int64_t, 2>{prep.height, prep.width});
  if (m.weights.empty())
    die("'" + positional[0] + "' is an artifact: give its weights with --weights (a safetensors "
        "file, an index, or the model's Hugging Face directory)");

  rt::LoadOptions load;
  load.weightsPath = m.weights;
  load.threads = static_cast<int>(intFlag(flags, "--threads", 0, 0, 1024));
  auto model = orDie(rt::CompiledModel::load(m.dir + "/libmodel.so", load));
  auto specs = model->inputs("classify");
  if (!specs.isOk())
    die("'" + positional[0] + "' has no classify entry: a ViTForImageClassification directory "
        "(classifier weights) has one");
  const std::vector<int64_t> &pixels = (*specs)[0].maxShape; // [B, C, H, W]
  if (pixels.size() != 4 || pixels[1] != 3)
    die("'" + positional[0] + "': the classify entry does not take RGB images [B, 3, H, W]");
  if (prep.height != pixels[2] || prep.width != pixels[3])
    die(preprocessorPath + ": key 'size': " + std::to_string(prep.height) + "x" +
        std::to_string(prep.width) + " is not the image size " +
        std::to_string(pixels[2]) + "x" + std::to_string(pixels[3]) +
        " it was compiled for");

  // Every image decoded and preprocessed first.
  const int64_t plane = 3 * pixels[2] * pixels[3];
  const size_t count = positional.size() - 1;
  std::vector<float> values(count * plane);
  for (size_t i = 0; i < count; ++i) {
    rt::Image image = orDie(rt::readImage(positional[i + 1]));
    if (rt::Status s = rt::preprocessImage(image, prep, values.data() + i * plane); !s.isOk())
      die(positional[i + 1] + ": " + s.message());
  }

  if (std::string path = flag(flags, "--pixels-out"); !path.empty()) {
    rt::Tensor t = rt::Tensor::zeros(rt::DType::F32, {static_cast<int64_t>(count), 3, pixels[2],
                                                      pixels[3]});
    std::copy(values.begin(), values.end(), t.data<float>());
    writeTensors(path, {{"pixel_values", std::move(t)}});
  }

  const int64_t rowsPerRun = std::min(batch, pixels[0]);
  std::vector<std::string> names;
  for (size_t start = 0; start < count; start += rowsPerRun) {
    const int64_t n = static_cast<int64_t>(std::min<size_t>(rowsPerRun, count - start));
    rt::Tensor in = rt::Tensor::zeros(rt::DType::F32, {n, 3, pixels[2], pixels[3]});
    std::copy_n(values.data() + start * plane, n * plane, in.data<float>());
    std::map<std::string, rt::Tensor> out = orDie(model->run("classify", {{"pixel_values", in}}));
    const rt::Tensor &logits = out.at("logits");
    const int64_t labels = logits.shape[1];
    if (names.empty())
      names = labelNames(m.dir + "/config.json", labels);
    for (int64_t r = 0; r < n; ++r) {
      // Probabilities: the softmax of the row, in double.
      const float *row = logits.data<float>() + r * labels;
      const double top = *std::max_element(row, row + labels);
      std::vector<double> p(labels);
      double sum = 0;
      for (int64_t j = 0; j < labels; ++j)
        sum += p[j] = std::exp(row[j] - top);
      std::vector<int64_t> order(labels);
      std::iota(order.begin(), order.end(), 0);
      const int64_t k = std::min(topK, labels);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
        return p[a] > p[b] || (p[a] == p[b] && a < b);
      });
      llvm::outs() << positional[start + r + 1] << "\n";
      for (int64_t j = 0; j < k; ++j)
        llvm::outs() << llvm::format("  %.4f  ", p[order[j]] / sum) << names[order[j]] << "\n";
    }
  }
  return 0;
}
