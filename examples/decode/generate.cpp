// Greedy generation with the KV cache from C++, through model.h alone: an
// app that links a compiled tiny-decoder-only artifact. RAII owns the model
// and the state; `prefill` runs the prompt and gives the next token's
// logits, `decode_step` feeds each new token back, until EOS (the config's
// 28) or 8 new tokens. A second prompt reuses the state after a reset.
// `transfuse generate` prints the same ids.
#include "model.h"

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct ModelDeleter {
  void operator()(tf_model* m) const { tf_model_destroy(m); }
};
struct StateDeleter {
  void operator()(tf_state* s) const { tf_state_destroy(s); }
};

void check(int32_t rc, const tf_error& err, const char* what) {
  if (rc != 0) throw std::runtime_error(std::string(what) + ": " + err.message);
}

class Generator {
public:
  explicit Generator(const char* weights) {
    tf_options options{1, 9};
    tf_model* m = nullptr;
    check(tf_model_create(weights, &options, &m, &err_), err_, "tf_model_create");
    model_.reset(m);
    tf_state* s = nullptr;
    check(tf_state_create(model_.get(), &s, &err_), err_, "tf_state_create");
    state_.reset(s);
    prefill_ = tf_model_find_entry_point(model_.get(), "prefill");
    step_ = tf_model_find_entry_point(model_.get(), "decode_step");
    if (prefill_ < 0 || step_ < 0) throw std::runtime_error("not a decoder_only artifact");
  }

  std::vector<int32_t> generate(std::vector<int32_t> prompt, int maxNew, int32_t eos) {
    check(tf_state_reset(state_.get(), &err_), err_, "tf_state_reset");
    std::vector<int32_t> out;
    int32_t entry = prefill_;
    for (int i = 0; i < maxNew; ++i) {
      int64_t shape[2] = {1, (int64_t)prompt.size()};
      tf_tensor in{"tokens", TF_I32, 2, shape, prompt.data()};
      int64_t outShape[3];
      check(tf_model_output_shape(model_.get(), entry, &in, 1, 0, outShape, &err_), err_, "shape");
      std::vector<float> logits(outShape[0] * outShape[1] * outShape[2]);
      tf_tensor o{"logits", TF_F32, 3, outShape, logits.data()};
      check(tf_model_run_with_state(model_.get(), entry, state_.get(), &in, 1, &o, 1, &err_), err_,
            "run");
      const float* last = logits.data() + (outShape[1] - 1) * outShape[2];
      int32_t best = 0;
      for (int32_t j = 1; j < outShape[2]; ++j)
        if (last[j] > last[best]) best = j;
      if (best == eos) break;
      out.push_back(best);
      prompt = {best};  // the cache holds the rest
      entry = step_;
    }
    return out;
  }

  int64_t cached() const { return tf_state_length(state_.get()); }

private:
  tf_error err_{};
  std::unique_ptr<tf_model, ModelDeleter> model_;
  std::unique_ptr<tf_state, StateDeleter> state_;
  int32_t prefill_ = -1, step_ = -1;
};

} // namespace

int main(int argc, char** argv) {
  try {
    Generator g(argc > 1 ? argv[1] : nullptr);
    for (const std::vector<int32_t>& prompt : {std::vector<int32_t>{5, 6, 7}, {8, 9}}) {
      std::vector<int32_t> ids = g.generate(prompt, 8, 28);
      for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
      std::printf("\n");
    }
    std::printf("cached positions: %lld\n", (long long)g.cached());
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
