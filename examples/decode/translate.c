/* Greedy translation with the KV cache, through model.h alone: an app that
 * links a compiled tiny-encoder-decoder artifact (libmodel.a or .so).
 *
 * It creates the model (weights from the safetensors file given as its
 * argument, e.g. a translation-tutorial state dict; random from a seed
 * without one) and one tf_state, runs `encode` on two
 * sources (BOS ids EOS, padded: the config's conventions, pad 1, BOS 2,
 * EOS 3) and then `decode_step` one token per sentence until each has
 * emitted EOS or 8 tokens, printing each output's ids. The padding id is
 * never chosen (the decoder does not mask its own keys). Then it shows that
 * a step past the cache's capacity is an error naming the limit. Exit 0
 * only if all of that holds. `transfuse translate` prints the same ids. */
#include <stdio.h>
#include <stdlib.h>

#include "model.h"

enum { PAD = 1, BOS = 2, EOS = 3, B = 2, S = 6, MAX_LEN = 8 };

int main(int argc, char** argv) {
  tf_options options = {1, 7};
  tf_model* m = NULL;
  tf_state* state = NULL;
  tf_error err;
  const char* weights = argc > 1 ? argv[1] : NULL;
  if (tf_abi_version() != TF_ABI_VERSION || tf_model_create(weights, &options, &m, &err) != 0 ||
      tf_state_create(m, &state, &err) != 0) {
    printf("setup failed: %s\n", m ? err.message : "model");
    return 1;
  }
  int32_t encode = tf_model_find_entry_point(m, "encode");
  int32_t step = tf_model_find_entry_point(m, "decode_step");
  if (encode < 0 || step < 0) return 1;

  int32_t src[B * S] = {BOS, 4, 5, 6, 7, EOS, BOS, 10, 11, EOS, PAD, PAD};
  int64_t src_shape[2] = {B, S};
  tf_tensor source = {"src_tokens", TF_I32, 2, src_shape, src};
  if (tf_model_run_with_state(m, encode, state, &source, 1, NULL, 0, &err) != 0) {
    printf("encode failed: %s\n", err.message);
    return 1;
  }

  int32_t last[B] = {BOS, BOS}, out[B][MAX_LEN];
  int len[B] = {0, 0}, done[B] = {0, 0};
  int64_t tgt_shape[2] = {B, 1};
  tf_tensor inputs[2] = {source, {"tgt_tokens", TF_I32, 2, tgt_shape, last}};
  int64_t logits_shape[3];
  if (tf_model_output_shape(m, step, inputs, 2, 0, logits_shape, &err) != 0) return 1;
  const int64_t v = logits_shape[2];
  float* logits = malloc(sizeof(float) * B * v);
  tf_tensor output = {"logits", TF_F32, 3, logits_shape, logits};
  for (int t = 0; t <= MAX_LEN && !(done[0] && done[1]); ++t) {
    if (tf_model_run_with_state(m, step, state, inputs, 2, &output, 1, &err) != 0) {
      printf("step %d failed: %s\n", t, err.message);
      return 1;
    }
    for (int b = 0; b < B; ++b) {
      if (done[b]) continue;
      int best = -1;
      for (int j = 0; j < v; ++j)
        if (j != PAD && (best < 0 || logits[b * v + j] > logits[b * v + best])) best = j;
      if (best == EOS || len[b] == MAX_LEN) {
        done[b] = 1;
        continue;
      }
      out[b][len[b]++] = best;
      last[b] = best; /* rows of finished sentences run on: their outputs are ignored */
    }
  }
  for (int b = 0; b < B; ++b) {
    for (int i = 0; i < len[b]; ++i) printf(i ? " %d" : "%d", out[b][i]);
    printf("\n");
  }
  printf("cached positions: %lld\n", (long long)tf_state_length(state));

  /* Past the capacity (16 positions): an error naming it, nothing written. */
  int64_t length = tf_state_length(state);
  int32_t many[B * 16];
  for (int i = 0; i < B * 16; ++i) many[i] = 4;
  int64_t many_shape[2] = {B, 16};
  tf_tensor too_long[2] = {source, {"tgt_tokens", TF_I32, 2, many_shape, many}};
  int64_t big_shape[3] = {B, 16, v};
  float* big = malloc(sizeof(float) * B * 16 * v);
  tf_tensor big_out = {"logits", TF_F32, 3, big_shape, big};
  if (tf_model_run_with_state(m, step, state, too_long, 2, &big_out, 1, &err) == 0) return 1;
  printf("past the capacity: %s\n", err.message);
  if (tf_state_length(state) != length) return 1;

  free(big);
  free(logits);
  tf_state_destroy(state);
  tf_model_destroy(m);
  return 0;
}
