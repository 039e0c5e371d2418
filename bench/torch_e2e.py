#!/usr/bin/python3
"""End-to-end PyTorch CPU inference benchmark: the peer figure for Transfuse.

Measures the wall time of one full forward pass (tokens in, logits out) of a model
config from models/*.json run by stock PyTorch on the CPU, in float32, with random
weights, so that Transfuse's own end-to-end figures can be set side by side with it.

  encoder_decoder: the PyTorch translation tutorial's Seq2SeqTransformer
                   ("Language translation with nn.Transformer and torchtext"):
                   nn.Transformer (batch_first=True), TokenEmbedding * sqrt(d_model),
                   positional encoding, generator Linear. Inputs are B x S source and
                   B x T target tokens with the tutorial's masks: a zero bool src_mask,
                   the causal float tgt_mask of generate_square_subsequent_mask, and
                   src/tgt/memory key padding masks (tokens == pad_id; all False here,
                   since tokens are drawn from [4, vocab), but passed as the tutorial does).
  decoder_only   : GPT-2 (learned positions, pre-LN, gelu_tanh, causal attention, LM
                   head tied to wte) written with plain torch modules; B x T tokens.

The model classes are those of tests/oracle/check_against_torch.py (checked there
against the NumPy oracle and Transfuse), imported from that file.

Setup: torch.set_num_threads(--threads), torch.set_num_interop_threads(1), eval mode,
torch.inference_mode(), float32, weights from PyTorch's default initialization (GPT-2's
Conv1D has none: N(0, 0.02) weights, zero biases, as Hugging Face initializes them).
--warmup forwards are run untimed, then --iters forwards are each timed with
time.perf_counter(); the median and minimum are reported, with the achieved GFLOP/s.

FLOPs count a multiply-add as 2: every linear layer (2 * rows * in * out, including
attention's q/k/v/output projections and, for cross attention, the k/v projections
of the encoder memory in every decoder layer), attention's score and value products
(2 * B * H * Sq * Sk * Dh each; causal attention is counted in full), and the output
projection (generator / LM head). Embeddings, norms, softmax, activations and residual
adds are not counted. Transformer-base at B=8, S=T=64: 65.7 GFLOP.

Examples (from the repository root):
  /usr/bin/python3 bench/torch_e2e.py --model models/transformer-base.json \\
      --batch 8 --src-len 64 --tgt-len 64 --threads 1 --warmup 3 --iters 20
  /usr/bin/python3 bench/torch_e2e.py --model models/gpt2-small.json --batch 1 --tgt-len 128 --json
  /usr/bin/python3 bench/torch_e2e.py --model models/transformer-base.json --flops-only

--runtime onnxruntime runs the same model (same weights, same inputs) in ONNX
Runtime instead: it is exported with torch.onnx.export (the TorchScript
exporter, `dynamo=False` where torch has dynamo) in train mode with every dropout
rate 0 and `training=TrainingMode.PRESERVE`, since in eval mode the exporter meets
nn.TransformerEncoder's fused fast path and fails; the logits are checked
against PyTorch's before timing. The session gets --threads intra-op threads,
one inter-op thread, sequential execution and every graph optimization.
  /work/venv-ort/bin/python bench/torch_e2e.py --model models/transformer-base.json \
      --runtime onnxruntime --threads 2
(a venv with --system-site-packages over Debian's torch and numpy, plus
`pip install onnxruntime`).

Exit status: 0 on success, 2 on a bad argument or config, 77 when torch (or,
with --runtime onnxruntime, onnxruntime) is not importable (--flops-only needs
neither).
"""
import argparse
import json
import os
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ORACLE_DIR = os.path.join(REPO, "tests", "oracle")

# Defaults of models/README.md's table; None = required.
DEFAULTS = {
    "encoder_decoder": dict(
        d_model=512, num_heads=8, d_ff=None, num_encoder_layers=6, num_decoder_layers=6,
        src_vocab_size=None, tgt_vocab_size=None, max_seq_len=512, dropout=0.1,
        activation="relu", norm_position="post", final_norm=True, layer_norm_eps=1e-5,
        share_embeddings=False, tie_output=False, positional="sinusoidal", pad_id=1,
        bos_id=2, eos_id=3),
    "decoder_only": dict(
        d_model=768, num_heads=12, d_ff=None, num_layers=12, vocab_size=None,
        max_seq_len=1024, dropout=0.1, activation="gelu_tanh", norm_position="pre",
        final_norm=True, layer_norm_eps=1e-5, tie_output=True, positional="learned",
        pad_id=None, bos_id=50256, eos_id=50256),
}
REQUIRED = {"encoder_decoder": ("src_vocab_size", "tgt_vocab_size"), "decoder_only": ("vocab_size",)}
FIRST_TOKEN = 4  # tokens are drawn from [4, vocab): never a pad/bos/eos id of the shipped configs


def fail(msg):
    print(f"torch_e2e.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def load_config(path):
    """The config with models/README.md's defaults filled in."""
    try:
        with open(path) as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    arch = raw.get("architecture")
    if arch not in DEFAULTS:
        fail(f"{path}: key 'architecture' must be 'encoder_decoder' or 'decoder_only', got {arch!r}")
    unknown = sorted(set(raw) - set(DEFAULTS[arch]) - {"architecture"})
    if unknown:
        fail(f"{path}: unknown key(s) for {arch}: {', '.join(unknown)}")
    c = dict(DEFAULTS[arch], **raw)
    for k in REQUIRED[arch]:
        if c[k] is None:
            fail(f"{path}: missing required key '{k}'")
    if c["d_ff"] is None:
        c["d_ff"] = 4 * c["d_model"]
    if c["d_model"] % c["num_heads"]:
        fail(f"{path}: d_model {c['d_model']} is not divisible by num_heads {c['num_heads']}")
    if arch == "encoder_decoder" and c["pad_id"] is None:
        fail(f"{path}: encoder_decoder needs a pad_id")
    return c


def forward_flops(c, B, S, T):
    """Forward FLOPs by part (multiply-add = 2); S is ignored for decoder_only."""
    d, H, ff = c["d_model"], c["num_heads"], c["d_ff"]
    dh = d // H

    def linear(rows, n_in, n_out):
        return 2 * rows * n_in * n_out

    def attention(sq, sk):  # q k^T and p v
        return 2 * (2 * B * H * sq * sk * dh)

    def ffn(rows):
        return linear(rows, d, ff) + linear(rows, ff, d)

    rt = B * T
    if c["architecture"] == "encoder_decoder":
        rs = B * S
        enc = linear(rs, d, 3 * d) + attention(S, S) + linear(rs, d, d) + ffn(rs)
        dec = (linear(rt, d, 3 * d) + attention(T, T) + linear(rt, d, d)           # self attention
               + linear(rt, d, d) + linear(rs, d, 2 * d) + attention(T, S) + linear(rt, d, d)  # cross
               + ffn(rt))
        return {"encoder": c["num_encoder_layers"] * enc, "decoder": c["num_decoder_layers"] * dec,
                "generator": linear(rt, d, c["tgt_vocab_size"])}
    block = linear(rt, d, 3 * d) + attention(T, T) + linear(rt, d, d) + ffn(rt)
    return {"blocks": c["num_layers"] * block, "lm_head": linear(rt, d, c["vocab_size"])}


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="torch_e2e.py",
        description="Time a full forward pass (tokens -> logits) of a models/*.json config in "
                    "PyTorch on the CPU (fp32, eval, inference_mode, random weights): the peer "
                    "figure beside Transfuse's end-to-end numbers.",
        epilog="FLOPs count multiply-adds as 2 over all linear layers, attention's score and value "
               "products and the output projection. Exit 77 when torch is not importable.")
    ap.add_argument("--model", required=True, metavar="CONFIG.json",
                    help="model config, e.g. models/transformer-base.json (encoder_decoder) or "
                         "models/gpt2-small.json (decoder_only)")
    ap.add_argument("--batch", type=int, default=8, metavar="B", help="batch size (default 8)")
    ap.add_argument("--src-len", type=int, default=64, metavar="S",
                    help="source length, encoder_decoder only (default 64)")
    ap.add_argument("--tgt-len", type=int, default=64, metavar="T",
                    help="target length; the sequence length for decoder_only (default 64)")
    ap.add_argument("--threads", type=int, default=1, metavar="N",
                    help="torch.set_num_threads(N); interop threads are always 1 (default 1)")
    ap.add_argument("--warmup", type=int, default=3, metavar="W", help="untimed forwards first (default 3)")
    ap.add_argument("--iters", type=int, default=20, metavar="I", help="timed forwards (default 20)")
    ap.add_argument("--seed", type=int, default=0, help="seed of weights and tokens (default 0)")
    ap.add_argument("--encoder-fastpath", action="store_true",
                    help="encoder_decoder: pass src_mask=None instead of the tutorial's all-False "
                         "src_mask, letting eval-mode nn.TransformerEncoder take PyTorch's fused "
                         "fast path where it otherwise can (off by default: the tutorial's masks)")
    ap.add_argument("--runtime", choices=("pytorch", "onnxruntime"), default="pytorch",
                    help="who runs the model: PyTorch itself, or ONNX Runtime on its ONNX export "
                         "(default pytorch)")
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32",
                    help="bf16: the model converted with .to(torch.bfloat16) (oneDNN's bf16 kernels, "
                         "AMX where the CPU has it); pytorch only")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    ap.add_argument("--flops-only", action="store_true",
                    help="print the forward FLOP count for the shape and exit (no torch needed, no timing)")
    a = ap.parse_args(argv)
    for name in ("batch", "src_len", "tgt_len", "threads", "iters"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if a.warmup < 0:
        ap.error("--warmup must be >= 0")
    return a


def import_torch():
    try:
        import torch
    except ImportError as e:
        print(f"SKIPPED: torch is not importable ({e}); install it (apt-get install python3-torch)")
        sys.exit(77)
    return torch


def build(torch, c, B, S, T, encoder_fastpath):
    """Model and a zero-argument forward closure over fixed inputs."""
    sys.path.insert(0, ORACLE_DIR)
    import check_against_torch as ref  # the oracle check's tutorial model and GPT-2

    if c["architecture"] == "encoder_decoder":

        class TutorialSeq2Seq(ref.Seq2SeqTransformer):
            """The tutorial's forward signature: the caller makes the masks (create_mask)."""

            def pos(self, side, n):
                if self.c["positional"] == "sinusoidal":  # the tutorial's buffer, [maxlen, 1, d]
                    return self.positional_encoding.pos_embedding[:n, 0]
                return super().pos(side, n)

            def forward(self, src, tgt, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask,
                        memory_key_padding_mask):
                src_emb = self.src_tok_emb(src) + self.pos("src", src.shape[1])
                tgt_emb = self.tgt_tok_emb(tgt) + self.pos("tgt", tgt.shape[1])
                outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None,
                                        src_padding_mask, tgt_padding_mask, memory_key_padding_mask)
                return self.generator(outs)

        def generate_square_subsequent_mask(sz):  # the tutorial's: 0 on and below the diagonal, -inf above
            mask = (torch.triu(torch.ones((sz, sz))) == 1).transpose(0, 1)
            return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)

        model = TutorialSeq2Seq(c)
        src = torch.randint(FIRST_TOKEN, c["src_vocab_size"], (B, S))
        tgt = torch.randint(FIRST_TOKEN, c["tgt_vocab_size"], (B, T))
        # The tutorial's create_mask (batch-first here, so no transpose of the padding masks).
        src_mask = None if encoder_fastpath else torch.zeros((S, S)).type(torch.bool)
        tgt_mask = generate_square_subsequent_mask(T)
        src_padding_mask, tgt_padding_mask = src == c["pad_id"], tgt == c["pad_id"]
        model.eval()
        args = [src, tgt, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask]
        if src_mask is None:
            args[2] = torch.zeros((S, S)).type(torch.bool)  # ONNX inputs are tensors
        return model, lambda: model(src, tgt, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask,
                                    src_padding_mask), args

    model = ref.GPT2LMHead(c)
    with torch.no_grad():  # Conv1D starts uninitialized (torch.empty): GPT-2's init
        for m in model.modules():
            if isinstance(m, ref.Conv1D):
                m.weight.normal_(0.0, 0.02)
                m.bias.zero_()
    tokens = torch.randint(FIRST_TOKEN, c["vocab_size"], (B, T))
    model.eval()
    return model, lambda: model(tokens), [tokens]


def onnxruntime_forward(torch, model, forward_args, threads):
    """Exports `model` on `forward_args` to ONNX and returns (a zero-argument
    ONNX Runtime forward, the onnxruntime version)."""
    try:
        import onnxruntime as ort
    except ImportError as e:
        print(f"SKIPPED: onnxruntime is not importable ({e}); pip install onnxruntime")
        sys.exit(77)
    import inspect
    import tempfile
    for m in model.modules():  # train mode without randomness: dropout off
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        if hasattr(m, "dropout") and isinstance(getattr(m, "dropout"), float):
            m.dropout = 0.0
    model.train()
    names = [f"in{i}" for i in range(len(forward_args))]
    path = os.path.join(tempfile.mkdtemp(prefix="transfuse-ort-"), "model.onnx")
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    # Constant folding is safe here (the weights are not trained); the logits
    # are checked against PyTorch's below.
    warnings.filterwarnings("ignore", message="It is recommended that constant folding be turned off")
    with torch.no_grad():
        torch.onnx.export(model, tuple(forward_args), path, input_names=names,
                          output_names=["logits"], opset_version=17,
                          training=torch.onnx.TrainingMode.PRESERVE, **kwargs)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    used = {i.name for i in session.get_inputs()}  # the exporter drops unused inputs
    feeds = {n: a.numpy() for n, a in zip(names, forward_args) if n in used}
    return (lambda: torch.from_numpy(session.run(None, feeds)[0])), ort.__version__


def main(argv):
    a = parse_args(argv)
    c = load_config(a.model)
    ed = c["architecture"] == "encoder_decoder"
    B, T = a.batch, a.tgt_len
    S = a.src_len if ed else None
    vocab = c["tgt_vocab_size"] if ed else c["vocab_size"]
    for name, n in (("--src-len", S), ("--tgt-len", T)):
        if n is not None and n > c["max_seq_len"]:
            fail(f"{name} {n} exceeds the config's max_seq_len {c['max_seq_len']}")
    for key in (("src_vocab_size", "tgt_vocab_size") if ed else ("vocab_size",)):
        if c[key] <= FIRST_TOKEN:
            fail(f"{a.model}: {key} {c[key]} leaves no tokens in [{FIRST_TOKEN}, vocab)")
    parts = forward_flops(c, B, S, T)
    flops = sum(parts.values())
    shape = f"B={B} S={S} T={T}" if ed else f"B={B} T={T}"

    if a.flops_only:
        if a.json:
            print(json.dumps({"model": a.model, "batch": B, "src_len": S, "tgt_len": T, "flops": flops,
                              "gflop": flops / 1e9, "parts": parts}))
        else:
            print(f"{a.model} ({c['architecture']}) {shape}: forward {flops:,} FLOP = {flops / 1e9:.2f} GFLOP")
            for k, v in parts.items():
                print(f"  {k:<10} {v / 1e9:8.3f} GFLOP")
        return 0

    torch = import_torch()
    warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors is in prototype stage")
    torch.set_num_interop_threads(1)  # before any parallel work
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model, forward, forward_args = build(torch, c, B, S, T, a.encoder_fastpath)
    peer, version = "pytorch", torch.__version__
    if a.dtype == "bf16":
        if a.runtime != "pytorch":
            fail("--dtype bf16 is an option of --runtime pytorch")
        model.to(torch.bfloat16)
        # The float masks (the causal mask's -inf) in the model's dtype.
        args = [x.to(torch.bfloat16) if torch.is_tensor(x) and x.is_floating_point() else x
                for x in forward_args]
        forward = lambda: model(*args)  # noqa: E731
    if a.runtime == "onnxruntime":
        with torch.inference_mode():
            expected = forward()
        forward, version = onnxruntime_forward(torch, model, forward_args, a.threads)
        got = forward()
        scale = max(1.0, float(expected.abs().max()))
        err = float((got - expected).abs().max()) / scale
        if not err < 1e-3:
            fail(f"ONNX Runtime's logits differ from PyTorch's by {err:.3g} (relative to max(1, |ref|))")
        peer = "onnxruntime"

    times = []
    with torch.inference_mode():
        for _ in range(a.warmup):
            out = forward()
        for _ in range(a.iters):
            t0 = time.perf_counter()
            out = forward()
            times.append(time.perf_counter() - t0)
    want = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    if tuple(out.shape) != (B, T, vocab) or out.dtype != want:
        print(f"torch_e2e.py: error: logits {out.dtype} {list(out.shape)}, expected {want} {[B, T, vocab]}",
              file=sys.stderr)
        return 1
    if not torch.isfinite(out).all():
        print("torch_e2e.py: warning: the logits are not all finite", file=sys.stderr)

    median_s, min_s = statistics.median(times), min(times)
    res = {"peer": peer, "version": version, "dtype": a.dtype, "model": a.model, "torch_version": torch.__version__,
           "threads": torch.get_num_threads(), "batch": B, "src_len": S, "tgt_len": T,
           "median_ms": median_s * 1e3, "min_ms": min_s * 1e3, "gflop": flops / 1e9,
           "gflops": flops / 1e9 / median_s}
    if a.json:
        print(json.dumps(res))
        return 0
    print(f"{peer} {version}, {res['threads']} thread(s) (interop 1), {a.dtype}"
          + (", eval, inference_mode" if peer == "pytorch" else f", exported from torch {torch.__version__}"))
    print(f"model  {a.model} ({c['architecture']}), {shape}, "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.4g} M parameters")
    print(f"flops  {flops / 1e9:.4g} GFLOP per forward")
    print(f"time   median {res['median_ms']:.3f} ms, min {res['min_ms']:.3f} ms over {a.iters} iters "
          f"({a.warmup} warmup)")
    print(f"rate   {res['gflops']:.4g} GFLOP/s at the median, {flops / 1e9 / min_s:.4g} GFLOP/s at the min")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
