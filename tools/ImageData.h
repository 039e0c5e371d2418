//===- ImageData.h - labelled images for transfuse train ------------------===//
//
// `transfuse train VIT_DIR --images FOLDER|CSV`: the examples of an image
// classifier. A folder holds one subfolder per class (its name a label of
// the model's config.json label2id, or, without one, classes in sorted
// order are ids 0, 1, ...); a CSV holds `path,label` lines (a header line
// `path,label` allowed; paths relative to the CSV's folder; a label is a
// name of label2id or an id). Every image is decoded, converted to RGB and
// resized once as preprocessor_config.json says, and kept as 8-bit RGB; a
// batch normalizes its images into pixel_values [B, 3, H, W].
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_TOOLS_IMAGEDATA_H
#define TRANSFUSE_TOOLS_IMAGEDATA_H

#include "runtime/host/Image.h"
#include "runtime/host/Trainer.h"

#include <map>
#include <string>
#include <vector>

namespace mlir::transfuse::tools {

class ImageData : public ::transfuse::rt::Dataset {
public:
  /// Reads FOLDER or CSV at `path` for a model of `numLabels` classes whose
  /// label names are `label2id` (may be empty); exits with an error naming
  /// the file (and the line of a CSV) on anything wrong: an unreadable or
  /// bad image, an unknown label, a class folder without images.
  static ImageData read(const std::string &path, const ::transfuse::rt::ImagePreprocessing &prep,
                        const std::map<std::string, int32_t> &label2id, int64_t numLabels);

  size_t size() const override { return labels_.size(); }
  /// Every image is one row of a batch (batching counts images).
  std::vector<::transfuse::rt::ExampleLength> lengths() const override;
  /// pixel_values [rows, 3, H, W] and labels [rows].
  ::transfuse::rt::MicroBatch batch(const std::vector<int32_t> &rows) const override;
  int32_t label(size_t i) const { return labels_[i]; }

private:
  ::transfuse::rt::ImagePreprocessing prep_;
  std::vector<::transfuse::rt::Image> images_; // at the model's size
  std::vector<int32_t> labels_;
};

} // namespace mlir::transfuse::tools

#endif // TRANSFUSE_TOOLS_IMAGEDATA_H
