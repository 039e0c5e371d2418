//===- ImageData.cpp - labelled images for transfuse train ----------------===//
//
// See ImageData.h.
//
//===----------------------------------------------------------------------===//

#include "tools/ImageData.h"

#include "tools/Cli.h"
#include "runtime/host/Corpus.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cassert>

using namespace mlir::transfuse;
using namespace mlir::transfuse::tools;
namespace rt = ::transfuse::rt;

namespace {

bool isImageName(llvm::StringRef name) {
  std::string ext = llvm::sys::path::extension(name).lower();
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

/// The files (or folders) of `dir`, sorted by name.
std::vector<std::string> entries(const std::string &dir, bool folders) {
  std::vector<std::string> out;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    const bool isDir = llvm::sys::fs::is_directory(it->path());
    if (isDir == folders)
      out.push_back(it->path());
  }
  if (ec)
    die("cannot list '" + dir + "': " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

ImageData ImageData::read(const std::string &path, const rt::ImagePreprocessing &prep,
                          const std::map<std::string, int32_t> &label2id, int64_t numLabels) {
  // (file, label) pairs first, then every image decoded.
  std::vector<std::pair<std::string, int32_t>> files;
  auto labelOf = [&](const std::string &name, const std::string &where) -> int32_t {
    if (auto it = label2id.find(name); it != label2id.end()) {
      if (it->second < 0 || it->second >= numLabels)
        die(where + ": label '" + name + "' has id " + std::to_string(it->second) +
            " in config.json's label2id, outside the model's " + std::to_string(numLabels) +
            " labels");
      return it->second;
    }
    int64_t id = -1;
    if (label2id.empty() || llvm::all_of(name, llvm::isDigit))
      if (!llvm::StringRef(name).getAsInteger(10, id) && id >= 0 && id < numLabels)
        return static_cast<int32_t>(id);
    die(where + ": '" + name + "' is not a label of the model (" +
        (label2id.empty() ? "an id in [0, " + std::to_string(numLabels) + ")"
                          : "config.json's label2id, or an id") +
        ")");
  };
  if (llvm::sys::fs::is_directory(path)) {
    std::vector<std::string> classes = entries(path, /*folders=*/true);
    if (classes.empty())
      die("'" + path + "' has no class folders (one folder of images per label)");
    if (label2id.empty() && static_cast<int64_t>(classes.size()) != numLabels)
      die("'" + path + "' has " + std::to_string(classes.size()) +
          " class folders; the model has " + std::to_string(numLabels) + " labels");
    for (size_t c = 0; c < classes.size(); ++c) {
      const std::string name = llvm::sys::path::filename(classes[c]).str();
      const int32_t label =
          label2id.empty() ? static_cast<int32_t>(c) : labelOf(name, classes[c]);
      size_t before = files.size();
      for (const std::string &f : entries(classes[c], /*folders=*/false))
        if (isImageName(f))
          files.push_back({f, label});
      if (files.size() == before)
        die("'" + classes[c] + "' holds no images (.png, .jpg, .jpeg)");
    }
  } else {
    std::vector<std::string> lines = orDie(rt::readTextLines(path));
    const std::string base = llvm::sys::path::parent_path(path).str();
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string where = path + ":" + std::to_string(i + 1);
      llvm::StringRef line = llvm::StringRef(lines[i]).trim();
      if (line.empty() || (i == 0 && line == "path,label"))
        continue;
      auto [file, label] = line.rsplit(',');
      if (label.empty() || file.empty())
        die(where + ": expected 'path,label'");
      std::string full = file.str();
      if (!llvm::sys::path::is_absolute(full) && !base.empty())
        full = base + "/" + full;
      files.push_back({full, labelOf(label.trim().str(), where)});
    }
    if (files.empty())
      die(path + ": no images listed");
  }
  ImageData data;
  data.prep_ = prep;
  for (const auto &[file, label] : files) {
    rt::Image image = orDie(rt::readImage(file));
    data.images_.push_back(prep.resize ? rt::resize(image, prep.width, prep.height, prep.resample)
                                       : std::move(image));
    if (data.images_.back().width != prep.width || data.images_.back().height != prep.height)
      die(file + ": the image is not " + std::to_string(prep.width) + "x" +
          std::to_string(prep.height) + " and preprocessor_config.json does not resize");
    data.labels_.push_back(label);
  }
  return data;
}

std::vector<rt::ExampleLength> ImageData::lengths() const {
  return std::vector<rt::ExampleLength>(labels_.size(), rt::ExampleLength{1, 1});
}

rt::MicroBatch ImageData::batch(const std::vector<int32_t> &rows) const {
  rt::MicroBatch mb;
  const int64_t n = static_cast<int64_t>(rows.size()), plane = 3 * prep_.height * prep_.width;
  rt::Tensor pixels = rt::Tensor::zeros(rt::DType::F32, {n, 3, prep_.height, prep_.width});
  rt::Tensor labels = rt::Tensor::zeros(rt::DType::I32, {n});
  rt::ImagePreprocessing sized = prep_;
  sized.resize = false; // done once when read
  for (int64_t r = 0; r < n; ++r) {
    [[maybe_unused]] rt::Status s =
        rt::preprocessImage(images_[rows[r]], sized, pixels.data<float>() + r * plane);
    assert(s.isOk() && "the sizes were checked when read");
    labels.data<int32_t>()[r] = labels_[rows[r]];
  }
  mb.inputs["pixel_values"] = std::move(pixels);
  mb.inputs["labels"] = std::move(labels);
  mb.tokens = n;
  return mb;
}
