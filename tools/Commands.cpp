//===- Commands.cpp - the transfuse driver's commands, declared -----------===//
//
// Every command of `transfuse`: its usage, a one-sentence summary (what
// `transfuse --help` lists), details, its flags with their help, and the
// function that runs it. Parsing and help printing are in transfuse.cpp;
// docs/usage.md describes the same flags at length.
//
//===----------------------------------------------------------------------===//

#include "tools/Commands.h"

using namespace mlir::transfuse::tools;

namespace {

const std::vector<Command> kCommands = {
  {"compile", "compile MODEL.json|MODEL.onnx|MODEL.mlir|HF_DIR -o DIR [options]",
   "Compiles a model definition into an artifact directory.",
   "Builds or parses a model definition (a built-in config, a Hugging Face directory, an ONNX "
   "file or MLIR text), runs the fusion strategy, and writes "
   "DIR/model.mlir, DIR/manifest.json and DIR/report.json (an ONNX file's weights: "
   "DIR/weights.safetensors, which run and the other commands load by default).",
   {{"-o", "DIR", "output directory (created if missing)"},
    {"--target", "NAME", "cpu (default) or cuda (sm_80 and sm_90 with nvcc; "
                         "inference and --train; docs/cuda.md)"},
    {"--dtype", "T", "f32 (default); bf16: on cpu every product (GEMM, matmul) on bf16 "
                     "operands with fp32 sums (AMX-BF16, AVX512-BF16; docs/bf16.md), with "
                     "--target cuda tensors and weights stored as bf16, arithmetic in fp32; "
                     "int8 (cpu): linear layers on int8 "
                     "weights quantized per output row at load, activations per row "
                     "(inference; docs/int8.md)"},
    {"--emit", "KIND", "shared (default: libmodel.so), static (libmodel.a), exe, cpp, kernels, mlir, or dot (the graphs only: graph.before.dot and graph.after.dot, which every kind writes)"},
    {"--cxx", "PATH", "C++ compiler for the artifact (default: $TRANSFUSE_CXX, else clang++-22)"},
    {"--verify", nullptr, "run the compiled model against the reference backend, random "
                          "weights and padded inputs; exit 1 past the tolerance"},
    {"--tolerance", "X", "--verify: max |error| / max(1, max |reference|) (default 1e-3)"},
    {"--seed", "N", "--verify: seed of weights and inputs (default 0)"},
    {"--fusion", "STRATEGY", "none (default), attention, layernorm, epilogue, projections, "
                             "elementwise or all; combine with '+'"},
    {"--report", nullptr, "print what fused and why the rest did not (also DIR/report.json)"},
    {"--train", nullptr, "a training build: @loss and its gradient @loss_grad (the fused "
                         "backward), for tf_model_train_step"},
    {"--max-batch", "N", "maximum batch size (default 8; MLIR input: its own)"},
    {"--max-seq-len", "N", "maximum sequence length (default: the config's max_seq_len)"},
    {"--dim", "NAME=MAX,...", "an ONNX file: the maximum of each named dynamic dimension "
                              "(dim_param); it raises --max-batch (dimension 0) or "
                              "--max-seq-len (the others)"},
    {"--max-beam", "K", "decoding entries: beams per sentence the cache holds (default 4; "
                        "its rows are max-batch · max-beam)"},
    {"--image-size", "HxW", "a ViT directory: the images' size (default: the config's "
                            "image_size); positions interpolated as Hugging Face's "
                            "interpolate_pos_encoding"}},
   runCompile},
  {"run", "run MODEL --inputs IN.safetensors --outputs OUT.safetensors [options]",
   "Runs an entry point of a compiled model.",
   "Runs an entry point of a compiled model on named input tensors, or of its model.mlir on "
   "the reference backend. MODEL is an artifact directory, or a Hugging Face directory "
   "compiled on first use into $XDG_CACHE_HOME/transfuse (~/.cache/transfuse) and reused, "
   "its weights its own.",
   {{"--inputs", "FILE", "input tensors (safetensors), named as in manifest.json"},
    {"--outputs", "FILE", "where to write the output tensors (safetensors)"},
    {"--backend", "NAME", "compiled (default): DIR/libmodel.so; reference: the fp64 interpreter"},
    {"--threads", "T", "compiled: threads (default: one per hardware thread)"},
    {"--device", "N", "a model compiled with --target cuda: the GPU it runs on (default 0)"},
    {"--weights", "PATH", "weights (a safetensors file, a shard index or a directory); "
                          "random from --seed when absent"},
    {"--seed", "N", "seed of the random weights (default 0)"},
    {"--entry", "NAME", "entry point (default forward)"},
    {"--max-batch", "N", "a Hugging Face directory: the compiled maximum batch (default 8)"},
    {"--max-seq-len", "N", "a Hugging Face directory: the compiled maximum length (default: "
                           "the config's)"},
    {"--fusion", "STRATEGY", "a Hugging Face directory: the fusion strategy (default all)"},
    {"--dtype", "T", "a directory: f32 (default), bf16 (products on bf16 operands; "
                     "docs/bf16.md) or int8 (linear layers on int8 weights; docs/int8.md)"},
    {"--f64-outputs", nullptr, "write float outputs as F64, as the reference backend computes them"}},
   runRun},
  {"tokenize", "tokenize TOKENIZER [--input FILE] [--decode] [options]",
   "Token ids of text (or text of ids) through a Hugging Face tokenizer.",
   "Encodes each line of --input (default: stdin) with a Hugging Face tokenizer: a "
   "tokenizer.json, or a model or artifact directory that holds a tokenizer.model "
   "(SentencePiece: Llama 2, Mistral), else a tokenizer.json (else the BERT family's "
   "vocab.txt), the conventions' special tokens added, and prints its ids, space-separated, "
   "a line each; with --decode, reads lines of ids and prints their text.",
   {{"--input", "FILE", "one text (or, with --decode, one list of ids) per line (default: stdin)"},
    {"--no-specials", nullptr, "no special tokens from the post-processor's template"},
    {"--decode", nullptr, "ids in, text out (special tokens dropped)"},
    {"--keep-specials", nullptr, "--decode: keep the special tokens' text"},
    {"--time", "N", "encode the input N times and print the best time to stderr"}},
   runTokenize},
  {"embed", "embed MODEL [--input FILE] [--out FILE.npy|FILE.safetensors] [options]",
   "Sentence embeddings from text, one vector per line.",
   "Runs a sentence-transformers model's `embed` entry (the BERT family: pooling and "
   "normalization as the directory's modules.json says) on each line of --input (default: "
   "stdin), tokenized by the model's own WordPiece tokenizer. MODEL is a Hugging Face "
   "directory, compiled on first use into $XDG_CACHE_HOME/transfuse (~/.cache/transfuse) "
   "and reused, or an artifact with --weights. Lines run in batches sorted by length; the "
   "vectors come out in input order, as JSON lines on stdout unless --out is given.",
   {{"--input", "FILE", "one text per line (default: stdin)"},
    {"--out", "FILE", "write the vectors [lines, width] to FILE.npy (float32) or "
                      "FILE.safetensors (tensor 'embeddings') instead of stdout"},
    {"--weights", "PATH", "the weights (a safetensors file, an index or a directory); "
                          "default: MODEL's own"},
    {"--batch", "N", "lines per run (default 32; a directory's artifact is compiled for it)"},
    {"--max-seq-len", "N", "a directory: the compiled maximum length (default: the config's "
                           "max_position_embeddings)"},
    {"--no-truncate", nullptr, "a line over the maximum length is an error, not truncated"},
    {"--fusion", "STRATEGY", "a directory: the fusion strategy (default all)"},
    {"--dtype", "T", "a directory: f32 (default), bf16 (products on bf16 operands; "
                     "docs/bf16.md) or int8 (linear layers on int8 weights; docs/int8.md)"},
    {"--threads", "N", "threads (default: one per hardware thread)"}},
   runEmbed},
  {"classify", "classify MODEL IMAGE... [--top-k K] [options]",
   "The top labels of images (PNG or JPEG) with their probabilities.",
   "Runs an image classifier's `classify` entry (a ViTForImageClassification directory) on "
   "each image, decoded and converted to RGB, resized and normalized as the directory's "
   "preprocessor_config.json says, and prints each image's top-k labels (config.json's "
   "id2label) with their probabilities. MODEL is a Hugging Face directory, compiled on first "
   "use into $XDG_CACHE_HOME/transfuse (~/.cache/transfuse) and reused, or an artifact with "
   "--weights. Every image is read before any runs: a bad one fails the command, naming it.",
   {{"--top-k", "K", "labels printed per image (default 5)"},
    {"--weights", "PATH", "the weights (a safetensors file, an index or a directory); "
                          "default: MODEL's own"},
    {"--batch", "N", "images per run (default 8; a directory's artifact is compiled for it)"},
    {"--pixels-out", "FILE", "also write the preprocessed images to FILE.safetensors "
                             "(tensor 'pixel_values' [images, 3, H, W])"},
    {"--fusion", "STRATEGY", "a directory: the fusion strategy (default all)"},
    {"--dtype", "T", "a directory: f32 (default), bf16 (products on bf16 operands; "
                     "docs/bf16.md) or int8 (linear layers on int8 weights; docs/int8.md)"},
    {"--threads", "N", "threads (default: one per hardware thread)"}},
   runClassify},
  {"bench", "bench gemm|attention|model MODEL|train MODEL|decode MODEL [options]",
   "Times kernels, fusion strategies, training and decoding.",
   "Measures a kernel: GFLOP/s and the fraction of this machine's FMA peak, probed in "
   "the same run. Attention counts 4·B·H·Sq·Sk·D flops, halved when causal. "
   "`bench model MODEL` compiles the model once per fusion strategy and times its "
   "forward pass: median and min latency, arena, kernel calls, GFLOP/s (all matmul "
   "FLOPs, causal attention counted in full). `bench train MODEL` times the compiled "
   "train step (forward, loss, backward, Adam) per strategy on --batch-tokens of "
   "--seq-len sequences: tokens/s and GFLOP/s (3x forward's). `bench decode MODEL` compiles an "
   "encoder_decoder with its KV cache and times translating random sources: exactly "
   "--new-tokens per sentence (EOS ignored), tokens/s of the whole request, encode included.",
   {{"--m", "M", "gemm: rows of A and C (default 1024)"},
    {"--n", "N", "gemm: columns of B and C (default 1024)"},
    {"--k", "K", "gemm: the contraction (default 1024)"},
    {"--epilogue", "E", "gemm: none, bias, relu, gelu, gelu_tanh, silu or residual"},
    {"--pack-per-call", nullptr, "gemm: pack B in every timed call (a product of two "
                                 "activations) instead of once (a weight)"},
    {"--batch", "B", "attention, decode: batch (default 1); model: batch (default 8)"},
    {"--new-tokens", "N", "decode: tokens generated per sentence (default 32)"},
    {"--beam", "K", "decode: beam size (default 1)"},
    {"--recompute", nullptr, "decode: also time greedy by recomputing the prefix each step"},
    {"--weights", "FILE", "decode: weights (safetensors; default random)"},
    {"--src-len", "S", "model: source length (default 64); decode: source ids (default 24)"},
    {"--tgt-len", "T", "model: target length (default 64)"},
    {"--fusion", "LIST", "model: strategies, comma-separated (default "
                         "none,attention,layernorm,epilogue,projections,all); decode: one "
                         "(default all)"},
    {"--cxx", "PATH", "model: C++ compiler for the artifacts"},
    {"--entry", "NAME", "model: the entry point timed (default forward; a BERT directory: "
                        "encode, embed or classify)"},
    {"--keep-artifacts", "DIR", "model, train: keep each strategy's artifact in DIR/STRATEGY "
                                "(to profile what was timed)"},
    {"--batch-tokens", "N", "train: padded tokens per batch (default 3000)"},
    {"--seq-len", "L", "train: source and target length (default 32)"},
    {"--heads", "H", "attention: heads (default 8)"},
    {"--seq", "S", "attention: query length (default 512)"},
    {"--kv-seq", "S2", "attention: key length (default: --seq)"},
    {"--head-dim", "D", "attention: head size (default 64)"},
    {"--causal", nullptr, "attention: causal mask, bottom-right aligned"},
    {"--unfused", nullptr, "attention: QKᵀ GEMM, masked softmax, ·V GEMM instead of fused"},
    {"--threads", "T", "threads (default 1; model: one per hardware thread)"},
    {"--min-seconds", "S", "measure for at least this long (default 0.5; model: 2)"},
    {"--isa", "TARGET", "dispatch to this Highway target instead of the best (AVX3, AVX2, "
                        "SSE4, ...), and/or turn int8 paths off (AVX3,-AMX; -amx,-vnni); "
                        "also $TRANSFUSE_ISA"},
    {"--dtype", "T", "gemm: f32 (default), bf16 or int8 (quantized per row), on the best "
                     "path; model, decode: bf16 products or int8 linear layers; train: bf16 "
                     "(docs/bf16.md, docs/int8.md)"},
    {"--json", nullptr, "print one JSON object (with a gflops field)"}},
   runBench},
  {"train", "train CONFIG.json --src-train F [--tgt-train F] | train MODEL --images F [options]",
   "Trains a built-in architecture on sentence pairs, or fine-tunes an image classifier.",
   "Trains a built-in architecture on sentence pairs (decoder_only: lines): text through "
   "a joint SentencePiece BPE vocabulary trained first, or lines of ids; plain or .gz. "
   "Batches of at most --batch-tokens padded tokens, bucketed by length and shuffled "
   "per epoch by the seed; cross-entropy with label smoothing, Adam at the paper's "
   "rate; compiled with the fusion strategy (or on the fp64 reference backend). "
   "Validation and a checkpoint at each epoch's end; docs/training.md. With --images, "
   "MODEL is a Hugging Face image classifier's directory (ViTForImageClassification) "
   "fine-tuned from its weights on labelled images (cross-entropy, no label smoothing "
   "unless asked), --batch images per batch; the run's directory ends as a Hugging Face "
   "directory of the fine-tuned model; docs/vision.md.",
   {{"--src-train", "FILE", "sources (decoder_only: the lines), one sentence per line"},
    {"--images", "FOLDER|CSV", "fine-tune an image classifier on a folder of class folders, "
                               "or a CSV of path,label lines"},
    {"--valid-images", "FOLDER|CSV", "--images: validation loss and accuracy at each "
                                     "epoch's end"},
    {"--batch", "N", "--images: images per batch (default 8)"},
    {"--tgt-train", "FILE", "targets, one per source (encoder_decoder)"},
    {"--src-valid", "FILE", "validation sources: loss and perplexity at each epoch's end"},
    {"--tgt-valid", "FILE", "validation targets, one per source"},
    {"--valid-bleu", nullptr, "also greedy BLEU on the validation set (13a, as sacreBLEU)"},
    {"--tokenizer", "KIND", "sentencepiece (text; trained on the training data) or ids "
                            "(lines of ids; the default)"},
    {"--vocab-size", "N", "sentencepiece: pieces (default 8000); the config's vocabulary "
                          "sizes follow it"},
    {"--skip-long", nullptr, "drop pairs over max_seq_len (and say how many) instead of "
                             "failing"},
    {"--init-weights", "FILE", "initial weights (safetensors); random from --seed when absent"},
    {"--epochs", "N", "train N epochs (default 1 when neither --steps nor --time-limit)"},
    {"--steps", "N", "stop at step N (the run's total, resumed runs included)"},
    {"--time-limit", "MIN", "stop after MIN minutes of wall time since the start"},
    {"--batch-tokens", "N", "padded tokens per batch, source or target side (default 4096)"},
    {"--max-sentences", "N", "at most N sentences per batch (default: no limit)"},
    {"--batching", "HOW", "bucket (by length, shuffled per epoch: the default) or file "
                          "(consecutive lines, every epoch alike)"},
    {"--accumulate", "K", "K consecutive batches are the micro-batches of one step: the loss "
                          "and gradients are their tokens' mean (default 1)"},
    {"--shards", "N", "cut each batch into N shards whose gradients are summed in shard order: "
                      "the run `mpirun -np N transfuse train` gives, in one process "
                      "(docs/distributed.md)"},
    {"--warmup", "N", "warmup steps of the learning rate (default 4000)"},
    {"--lr-factor", "X", "factor of the learning rate (default 1)"},
    {"--label-smoothing", "X", "label smoothing (default 0.1)"},
    {"--dropout", "X", "dropout rate (default: the config's)"},
    {"--clip-norm", "X", "clip the gradients' global norm to X (default: no clipping)"},
    {"--weight-decay", "X", "AdamW's decoupled weight decay (default 0)"},
    {"--seed", "S", "seed of the random weights, the batches and the dropout masks "
                    "(default 0)"},
    {"--log-json", "FILE", "one JSON object per step (step, loss, lr, tokens, tokens_per_s, "
                           "grad_norm) and per validation (epoch, valid_loss, valid_bleu)"},
    {"--no-progress", nullptr, "plain log lines even on a terminal"},
    {"--grads-out", "FILE", "the first step's gradients (safetensors, grad.<name>: F64 from "
                            "the reference, F32 compiled)"},
    {"--checkpoint-dir", "DIR", "the run's directory: config, tokenizer, a checkpoint at each "
                                "epoch's end and at the last step (reference backend: "
                                "DIR/model.safetensors)"},
    {"--save-every", "N", "also a checkpoint every N steps"},
    {"--keep", "N", "keep the last N checkpoints (and the best by validation loss)"},
    {"--resume", nullptr, "continue the run in --checkpoint-dir from its newest whole "
                          "checkpoint, bit for bit"},
    {"--backend", "B", "compiled (default: the compiled train step) or reference (fp64)"},
    {"--fusion", "STRATEGY", "compiled: the fusion strategy of forward and backward "
                             "(default all)"},
    {"--threads", "N", "compiled: threads (default: one per core)"},
    {"--dtype", "T", "compiled, cpu: f32 (default) or bf16 (mixed precision: the forward "
                     "and backward products on bf16 operands, fp32 master weights, Adam, "
                     "norms, softmax and the loss; docs/bf16.md)"},
    {"--target", "NAME", "compiled: cpu (default) or cuda (the train step and Adam on a GPU)"},
    {"--device", "N", "--target cuda: the GPU it runs on (default 0)"}},
   runTrain},
  {"average-checkpoints", "average-checkpoints DIR --last N -o OUT",
   "Averages the last N checkpoints of a training run.",
   "Averages the weights of the last N whole checkpoints of a training run's directory "
   "(the paper's last 5 or 20) into the checkpoint OUT; `translate DIR --checkpoint "
   "averaged` reads DIR/averaged.",
   {{"--last", "N", "how many (default 5)"},
    {"-o", "OUT", "the averaged checkpoint (a directory, replaced atomically)"}},
   runAverageCheckpoints},
  {"translate", "translate DIR [options] < SOURCES",
   "Translates with a compiled encoder_decoder's KV cache.",
   "Translates with a compiled encoder_decoder's KV cache: one source of space-separated "
   "ids per line (stdin by default, without BOS/EOS: the config's conventions add them), "
   "one output of ids per line. Text in and out instead where DIR carries a tokenizer: "
   "a Marian directory's (source.spm, target.spm, vocab.json) compiled into DIR, or a "
   "training run's checkpoint directory (the model compiled on first use and cached "
   "there); --ids keeps ids. Greedy by default; beam search with the paper's length "
   "penalty; sampling. Every line is translated before anything is printed.",
   {{"--dtype", "T", "checkpoint directories: f32 (default), bf16 (products on bf16 "
                     "operands; docs/bf16.md) or int8 (linear layers on int8 weights; "
                     "docs/int8.md)"},
    {"--checkpoint", "WHICH", "checkpoint directories: best (by validation loss; the "
                              "default), last, averaged, or a checkpoint's name"},
    {"--weights", "FILE", "weights (safetensors); random from --weights-seed when absent"},
    {"--weights-seed", "N", "seed of the random weights (default 0)"},
    {"--input", "FILE", "sources (default: stdin)"},
    {"--ids", nullptr, "ids in and out even where DIR carries a tokenizer"},
    {"--beam", "K", "beam size (default 1: greedy)"},
    {"--alpha", "A", "length penalty ((5 + len) / 6)^A (default 0: none; the paper: 0.6)"},
    {"--max-len", "N", "at most N output tokens, EOS not counted (default: source length + 50, "
                       "capped by the cache)"},
    {"--min-len", "N", "no EOS before N output tokens (default 0)"},
    {"--n-best", "N", "print 'i ||| ids ||| score' for the N best (score: normalized "
                      "log-probability)"},
    {"--scores", nullptr, "n-best format with the raw log-probability appended"},
    {"--prefix-ids", "FILE", "forced output prefixes, one line of ids per source"},
    {"--no-repeat-ngram", "N", "never repeat an n-gram of N tokens"},
    {"--repetition-penalty", "X", "divide (or multiply, when negative) logits of output "
                                  "tokens by X"},
    {"--sample", nullptr, "sample instead of searching (beam 1)"},
    {"--temperature", "T", "--sample: softmax temperature (default 1)"},
    {"--top-k", "K", "--sample: the K likeliest tokens only (default: all)"},
    {"--top-p", "P", "--sample: the smallest set with probability P (default 1)"},
    {"--seed", "S", "--sample: seed; with the line index it keys the draws (default 0)"},
    {"--batch-size", "B", "sources per batch (default: what the artifact's rows allow, "
                          "up to 32)"},
    {"--threads", "T", "threads (default: one per hardware thread)"},
    {"--device", "N", "a model compiled with --target cuda: the GPU it runs on (default 0)"}},
   runTranslate},
  {"generate",
   "generate DIR (--prompt \"TEXT\" | --prompt-file FILE | --prompt-ids \"IDS\" | "
   "--prompt-ids-file FILE) --max-new N [options]",
   "Continues prompts with a decoder_only model's KV cache.",
   "Continues prompts with a compiled decoder_only model's KV cache. Text prompts go through "
   "the tokenizer.json the artifact carries (its template's specials added) and the "
   "continuations come back as text, one per line (as they are: a continuation may hold "
   "newlines); id prompts are space-separated ids used as given, the new ids per line. Greedy "
   "by default, sampling with --sample, beams with --beam. Prompts batch in length order, "
   "lengths mixed.",
   {{"--dtype", "T", "checkpoint directories: f32 (default), bf16 (products on bf16 "
                     "operands; docs/bf16.md) or int8 (linear layers on int8 weights; "
                     "docs/int8.md)"},
    {"--weights", "FILE", "weights (safetensors); random from --weights-seed when absent"},
    {"--weights-seed", "N", "seed of the random weights (default 0)"},
    {"--prompt", "TEXT", "one prompt of text"},
    {"--prompt-file", "FILE", "prompts of text, one per line"},
    {"--prompt-ids", "IDS", "one prompt of ids"},
    {"--prompt-ids-file", "FILE", "prompts of ids, one per line"},
    {"--stream", nullptr, "print each token as it is chosen, one prompt at a time (beam 1)"},
    {"--max-new", "N", "tokens to generate per prompt (at most; EOS ends one early)"},
    {"--eos-id", "E", "end of sequence (default: the config's eos_id, and for an artifact of "
                      "a Hugging Face directory every eos_token_id of its config.json and "
                      "generation_config.json and, with text, its tokenizer's eos_token; "
                      "none: exactly N)"},
    {"--min-len", "N", "no EOS before N new tokens"},
    {"--beam", "K", "beam size (default 1: greedy)"},
    {"--alpha", "A", "beam search's length penalty exponent (default 0)"},
    {"--n-best", "N", "continuations per prompt (one line each; default 1)"},
    {"--no-repeat-ngram", "N", "never repeat an n-gram of N tokens"},
    {"--repetition-penalty", "X", "divide (or multiply, when negative) logits of tokens "
                                  "already output by X"},
    {"--sample", nullptr, "sample instead of searching (beam 1)"},
    {"--temperature", "T", "--sample: softmax temperature (default 1)"},
    {"--top-k", "K", "--sample: the K likeliest tokens only (default: all)"},
    {"--top-p", "P", "--sample: the smallest set with probability P (default 1)"},
    {"--seed", "S", "--sample: seed; with the line index it keys the draws (default 0)"},
    {"--batch-size", "B", "prompts per batch (default: what the artifact's rows allow, "
                          "up to 32)"},
    {"--threads", "T", "threads (default: one per hardware thread)"},
    {"--device", "N", "a model compiled with --target cuda: the GPU it runs on (default 0)"}},
   runGenerate},
  {"score", "score DIR --input SRC --targets TGT [options]",
   "Scores targets given their sources by forced decoding.",
   "Forced decoding: for each source and target (lines of ids without BOS/EOS), the "
   "total log-probability of the target with its EOS, then each token's: "
   "'total ||| lp1 lp2 ... lpEOS'.",
   {{"--input", "FILE", "sources"},
    {"--targets", "FILE", "targets, one per source"},
    {"--weights", "FILE", "weights (safetensors); random from --weights-seed when absent"},
    {"--weights-seed", "N", "seed of the random weights (default 0)"},
    {"--batch-size", "B", "pairs per batch (default: up to 32)"},
    {"--threads", "T", "threads (default: one per hardware thread)"},
    {"--device", "N", "a model compiled with --target cuda: the GPU it runs on (default 0)"}},
   runScore},
  {"stress", "stress DIR|MODEL... [options]",
   "Runs compiled models from many threads with bad inputs.",
   "Runs compiled models (directories, or definitions compiled first with fusion all) "
   "from many threads at once on inputs of mixed sizes with bad inputs interleaved: "
   "every good result must equal the serial one bit for bit, every bad input must be "
   "refused naming the tensor, and the models must work afterwards.",
   {{"--threads", "T", "threads running at once (default 8)"},
    {"--runs", "N", "runs per thread (default 1000)"},
    {"--bad-every", "K", "about one run in K has a bad input (default 8)"},
    {"--lifecycle", "N", "then create, run and destroy the first model N times, and load a "
                         "bad weights file N times (default 0)"},
    {"--model-threads", "T", "each model's own threads (default 1)"},
    {"--seed", "N", "seed of weights, inputs and the runs' order (default 0)"},
    {"--max-batch", "N", "definitions: maximum batch (default 4)"},
    {"--max-seq-len", "N", "definitions: maximum sequence length (default 16)"},
    {"--cxx", "PATH", "definitions: C++ compiler for the artifacts"}},
   runStress},
  {"export-kernel",
   "export-kernel attention|decode_attention|add_layer_norm|linear|gemm|softmax [options] -o DIR",
   "Writes one specialized kernel as a source pair to embed.",
   "Writes one kernel of the library, specialized to a shape and options, as a source "
   "pair an app embeds: DIR/NAME.h (a C function, its formula, shapes, layout and "
   "threading), DIR/NAME.cc (the kernel library's own code; needs only Highway) and "
   "DIR/NAME_test.cc (checks it against a scalar reference). docs/export.md.",
   {{"-o", "DIR", "output directory (created if missing)"},
    {"--name", "NAME", "C symbol and file stem (default tf_KIND)"},
    {"--dtype", "TYPE", "f32 (default); int8 for linear (weights quantized per output row, "
                        "docs/int8.md); bf16 for gemm, linear and attention (products' operands "
                        "rounded to bf16, fp32 sums, docs/bf16.md)"},
    {"--batch", "B", "attention kinds: batch (default 1)"},
    {"--heads", "H", "attention kinds: heads (default 1)"},
    {"--seq-q", "S", "attention kinds: queries per sequence"},
    {"--seq-k", "S", "attention: keys (default --seq-q); decode_attention: the cache's "
                     "capacity (the call gives the keys cached so far)"},
    {"--head-dim", "D", "attention kinds: head dimension (1..256)"},
    {"--causal", nullptr, "attention kinds: query i sees keys j <= i + Sk - Sq"},
    {"--mask", "KIND", "attention kinds: none (default), key_padding (lengths per batch "
                       "row) or additive (attention: added to the scores)"},
    {"--rows", "N", "add_layer_norm, softmax: rows; gemm, linear: M"},
    {"--cols", "N", "add_layer_norm, softmax: row width"},
    {"--k", "K", "gemm, linear: the inner dimension"},
    {"--n", "N", "gemm, linear: output columns"},
    {"--epilogue", "LIST", "gemm, linear: bias, relu|gelu|gelu_tanh|silu, residual (comma-separated)"},
    {"--epsilon", "X", "add_layer_norm: epsilon (default 1e-5)"}},
   runExportKernel},
  {"demo", "demo [options]",
   "Runs the base Transformer once on the reference backend.",
   "Builds the paper's base Transformer (embedded config), draws random weights and "
   "tokens, and runs one forward pass on the reference backend, printing what it did.",
   {{"--model", "FILE", "another model definition instead of the base Transformer"},
    {"--batch", "B", "batch size (default 2)"},
    {"--src-len", "S", "source length (default 12)"},
    {"--tgt-len", "T", "target length (default 10)"},
    {"--seed", "N", "seed of weights and tokens (default 0)"}},
   runDemo},
};

} // namespace

const std::vector<Command> &mlir::transfuse::tools::commands() { return kCommands; }
