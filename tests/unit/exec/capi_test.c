/* The C ABI of model.h used from C, as an app would: linked against the
 * shared library of fake_model.cpp (forward: x F32 [?, 4], ids I32 [?] ->
 * y F32 [?, 3] = x·w + b, max batch 8). Exits non-zero on the first failure. */

#include "runtime/exec/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

#define CHECK_ERROR(call, err, part)                                                  \
  do {                                                                                \
    int32_t rc_ = (call);                                                             \
    if (rc_ == 0 || (err).code == 0 || strstr((err).message, (part)) == NULL) {       \
      fprintf(stderr, "%s:%d: expected an error containing \"%s\", got rc %d: %s\n",  \
              __FILE__, __LINE__, (part), (int)rc_, (err).message);                   \
      ++failures;                                                                     \
    }                                                                                 \
  } while (0)

int main(void) {
  tf_error err;
  tf_model* m = NULL;
  tf_options opt;
  memset(&opt, 0, sizeof opt);
  opt.num_threads = 2;
  opt.seed = 3;

  CHECK(tf_abi_version() == TF_ABI_VERSION);
  if (tf_model_create(NULL, &opt, &m, &err) != 0 || m == NULL) {
    fprintf(stderr, "tf_model_create failed: %s\n", err.message);
    return 1;
  }
  CHECK(err.code == 0);
  CHECK(tf_model_num_threads(m) == 2);
  CHECK(strcmp(tf_model_fusion(m), "all") == 0);
  CHECK(strstr(tf_model_config_json(m), "fake") != NULL);

  /* Entry points and specs. */
  CHECK(tf_model_num_entry_points(m) == 2);
  CHECK(strcmp(tf_model_entry_point_name(m, 0), "forward") == 0);
  CHECK(strcmp(tf_model_entry_point_name(m, 1), "step") == 0);
  CHECK(tf_model_entry_point_name(m, 2) == NULL);
  CHECK(tf_model_entry_point_name(m, -1) == NULL);
  int32_t fwd = tf_model_find_entry_point(m, "forward");
  CHECK(fwd == 0);
  CHECK(tf_model_find_entry_point(m, "backward") == -1);
  CHECK(tf_model_num_inputs(m, fwd) == 2);
  CHECK(tf_model_num_outputs(m, fwd) == 1);
  CHECK(tf_model_num_inputs(m, 7) == -1);
  CHECK(tf_model_arena_bytes(m, fwd) == 8 * 4 * 4);
  CHECK(tf_model_kernel_calls(m, fwd) == 1);
  CHECK(tf_model_arena_bytes(m, 3) == -1);

  tf_tensor_spec spec;
  CHECK(tf_model_input_spec(m, fwd, 0, &spec, &err) == 0);
  CHECK(strcmp(spec.name, "x") == 0 && spec.dtype == TF_F32 && spec.rank == 2);
  CHECK(spec.shape[0] == -1 && spec.shape[1] == 4 && spec.max_shape[0] == 8);
  CHECK(tf_model_input_spec(m, fwd, 1, &spec, &err) == 0);
  CHECK(strcmp(spec.name, "ids") == 0 && spec.dtype == TF_I32 && spec.rank == 1);
  CHECK_ERROR(tf_model_input_spec(m, fwd, 2, &spec, &err), err, "no input with index 2");
  CHECK_ERROR(tf_model_input_spec(m, 4, 0, &spec, &err), err, "no entry point with index 4");
  CHECK(tf_model_output_spec(m, fwd, 0, &spec, &err) == 0);
  CHECK(strcmp(spec.name, "y") == 0 && spec.dtype == TF_F32 && spec.rank == 2);
  CHECK(spec.shape[0] == -1 && spec.shape[1] == 3);

  /* Output shape and a run. */
  float x[2 * 4] = {1, 2, 3, 4, -1, 0.5f, 0, 2};
  int32_t ids[2] = {0, 1};
  int64_t x_shape[2] = {2, 4}, ids_shape[1] = {2};
  tf_tensor in[2] = {{"ids", TF_I32, 1, ids_shape, ids}, {"x", TF_F32, 2, x_shape, x}};
  int64_t y_shape[2] = {0, 0};
  CHECK(tf_model_output_shape(m, fwd, in, 2, 0, y_shape, &err) == 0);
  CHECK(y_shape[0] == 2 && y_shape[1] == 3);
  CHECK_ERROR(tf_model_output_shape(m, fwd, in, 2, 1, y_shape, &err), err,
              "no output with index 1");
  double flops = 0;
  CHECK(tf_model_flops(m, fwd, in, 2, &flops, &err) == 0 && flops == 2.0 * 2 * 4 * 3);

  float y[2 * 3] = {0};
  tf_tensor out[1] = {{"y", TF_F32, 2, y_shape, y}};
  CHECK(tf_model_run(m, fwd, in, 2, out, 1, &err) == 0);
  CHECK(err.code == 0);
  int nonzero = 0;
  for (int i = 0; i < 6; ++i) {
    CHECK(isfinite(y[i]));
    nonzero += y[i] != 0;
  }
  CHECK(nonzero > 0);

  /* Same seed, same outputs; another seed, other outputs. */
  tf_model* same = NULL;
  tf_model* other = NULL;
  CHECK(tf_model_create(NULL, &opt, &same, &err) == 0);
  opt.seed = 4;
  CHECK(tf_model_create(NULL, &opt, &other, &err) == 0);
  if (same && other) {
    float y2[6] = {0}, y3[6] = {0};
    tf_tensor out2[1] = {{"y", TF_F32, 2, y_shape, y2}};
    tf_tensor out3[1] = {{"y", TF_F32, 2, y_shape, y3}};
    CHECK(tf_model_run(same, 0, in, 2, out2, 1, &err) == 0);
    CHECK(tf_model_run(other, 0, in, 2, out3, 1, &err) == 0);
    CHECK(memcmp(y, y2, sizeof y) == 0);
    CHECK(memcmp(y, y3, sizeof y) != 0);
  }
  tf_model_destroy(same);
  tf_model_destroy(other);

  /* Bad inputs name the tensor and write nothing. */
  float y_bad[6];
  for (int i = 0; i < 6; ++i) y_bad[i] = 42;
  tf_tensor out_bad[1] = {{"y", TF_F32, 2, y_shape, y_bad}};
  int64_t wide[2] = {2, 5};
  tf_tensor bad_x[2] = {{"x", TF_F32, 2, wide, x}, {"ids", TF_I32, 1, ids_shape, ids}};
  CHECK_ERROR(tf_model_run(m, fwd, bad_x, 2, out_bad, 1, &err), err,
              "input 'x' has size 5 in dimension 1");
  int64_t too_many[2] = {9, 4};
  tf_tensor big_x[2] = {{"x", TF_F32, 2, too_many, x}, {"ids", TF_I32, 1, ids_shape, ids}};
  CHECK_ERROR(tf_model_run(m, fwd, big_x, 2, out_bad, 1, &err), err,
              "input 'x' has size 9 in dimension 0, outside [1, 8]");
  tf_tensor twice[3] = {in[0], in[1], in[1]};
  CHECK_ERROR(tf_model_run(m, fwd, twice, 3, out_bad, 1, &err), err, "input 'x' is given twice");
  tf_tensor odd_dtype[2] = {{"x", 77, 2, x_shape, x}, in[0]};
  CHECK_ERROR(tf_model_run(m, fwd, odd_dtype, 2, out_bad, 1, &err), err,
              "input 'x' has unknown dtype 77");
  CHECK_ERROR(tf_model_run(m, fwd, in, 1, out_bad, 1, &err), err, "missing input 'x'");
  int32_t neg_ids[2] = {0, -3};
  tf_tensor neg[2] = {{"x", TF_F32, 2, x_shape, x}, {"ids", TF_I32, 1, ids_shape, neg_ids}};
  CHECK_ERROR(tf_model_run(m, fwd, neg, 2, out_bad, 1, &err), err, "input 'ids'");
  CHECK_ERROR(tf_model_flops(m, fwd, bad_x, 2, &flops, &err), err,
              "input 'x' has size 5 in dimension 1");
  CHECK(tf_model_run(m, fwd, bad_x, 2, out_bad, 1, NULL) != 0); /* no error struct: no crash */
  CHECK_ERROR(tf_model_run(m, 5, in, 2, out_bad, 1, &err), err, "no entry point with index 5");

  /* Bad outputs name the tensor. */
  int64_t y_wrong[2] = {2, 4};
  tf_tensor out_shape[1] = {{"y", TF_F32, 2, y_wrong, y_bad}};
  CHECK_ERROR(tf_model_run(m, fwd, in, 2, out_shape, 1, &err), err,
              "output 'y' has shape [2, 4], expected shape [2, 3]");
  tf_tensor out_dtype[1] = {{"y", TF_F64, 2, y_shape, y_bad}};
  CHECK_ERROR(tf_model_run(m, fwd, in, 2, out_dtype, 1, &err), err,
              "output 'y' has dtype F64, expected F32");
  tf_tensor out_name[1] = {{"logits", TF_F32, 2, y_shape, y_bad}};
  CHECK_ERROR(tf_model_run(m, fwd, in, 2, out_name, 1, &err), err,
              "output 'logits' is not an output of entry point 'forward'");
  CHECK_ERROR(tf_model_run(m, fwd, in, 2, out_bad, 0, &err), err, "missing output 'y'");
  for (int i = 0; i < 6; ++i) CHECK(y_bad[i] == 42);

  /* Still usable after errors. */
  float y4[6] = {0};
  tf_tensor out4[1] = {{"y", TF_F32, 2, y_shape, y4}};
  CHECK(tf_model_run(m, fwd, in, 2, out4, 1, &err) == 0);
  CHECK(memcmp(y, y4, sizeof y) == 0);

  /* State (ABI 2): step appends x at the state's length and returns the
   * running sum per row; acc holds 8 rows of 4 positions of 3 values. */
  {
    int32_t st = tf_model_find_entry_point(m, "step");
    CHECK(st == 1);
    CHECK(tf_model_entry_uses_state(m, st) == 1);
    CHECK(tf_model_entry_uses_state(m, fwd) == 0);
    CHECK(tf_model_entry_uses_state(m, 9) == -1);
    CHECK(tf_model_num_states(m) == 1);
    tf_tensor_spec ss;
    CHECK(tf_model_state_spec(m, 0, &ss, &err) == 0);
    CHECK(strcmp(ss.name, "acc") == 0 && ss.rank == 3 && ss.max_shape[0] == 8 &&
          ss.max_shape[1] == 4 && ss.max_shape[2] == 3);
    CHECK_ERROR(tf_model_state_spec(m, 1, &ss, &err), err, "no state tensor with index 1");

    tf_state* s = NULL;
    tf_state* s2 = NULL;
    CHECK(tf_state_create(m, &s, &err) == 0 && s != NULL);
    CHECK(tf_state_create(m, &s2, &err) == 0 && s2 != NULL);
    CHECK(tf_state_length(s) == 0);
    CHECK(tf_state_length(NULL) == -1);
    const int64_t xs_shape[2] = {2, 3};
    float x1[6] = {1, 2, 3, 10, 20, 30}, x2[6] = {4, 5, 6, 40, 50, 60}, ys[6];
    tf_tensor sin1[1] = {{"x", TF_F32, 2, xs_shape, x1}};
    tf_tensor sin2[1] = {{"x", TF_F32, 2, xs_shape, x2}};
    tf_tensor sout[1] = {{"y", TF_F32, 2, xs_shape, ys}};
    /* The wrong call for each kind of entry is refused by name. */
    CHECK_ERROR(tf_model_run(m, st, sin1, 1, sout, 1, &err), err,
                "entry point 'step' reads and writes state: run it with tf_model_run_with_state");
    CHECK_ERROR(tf_model_run_with_state(m, fwd, s, in, 2, out4, 1, &err), err,
                "entry point 'forward' takes no state");
    CHECK_ERROR(tf_model_run_with_state(m, st, NULL, sin1, 1, sout, 1, &err), err,
                "the state is NULL");
    CHECK(tf_state_length(s) == 0);
    CHECK(tf_model_run_with_state(m, st, s, sin1, 1, sout, 1, &err) == 0);
    CHECK(tf_state_length(s) == 1 && ys[0] == 1 && ys[5] == 30);
    CHECK(tf_model_run_with_state(m, st, s, sin2, 1, sout, 1, &err) == 0);
    CHECK(tf_state_length(s) == 2 && ys[0] == 5 && ys[3] == 50 && ys[5] == 90);
    /* Two states of one model are independent. */
    CHECK(tf_model_run_with_state(m, st, s2, sin2, 1, sout, 1, &err) == 0);
    CHECK(tf_state_length(s2) == 1 && ys[0] == 4);
    /* Reorder: both rows take old row 1 (a beam that survived twice). */
    const int32_t rows[2] = {1, 1};
    CHECK(tf_state_reorder(s, rows, 2, &err) == 0);
    CHECK(tf_model_run_with_state(m, st, s, sin1, 1, sout, 1, &err) == 0);
    CHECK(ys[0] == 10 + 40 + 1 && ys[3] == 10 + 40 + 10);
    const int32_t bad_rows[1] = {8};
    CHECK_ERROR(tf_state_reorder(s, bad_rows, 1, &err), err,
                "rows[0] = 8 is outside the 8 rows of state 'acc'");
    CHECK_ERROR(tf_state_reorder(s, rows, 9, &err), err, "9 rows, but state 'acc' holds 8");
    /* Copy: s2 becomes s (contents and length). */
    CHECK(tf_state_copy(s2, s, &err) == 0);
    CHECK(tf_state_length(s2) == 3);
    /* The capacity (4 positions) is an error naming the state; nothing changes. */
    CHECK(tf_model_run_with_state(m, st, s, sin1, 1, sout, 1, &err) == 0);
    CHECK(tf_state_length(s) == 4);
    CHECK_ERROR(tf_model_run_with_state(m, st, s, sin1, 1, sout, 1, &err), err,
                "state 'acc' is full: its capacity is 4 positions");
    CHECK(tf_state_length(s) == 4);
    /* Reset: length 0 and zeros, so the first step returns x itself. */
    CHECK(tf_state_reset(s, &err) == 0);
    CHECK(tf_state_length(s) == 0);
    CHECK(tf_model_run_with_state(m, st, s, sin2, 1, sout, 1, &err) == 0);
    CHECK(ys[0] == 4 && ys[5] == 60);
    /* s2 still holds the copy: its next step sums 3 earlier positions. */
    CHECK(tf_model_run_with_state(m, st, s2, sin1, 1, sout, 1, &err) == 0);
    CHECK(ys[0] == 10 + 40 + 1 + 1);
    tf_state_destroy(s2);
    tf_state_destroy(s);
    tf_state_destroy(NULL);
    CHECK_ERROR(tf_state_create(NULL, &s, &err), err, "the model is NULL");
  }

  /* A missing weights file is named. */
  tf_model* none = NULL;
  CHECK_ERROR(tf_model_create("/nonexistent/w.safetensors", &opt, &none, &err), err,
              "/nonexistent/w.safetensors");
  CHECK(none == NULL);

  tf_model_destroy(m);
  tf_model_destroy(NULL);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("capi_test: all checks passed\n");
  return failures ? 1 : 0;
}
