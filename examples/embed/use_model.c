/* An app that embeds a compiled tiny-decoder-only model through model.h
 * alone (linked against libmodel.a or libmodel.so): creates it with random
 * weights, runs `forward` on 2x5 tokens, prints the logits' shape and a
 * checksum, and checks that a bad input is an error naming the tensor and
 * leaves the model usable. Exit 0 only if all of that holds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static int run(tf_model* m, int32_t entry, int32_t* tokens, int64_t batch, int64_t len,
               double* checksum, tf_error* err) {
  int64_t shape[2] = {batch, len};
  tf_tensor in = {"tokens", TF_I32, 2, shape, tokens};
  int64_t out_shape[3];
  if (tf_model_output_shape(m, entry, &in, 1, 0, out_shape, err) != 0) return 1;
  size_t n = (size_t)(out_shape[0] * out_shape[1] * out_shape[2]);
  float* logits = malloc(n * sizeof(float));
  tf_tensor out = {"logits", TF_F32, 3, out_shape, logits};
  int rc = tf_model_run(m, entry, &in, 1, &out, 1, err);
  *checksum = 0;
  for (size_t i = 0; i < n; ++i) *checksum += fabs(logits[i]);
  if (rc == 0)
    printf("logits [%lld, %lld, %lld]\n", (long long)out_shape[0], (long long)out_shape[1],
           (long long)out_shape[2]);
  free(logits);
  return rc;
}

int main(void) {
  tf_options options = {2, 7};
  tf_model* m = NULL;
  tf_error err;
  if (tf_abi_version() != TF_ABI_VERSION) return 1;
  if (tf_model_create(NULL, &options, &m, &err) != 0) {
    printf("create failed: %s\n", err.message);
    return 1;
  }
  int32_t entry = tf_model_find_entry_point(m, "forward");
  int32_t tokens[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  double first, second;
  if (entry < 0 || run(m, entry, tokens, 2, 5, &first, &err) != 0) {
    printf("run failed: %s\n", err.message);
    return 1;
  }
  tokens[3] = 1000; /* outside the vocabulary */
  if (run(m, entry, tokens, 2, 5, &second, &err) == 0) return 1;
  printf("bad input: %s\n", err.message);
  tokens[3] = 4;
  if (run(m, entry, tokens, 2, 5, &second, &err) != 0 || second != first) return 1;
  printf("usable after the error, same logits (checksum %.6g)\n", first);
  tf_model_destroy(m);
  return 0;
}
