/* The C ABI of a compiled Transfuse model (copied into every artifact as
 * model.h). An app includes this header and links the artifact (libmodel.so
 * or libmodel.a) alone.
 *
 *   tf_model* m = NULL;
 *   tf_error err;
 *   tf_options opt = {0};            // threads = cores; weights from the file
 *   if (tf_model_create("weights.safetensors", &opt, &m, &err) != 0) { puts(err.message); ... }
 *   int32_t fwd = tf_model_find_entry_point(m, "forward");
 *   int64_t src_shape[2] = {1, 12}, tgt_shape[2] = {1, 10};
 *   tf_tensor in[2] = {{"src_tokens", TF_I32, 2, src_shape, src},
 *                      {"tgt_tokens", TF_I32, 2, tgt_shape, tgt}};
 *   int64_t out_shape[3];
 *   tf_model_output_shape(m, fwd, in, 2, 0, out_shape, &err);   // [1, 10, vocab]
 *   tf_tensor out[1] = {{"logits", TF_F32, 3, out_shape, logits}};
 *   tf_model_run(m, fwd, in, 2, out, 1, &err);
 *   tf_model_destroy(m);
 *
 * Contract:
 * - Every function that can fail returns 0 on success and non-zero on error,
 *   with a message naming the tensor, file or entry point in *error (which
 *   may be NULL). Nothing is kept in a global.
 * - tf_model_create runs the model's prepare step (weight-only work hoisted
 *   out of the entry points, and GEMM weight packing) once.
 * - tf_model_run may be called from several threads at once on one model;
 *   each call uses its own arena. A call with bad tensors (unknown or missing
 *   name, wrong dtype, rank or size, a size over the compiled maximum,
 *   overlapping buffers) writes nothing; a failure found while running (a
 *   token id outside the vocabulary) may leave outputs partly written. Either
 *   way the model stays usable.
 * - Outputs are written to caller buffers whose shapes must equal
 *   tf_model_output_shape for the given inputs and which must not overlap
 *   the inputs or each other.
 * - Pointers returned by query functions live as long as the model.
 */
#ifndef TRANSFUSE_MODEL_H
#define TRANSFUSE_MODEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: state and parameters; 3: devices (tf_tensor.device, tf_options.device_ordinal:
 * fields that change the structs' sizes, so version 2 artifacts are refused);
 * 4: tf_model_create's weights_path may name sharded weights (an index or a
 * directory), which a version 3 artifact cannot read, so it is refused.
 * 5: tf_model_gradient_count, tf_model_gradients_take and
 * tf_model_gradients_put (data-parallel training sums gradients across
 * processes). */
#define TF_ABI_VERSION 5

/* Element types; the numbering is fixed by the ABI. */
typedef enum tf_dtype {
  TF_F32 = 0,
  TF_F64 = 1,
  TF_F16 = 2,
  TF_BF16 = 3,
  TF_I32 = 4,
  TF_I64 = 5,
  TF_BOOL = 6 /* one byte, 0 or 1 */
} tf_dtype;

typedef struct tf_error {
  int32_t code; /* 0: no error */
  char message[1024];
} tf_error;

/* Where a model runs and where a tensor's data lives (ABI 2). A model runs
 * on the device its artifact was compiled for (`--target`); tensors may be
 * in host memory or in the model's device memory. */
typedef enum tf_device_kind {
  TF_DEVICE_CPU = 0, /* host memory */
  TF_DEVICE_CUDA = 1 /* memory of the model's CUDA device (tf_options.device_ordinal) */
} tf_device_kind;

/* A named, dense, row-major tensor owned by the caller. `device` (left 0 by
 * `{name, dtype, rank, shape, data}`) says where data lives: a run copies
 * host tensors to and from a device model's memory and uses device tensors
 * in place. */
typedef struct tf_tensor {
  const char* name;
  int32_t dtype; /* tf_dtype */
  int32_t rank;
  const int64_t* shape;
  void* data;
  int32_t device; /* tf_device_kind: TF_DEVICE_CPU, or the model's device */
} tf_tensor;

/* The declared form of an input or output: shape holds -1 for a dynamic
 * dimension, max_shape its compiled maximum. */
typedef struct tf_tensor_spec {
  const char* name;
  int32_t dtype;
  int32_t rank;
  const int64_t* shape;
  const int64_t* max_shape;
} tf_tensor_spec;

typedef struct tf_options {
  int32_t num_threads; /* <= 0: one per hardware thread; at most 1024 */
  uint64_t seed;       /* seed of random weights when weights_path is NULL */
  int32_t device_ordinal; /* a CUDA model: the GPU it runs on (default 0); 0 for a cpu model */
} tf_options;

typedef struct tf_model tf_model;

/* TF_ABI_VERSION of the artifact; a runtime refuses versions it does not know. */
uint32_t tf_abi_version(void);

/* Loads weights and prepares the model. weights_path: a safetensors file; a
 * Hugging Face index (model.safetensors.index.json) whose shards lie beside
 * it; a directory holding model.safetensors or that index; or NULL: seeded
 * random weights, for benchmarks and tests. options may be NULL (defaults). */
int32_t tf_model_create(const char* weights_path, const tf_options* options, tf_model** model,
                        tf_error* error);
void tf_model_destroy(tf_model* model);

/* The fusion strategy and configuration (JSON) the model was compiled with. */
const char* tf_model_fusion(const tf_model* model);
const char* tf_model_config_json(const tf_model* model);

int32_t tf_model_num_threads(const tf_model* model);
/* The tf_device_kind the model runs on (-1 for NULL). Its weights, arenas
 * and state live there. A CUDA model's calls make its GPU the calling
 * thread's current device (cudaSetDevice) and leave it so. */
int32_t tf_model_device(const tf_model* model);
int32_t tf_model_num_entry_points(const tf_model* model);
const char* tf_model_entry_point_name(const tf_model* model, int32_t entry);
/* The index of the entry point called `name`, or -1. */
int32_t tf_model_find_entry_point(const tf_model* model, const char* name);
int32_t tf_model_num_inputs(const tf_model* model, int32_t entry);
int32_t tf_model_num_outputs(const tf_model* model, int32_t entry);
int32_t tf_model_input_spec(const tf_model* model, int32_t entry, int32_t index,
                            tf_tensor_spec* spec, tf_error* error);
int32_t tf_model_output_spec(const tf_model* model, int32_t entry, int32_t index,
                             tf_tensor_spec* spec, tf_error* error);

/* The shape of output `index` for these inputs (validated as by run). */
int32_t tf_model_output_shape(const tf_model* model, int32_t entry, const tf_tensor* inputs,
                              int32_t num_inputs, int32_t index, int64_t* shape,
                              tf_error* error);

/* Runs an entry point; inputs and outputs are matched by name. A TF_I32
 * input (token ids) may also be given as TF_I64 in host memory: narrowed per
 * call, an id outside int32 an error naming the input. */
int32_t tf_model_run(tf_model* model, int32_t entry, const tf_tensor* inputs,
                     int32_t num_inputs, const tf_tensor* outputs, int32_t num_outputs,
                     tf_error* error);

/* For benchmarks: the arena bytes one run of the entry point uses at the
 * compiled maxima and the kernel calls one run makes (-1 for a bad entry);
 * the floating-point operations (multiply-adds count 2) of a run on these
 * inputs, validated as by run. */
int64_t tf_model_arena_bytes(const tf_model* model, int32_t entry);
int64_t tf_model_kernel_calls(const tf_model* model, int32_t entry);
int32_t tf_model_flops(const tf_model* model, int32_t entry, const tf_tensor* inputs,
                       int32_t num_inputs, double* flops, tf_error* error);

/* ---- State (ABI 2) --------------------------------------------------------
 * Persistent tensors a model declares (a KV cache), kept between calls in a
 * tf_state created from the model: every state tensor at its capacity (the
 * compiled maxima, tf_model_state_spec's max_shape), zero after create and
 * reset, and a length: the positions filled so far, which the entries that
 * use state read and advance (going past the capacity is an error naming
 * it, and writes nothing). Several states of one model may be used at once
 * (one per conversation or batch); one state by one call at a time (a
 * second concurrent call on it fails). A state belongs to the model it was
 * created from and is destroyed before it. */
typedef struct tf_state tf_state;

int32_t tf_model_num_states(const tf_model* model);
int32_t tf_model_state_spec(const tf_model* model, int32_t index, tf_tensor_spec* spec,
                            tf_error* error);
/* 1 when the entry point reads and writes state, 0 when not, -1 for a bad entry. */
int32_t tf_model_entry_uses_state(const tf_model* model, int32_t entry);

int32_t tf_state_create(tf_model* model, tf_state** state, tf_error* error);
void tf_state_destroy(tf_state* state);
/* Back to length 0 and zeros. */
int32_t tf_state_reset(tf_state* state, tf_error* error);
/* The positions filled so far; -1 for a NULL state. */
int64_t tf_state_length(const tf_state* state);
/* Beam search: row i of every state tensor (its dimension 0) takes the old
 * row rows[i], for i < num_rows (1 <= num_rows <= the rows' capacity; rows
 * may repeat); rows from num_rows on are unchanged. Done inside the state. */
int32_t tf_state_reorder(tf_state* state, const int32_t* rows, int32_t num_rows,
                         tf_error* error);
/* `to` becomes a copy of `from` (contents and length); both of one model. */
int32_t tf_state_copy(tf_state* to, const tf_state* from, tf_error* error);

/* Runs an entry point that uses state (tf_model_run refuses it, and this
 * refuses entries that do not). */
int32_t tf_model_run_with_state(tf_model* model, int32_t entry, tf_state* state,
                                const tf_tensor* inputs, int32_t num_inputs,
                                const tf_tensor* outputs, int32_t num_outputs, tf_error* error);

/* ---- Parameters and training (ABI 2) --------------------------------------
 * A model holds its parameters: every weight (as bound at create) and, for
 * training, Adam's two moments of each (zero until a train step or a write
 * sets them). They are listed weights first, then the first moments, then
 * the second: tf_model_num_params() = 3 · weights. A moment has its
 * weight's name and shape; its role tells it apart.
 *
 * Reads and writes go through the model's reader-writer lock: runs hold it
 * shared, so a run already in flight finishes with the old values and a
 * write waits for it; no run sees half an update. After a weight is
 * written, the prepare step and the GEMM packing of what changed run again
 * before the next run reads them. */
typedef enum tf_param_role {
  TF_PARAM_WEIGHT = 0,
  TF_PARAM_ADAM_M = 1, /* Adam's first moment (torch's exp_avg) */
  TF_PARAM_ADAM_V = 2  /* Adam's second moment (torch's exp_avg_sq) */
} tf_param_role;

typedef struct tf_param_info {
  const char* name;
  int32_t role; /* tf_param_role */
  int32_t dtype; /* TF_F32 */
  int32_t rank;
  const int64_t* shape;
} tf_param_info;

int32_t tf_model_num_params(const tf_model* model);
int32_t tf_model_param_info(const tf_model* model, int32_t index, tf_param_info* info,
                            tf_error* error);
/* Copies a parameter (F32, row-major) into / out of a caller buffer of
 * exactly its size in bytes. */
int32_t tf_model_param_read(tf_model* model, const char* name, int32_t role, void* data,
                            int64_t bytes, tf_error* error);
int32_t tf_model_param_write(tf_model* model, const char* name, int32_t role, const void* data,
                             int64_t bytes, tf_error* error);

/* One optimizer step: Adam as torch.optim.Adam computes it (AdamW's
 * decoupled weight decay when set), optionally after clipping the global
 * gradient norm as torch.nn.utils.clip_grad_norm_ does. */
typedef struct tf_train_options {
  double learning_rate; /* the rate of this step (the caller's schedule) */
  double beta1, beta2, epsilon; /* 0: 0.9, 0.98, 1e-9 (the paper's) */
  double weight_decay; /* AdamW's decoupled decay; 0: Adam */
  double max_grad_norm; /* > 0: clip the global gradient norm to it */
} tf_train_options;

/* Runs a gradient entry point (a training build's `loss_grad`: outputs
 * `loss` and `grad.<name>` per weight) on a micro-batch and adds `weight`
 * times its gradients to the gradients the model holds for the next
 * tf_model_apply_gradients (a step over several micro-batches weighs each
 * by its share of the step's tokens). Dropout draws are keyed by `seed` and
 * the step being accumulated (tf_model_train_steps() + 1). *loss gets the
 * micro-batch's loss (may be NULL). */
int32_t tf_model_accumulate_gradients(tf_model* model, int32_t entry, const tf_tensor* inputs,
                                      int32_t num_inputs, double weight, uint64_t seed,
                                      double* loss, tf_error* error);
/* Applies the accumulated gradients to every weight (Adam at step
 * tf_model_train_steps() + 1, which it then counts), zeroes them, and
 * reruns prepare and packing. *grad_norm gets the global gradient norm
 * before clipping (may be NULL). */
int32_t tf_model_apply_gradients(tf_model* model, const tf_train_options* options,
                                 double* grad_norm, tf_error* error);
/* Both on one batch: the compiled train step (forward, loss, backward, the
 * optimizer update) in one call. */
int32_t tf_model_train_step(tf_model* model, int32_t entry, const tf_tensor* inputs,
                            int32_t num_inputs, const tf_train_options* options, uint64_t seed,
                            double* loss, double* grad_norm, tf_error* error);
/* The gradients the model holds, as one vector of tf_model_gradient_count
 * floats: every weight's gradient in parameter order (tf_model_param_info).
 * take copies them out (zeros when none are held) and leaves none held; put
 * copies them in, held for the next tf_model_apply_gradients as if
 * accumulated. Data-parallel training takes each process's sum of its
 * micro-batches, sums them across processes and puts the total back. */
int64_t tf_model_gradient_count(const tf_model* model);
int32_t tf_model_gradients_take(tf_model* model, float* data, int64_t count, tf_error* error);
int32_t tf_model_gradients_put(tf_model* model, const float* data, int64_t count,
                               tf_error* error);
/* The optimizer steps applied so far; set when resuming from a checkpoint. */
int64_t tf_model_train_steps(const tf_model* model);
int32_t tf_model_set_train_steps(tf_model* model, int64_t steps, tf_error* error);

#ifdef __cplusplus
}
#endif

#endif /* TRANSFUSE_MODEL_H */
