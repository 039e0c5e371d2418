//===- artifact_main.cpp - main() of `transfuse compile --emit exe` -------===//
//
//   model [--weights W.safetensors] [--seed S] [--threads T] [--entry NAME]
//         --inputs IN.safetensors --outputs OUT.safetensors
//
// Linked with a model's generated code into one executable; it reaches the
// model through the C ABI of model.h only, like any app. Errors: one message
// naming the file or tensor, exit code 1, no output file.
//
//===----------------------------------------------------------------------===//

#include "runtime/Safetensors.h"
#include "runtime/exec/model.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace rt = transfuse::rt;

namespace {

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "model: error: %s\n", message.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: %s [--weights W.safetensors] [--seed S] [--threads T] [--entry NAME] "
                  "--inputs IN.safetensors --outputs OUT.safetensors\n", argv[0]);
      return 0;
    }
    if (a != "--weights" && a != "--seed" && a != "--threads" && a != "--entry" &&
        a != "--inputs" && a != "--outputs")
      die("unknown flag '" + a + "'");
    if (i + 1 >= argc) die("flag " + a + " needs a value");
    flags[a] = argv[++i];
  }
  if (!flags.count("--inputs") || !flags.count("--outputs"))
    die("--inputs and --outputs are required");
  tf_options options = {0, 0};
  if (flags.count("--threads")) options.num_threads = std::atoi(flags["--threads"].c_str());
  if (flags.count("--seed")) options.seed = std::strtoull(flags["--seed"].c_str(), nullptr, 10);
  tf_error error;
  tf_model* model = nullptr;
  const char* weights = flags.count("--weights") ? flags["--weights"].c_str() : nullptr;
  if (tf_model_create(weights, &options, &model, &error) != 0) die(error.message);
  std::string entryName = flags.count("--entry") ? flags["--entry"] : "forward";
  int32_t entry = tf_model_find_entry_point(model, entryName.c_str());
  if (entry < 0) die("the model has no entry point '" + entryName + "'");

  auto file = rt::SafetensorsFile::open(flags["--inputs"]);
  if (!file.isOk()) die(file.status().message());
  std::vector<rt::Tensor> inputs;
  std::vector<std::string> names = file->names();
  // The inputs are checked from the file's header (output_shape validates
  // names, dtypes and shapes) before any is read: a bad or oversized input
  // is refused without being copied.
  {
    std::vector<tf_tensor> declared;
    for (const std::string& name : names) {
      const rt::SafetensorsFile::Info* info = file->info(name);
      declared.push_back({name.c_str(), (int32_t)info->dtype, (int32_t)info->shape.size(),
                          info->shape.data(), nullptr});
    }
    std::vector<int64_t> shape(8);
    if (tf_model_num_outputs(model, entry) > 0 &&
        tf_model_output_shape(model, entry, declared.data(), (int32_t)declared.size(), 0,
                              shape.data(), &error) != 0)
      die(flags["--inputs"] + ": " + error.message);
  }
  for (const std::string& name : names) {
    auto t = file->read(name);
    if (!t.isOk()) die(t.status().message());
    inputs.push_back(std::move(*t));
  }
  std::vector<tf_tensor> in;
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back({names[i].c_str(), (int32_t)inputs[i].dtype, (int32_t)inputs[i].shape.size(),
                  inputs[i].shape.data(), inputs[i].bytes.data()});
  int32_t numOutputs = tf_model_num_outputs(model, entry);
  std::vector<rt::Tensor> outputs(numOutputs);
  std::vector<std::string> outNames(numOutputs);
  std::vector<tf_tensor> out;
  for (int32_t i = 0; i < numOutputs; ++i) {
    tf_tensor_spec spec;
    if (tf_model_output_spec(model, entry, i, &spec, &error) != 0) die(error.message);
    std::vector<int64_t> shape(spec.rank);
    if (tf_model_output_shape(model, entry, in.data(), (int32_t)in.size(), i, shape.data(),
                              &error) != 0)
      die(error.message);
    outputs[i] = rt::Tensor::zeros((rt::DType)spec.dtype, shape);
    outNames[i] = spec.name;
  }
  for (int32_t i = 0; i < numOutputs; ++i)
    out.push_back({outNames[i].c_str(), (int32_t)outputs[i].dtype,
                   (int32_t)outputs[i].shape.size(), outputs[i].shape.data(),
                   outputs[i].bytes.data()});
  if (tf_model_run(model, entry, in.data(), (int32_t)in.size(), out.data(), numOutputs,
                   &error) != 0)
    die(error.message);
  std::vector<std::pair<std::string, const rt::Tensor*>> list;
  for (int32_t i = 0; i < numOutputs; ++i) list.emplace_back(outNames[i], &outputs[i]);
  if (rt::Status s = rt::writeSafetensors(flags["--outputs"], list); !s.isOk()) die(s.message());
  tf_model_destroy(model);
  return 0;
}
