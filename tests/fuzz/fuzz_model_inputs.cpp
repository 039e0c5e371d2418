// Fuzz target: the run-time checks of a compiled model's C ABI (model.h) on
// the tiny encoder-decoder (models/tiny-encoder-decoder.json, compiled to C++
// at build time with --max-batch 4 --max-seq-len 16 and linked in).
//
// The input is decoded into the arrays an app passes: 1-4 input tensors, each
// with a name (the model's, the output's, unknown, empty or NULL), a dtype
// (valid or not), a rank (0-4, or a bad one), dimensions (mostly small, some
// negative, huge or over the maxima), token ids (mostly in the vocabulary,
// some outside), then the outputs (the shape the model reports, or a
// perturbed one). tf_model_output_shape, tf_model_flops and tf_model_run must
// return an error with a message or succeed; after success every logit is
// finite. Buffers always match the shapes passed (the caller's side of the
// contract), except when a tensor claims more than 1 MiB: then its data is
// NULL, which only an accepted tensor could reach and none may be.
#include "runtime/MemoryLimit.h"
#include "runtime/Tensor.h"
#include "runtime/exec/model.h"
#include "tests/fuzz/FuzzUtil.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace {

namespace rt = transfuse::rt;

class Reader {
public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // Mostly small sizes around the maxima (4 and 16), sometimes hostile ones.
  int64_t dim() {
    uint8_t b = byte();
    if (b < 224) return b % 20;
    static const int64_t special[] = {-1, -7, 0, 1 << 20, int64_t{1} << 31, int64_t{1} << 40,
                                      std::numeric_limits<int64_t>::max(),
                                      std::numeric_limits<int64_t>::min()};
    return special[b % 8];
  }

private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

constexpr size_t kMaxBuffer = 1 << 20;

// Bytes of a tensor (an invalid dtype counts 4 bytes, negative sizes 0), or
// SIZE_MAX when over kMaxBuffer.
size_t bufferBytes(int32_t dtype, int32_t rank, const int64_t* shape) {
  if (rank < 0 || rank > 8 || (rank > 0 && !shape)) return 0;
  const size_t element =
      dtype >= TF_F32 && dtype <= TF_BOOL ? rt::dtypeSize(static_cast<rt::DType>(dtype)) : 4;
  const uint64_t bytes = rt::tensorBytes(shape, static_cast<size_t>(rank), element);
  return bytes > kMaxBuffer ? SIZE_MAX : static_cast<size_t>(bytes);
}

struct Arg {
  std::string name;
  bool nullName = false, nullShape = false;
  int32_t dtype = TF_I32, rank = 0;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
  bool nullData = false;
};

tf_tensor view(Arg& a) {
  return tf_tensor{a.nullName ? nullptr : a.name.c_str(), a.dtype, a.rank,
                   a.nullShape ? nullptr : a.shape.data(), a.nullData ? nullptr : a.data.data()};
}

void fill(Arg& a, Reader& r) {
  size_t bytes = bufferBytes(a.dtype, a.rank, a.nullShape ? nullptr : a.shape.data());
  if (bytes == SIZE_MAX) {
    a.nullData = true;
    return;
  }
  a.data.resize(std::max<size_t>(bytes, 1));
  if (a.dtype == TF_I32) {
    // Token ids: mostly inside the vocabularies (23 and 19), padding (1)
    // included, some negative or past the end.
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
      uint8_t b = r.byte();
      int32_t id = b < 240 ? b % 19 : (b % 2 ? -1 - b % 5 : 23 + b % 7);
      std::memcpy(&a.data[i], &id, 4);
    }
  } else {
    for (size_t i = 0; i < bytes; ++i) a.data[i] = r.byte();
  }
}

tf_model* model() {
  static tf_model* m = [] {
    tf_options options = {};
    options.num_threads = 1;
    options.seed = 7;
    tf_model* created = nullptr;
    tf_error err;
    FUZZ_CHECK(tf_model_create(nullptr, &options, &created, &err) == 0, "%s", err.message);
    return created;
  }();
  return m;
}

const char* const kNames[] = {"src_tokens", "tgt_tokens", "src_tokens", "tgt_tokens",
                              "logits",     "tokens",     ""};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tf_model* m = model();
  Reader r(data, size);
  const int32_t entry = r.byte() < 250 ? tf_model_find_entry_point(m, "forward") : r.byte() % 3 - 1;

  std::vector<Arg> args(1 + r.byte() % 4);
  for (Arg& a : args) {
    uint8_t sel = r.byte();
    a.nullName = sel == 255;
    a.name = kNames[sel % std::size(kNames)];
    uint8_t dt = r.byte();
    a.dtype = dt < 200 ? TF_I32 : static_cast<int32_t>(dt % 9) - 1;  // -1..7: two invalid
    uint8_t rk = r.byte();
    a.rank = rk < 200 ? 2 : rk < 250 ? rk % 5 : (rk % 2 ? -1 : 9);
    a.nullShape = rk == 255;
    a.shape.resize(std::max<int32_t>(a.rank, 0) + 1);
    for (int32_t d = 0; d < a.rank && d < 9; ++d) a.shape[d] = r.dim();
    fill(a, r);
  }
  std::vector<tf_tensor> inputs;
  for (Arg& a : args) inputs.push_back(view(a));
  const int32_t numInputs = r.byte() < 250 ? static_cast<int32_t>(inputs.size()) : -1;

  tf_error err;
  double flops = 0;
  if (tf_model_flops(m, entry, inputs.data(), numInputs, &flops, &err) != 0)
    FUZZ_CHECK(err.message[0] != '\0', "tf_model_flops failed without a message");

  int64_t outShape[8] = {0};
  if (tf_model_output_shape(m, entry, inputs.data(), numInputs, 0, outShape, &err) != 0) {
    FUZZ_CHECK(err.message[0] != '\0', "tf_model_output_shape failed without a message");
    // The same inputs must be refused by run too.
    Arg out;
    out.name = "logits";
    out.dtype = TF_F32;
    out.rank = 3;
    out.shape = {1, 1, 19};
    fill(out, r);
    tf_tensor o = view(out);
    FUZZ_CHECK(tf_model_run(m, entry, inputs.data(), numInputs, &o, 1, &err) != 0,
               "run accepted inputs that output_shape refused");
    return 0;
  }
  FUZZ_CHECK(outShape[2] == 19 && outShape[0] >= 1 && outShape[0] <= 4 && outShape[1] >= 1 &&
                 outShape[1] <= 16,
             "output shape [%lld, %lld, %lld]", (long long)outShape[0], (long long)outShape[1],
             (long long)outShape[2]);
  Arg out;
  out.name = r.byte() < 240 ? "logits" : "src_tokens";
  out.dtype = r.byte() < 240 ? TF_F32 : TF_F64;
  out.rank = 3;
  out.shape.assign(outShape, outShape + 3);
  if (r.byte() >= 240) out.shape[r.byte() % 3] += 1;
  fill(out, r);
  tf_tensor o = view(out);
  if (tf_model_run(m, entry, inputs.data(), numInputs, &o, 1, &err) != 0) {
    FUZZ_CHECK(err.message[0] != '\0', "tf_model_run failed without a message");
    return 0;
  }
  const float* logits = reinterpret_cast<const float*>(out.data.data());
  for (int64_t i = 0; i < outShape[0] * outShape[1] * outShape[2]; ++i)
    FUZZ_CHECK(std::isfinite(logits[i]), "logit %lld is %f", (long long)i, logits[i]);
  return 0;
}
