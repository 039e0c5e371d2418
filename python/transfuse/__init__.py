"""Transfuse from Python: compile Transformer models, run, decode, embed and train them.

    import numpy as np, transfuse
    model = transfuse.compile("models/tiny-encoder-decoder.json", fusion="all")
    out = model.run(src_tokens=np.array([[5, 6, 7]]), tgt_tokens=np.array([[1, 5]]))
    out["logits"].shape          # (1, 2, vocab)

The package is a thin layer over the same libraries as the `transfuse`
command (the compiler library and the runtime's host side, through the
extension transfuse._transfuse); every call has the CLI's options and
messages. docs/python.md shows each call.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable, Mapping, Sequence

from . import _transfuse
from ._transfuse import CompileError, Error, InputError

__all__ = [
    "CompileError", "Error", "InputError", "Model", "Trainer", "compile", "load",
    "fusion_report", "graph",
]

def _is_mlir_text(text: str) -> bool:
    return "\n" in text or text.lstrip().startswith(("module", "func.func", "#", "//"))


def compile(model: "str | os.PathLike[str] | Mapping[str, Any]",
            output_dir: "str | os.PathLike[str] | None" = None, *,
            fusion: str = "all", target: str = "cpu", emit: str = "shared",
            max_batch: int = 0, max_seq_len: int = 0, max_beam: int = 0,
            dims: "Mapping[str, int] | None" = None, train: bool = False,
            verify: bool = False, tolerance: float = 1e-3,
            weights: "str | os.PathLike[str] | None" = None, seed: "int | None" = None,
            threads: "int | None" = None, dtype: str = "f32") -> "Model":
    """Compiles a model definition into an artifact directory and loads it.

    `model` is a built-in architecture's config (a .json path or a dict), MLIR
    text (or a .mlir path), a Hugging Face directory or an ONNX file. Without
    `output_dir` the artifact lives in a temporary directory that the returned
    Model removes when it is collected. `max_batch`, `max_seq_len` and
    `max_beam` (0: the definition's defaults) and `dims` (an ONNX file's
    dim_params) are the compiled maxima. With `verify`, the compiled model is
    checked against the fp64 reference backend (random weights and padded
    inputs, from `seed`) and a CompileError is raised past `tolerance`
    (relative to max(1, max |reference|)); Model.compile_info holds the
    figures. `dtype` is f32, bf16 (every product on bf16 operands, fp32 sums;
    training too: docs/bf16.md) or int8 (cpu inference: linear layers on int8
    weights, docs/int8.md). `weights`, `seed` and `threads` are load's; emit other than
    "shared" (mlir, kernels, cpp, static, exe, dot) returns no loadable model:
    use compile_only.
    """
    info, scratch = _compile(model, output_dir, fusion=fusion, target=target, emit=emit,
                             max_batch=max_batch, max_seq_len=max_seq_len, max_beam=max_beam,
                             dims=dims, train=train, verify=verify, tolerance=tolerance,
                             seed=seed, dtype=dtype)
    if emit != "shared":
        raise Error(f"emit={emit!r} writes no loadable library: call transfuse.compile_only")
    m = load(info["dir"], weights=weights, seed=seed, threads=threads)
    m.compile_info = info
    m._scratch = scratch
    return m


def compile_only(model: Any, output_dir: "str | os.PathLike[str]", **options: Any) -> dict:
    """compile's work without loading: the artifact's facts (dir, product,
    seconds, warnings, and with verify=True the verification) as a dict."""
    info, _ = _compile(model, output_dir, **options)
    return info


def _compile(model: Any, output_dir: Any, *, fusion: str = "all", target: str = "cpu",
             emit: str = "shared", max_batch: int = 0, max_seq_len: int = 0, max_beam: int = 0,
             dims: "Mapping[str, int] | None" = None, train: bool = False, verify: bool = False,
             tolerance: float = 1e-3, seed: "int | None" = None,
             dtype: str = "f32") -> "tuple[dict, Any]":
    scratch = None
    if output_dir is None:
        scratch = tempfile.TemporaryDirectory(prefix="transfuse-")
        output_dir = scratch.name
    output_dir = os.fspath(output_dir)
    definition = tempfile.TemporaryDirectory(prefix="transfuse-definition-")
    try:
        if isinstance(model, Mapping):
            path = os.path.join(definition.name, "model.json")
            with open(path, "w") as f:
                json.dump(model, f)
        elif isinstance(model, str) and not os.path.exists(model) and _is_mlir_text(model):
            path = os.path.join(definition.name, "model.mlir")
            with open(path, "w") as f:
                f.write(model)
        else:
            path = os.fspath(model)
            if not os.path.exists(path):
                raise Error(f"'{path}': no such model definition (a config .json, a .mlir, "
                            "a Hugging Face directory or a .onnx file)")
        from . import _compiler  # the compiler's module, loaded on first use
        info = _compiler._compile(path, output_dir, fusion, target, emit, max_batch,
                                   max_seq_len, max_beam, dict(dims or {}), train, verify,
                                   seed or 0, tolerance, dtype)
    finally:
        definition.cleanup()
    if verify and not info["verified"]:
        bad = [c for c in info["verify"] if not c["ok"]]
        if not info["concurrent_identical"]:
            raise CompileError("concurrent runs of the compiled model gave different outputs")
        c = bad[0]
        raise CompileError(
            f"the compiled model differs from the reference backend beyond tolerance "
            f"{tolerance}: @{c['entry']} B={c['batch']} S={c['src_len']} T={c['tgt_len']}: "
            f"max |compiled - reference| = {c['max_abs_error']:.3g} (bound {c['bound']:.3g})")
    return info, scratch


def load(dir: "str | os.PathLike[str]", weights: "str | os.PathLike[str] | None" = None,
         seed: "int | None" = None, threads: "int | None" = None) -> "Model":
    """Loads an artifact directory (DIR/libmodel.so through its C ABI).

    `weights`: a safetensors file, a shard index or a directory (a Hugging
    Face model's); without it the weights the artifact carries (an ONNX
    file's DIR/weights.safetensors), else random ones drawn from `seed`
    (default 0). `threads`: the model's threads (default one per core).
    """
    dir = os.fspath(dir)
    library = os.path.join(dir, "libmodel.so")
    if not os.path.exists(library):
        raise Error(f"'{dir}' has no libmodel.so (compile the model first)")
    if weights is None and os.path.exists(os.path.join(dir, "weights.safetensors")):
        weights = os.path.join(dir, "weights.safetensors")
    native = _transfuse._Model(library, None if weights is None else os.fspath(weights),
                               seed or 0, threads or 0, os.path.join(dir, "manifest.json"))
    return Model(dir, native)


class Model:
    """A compiled model, loaded: run its entry points, decode, read and write parameters.

    Thread-safe: several Python threads may call run() at once (the GIL is
    released while the model runs). Decoding calls on one Model take turns
    (they share its KV cache).
    """

    compile_info: "dict | None" = None

    def __init__(self, dir: str, native: Any):
        self.dir = dir
        self._native = native
        self._tokenizers: dict = {}
        self._scratch = None
        with open(os.path.join(dir, "manifest.json")) as f:
            self.manifest = json.load(f)

    def __repr__(self) -> str:
        return f"transfuse.Model({self.dir!r}, entries={self.entries}, fusion={self.fusion!r})"

    @property
    def entries(self) -> "list[str]":
        """The entry points (forward, encode, decode_step, embed, loss_grad, ...)."""
        return self._native.entries

    @property
    def fusion(self) -> str:
        return self._native.fusion

    @property
    def threads(self) -> int:
        return self._native.threads

    def signature(self, entry: str = "forward") -> dict:
        """An entry's inputs and outputs: name, dtype, shape (None for a dynamic
        dimension) and max_shape (its compiled maxima), and whether it uses state."""
        return self._native.signature(entry)

    def run(self, entry: str = "forward", /, **inputs: Any) -> "dict[str, Any]":
        """Runs an entry point on named inputs; returns its outputs as NumPy arrays.

        Inputs are anything with the buffer protocol or DLPack (NumPy arrays,
        PyTorch CPU tensors), read in place when their dtype and layout match
        (int64 token ids are taken as they are); outputs are arrays over the
        memory the model wrote. A wrong name, dtype or shape raises InputError
        before anything runs.
        """
        return self._native.run(entry, inputs)

    # --- parameters
    @property
    def parameters(self) -> "Parameters":
        """The weights by name, readable and writable as float32 arrays
        (model.parameters["encoder.layers.0.fc1.weight"] = array); Adam's
        moments through .adam_m and .adam_v."""
        return Parameters(self._native, 0)

    # --- text
    def tokenizer(self, kind: str = "directory") -> Any:
        """The tokenizer the artifact carries (a Hugging Face directory's files,
        or a Marian directory's SentencePiece models: kind="marian")."""
        if kind not in self._tokenizers:
            self._tokenizers[kind] = _transfuse._Tokenizer(self.dir, kind)
        return self._tokenizers[kind]

    def _text_in(self, lines: Sequence[Any], kind: str) -> "tuple[list, Any]":
        if all(isinstance(x, str) for x in lines) and lines:
            tok = self.tokenizer(kind)
            return [tok.encode(x) for x in lines], tok
        return [list(map(int, x)) for x in lines], None

    def translate(self, sources: "Sequence[str] | Sequence[Sequence[int]]", *, beam: int = 1,
                  alpha: float = 0.0, max_len: int = 0, min_len: int = 0, n_best: int = 1,
                  no_repeat_ngram: int = 0, repetition_penalty: float = 1.0,
                  sample: bool = False, temperature: float = 1.0, top_k: int = 0,
                  top_p: float = 1.0, seed: int = 0,
                  prefixes: "Sequence[Sequence[int]] | None" = None,
                  batch_size: "int | None" = None, return_scores: bool = False) -> list:
        """Translates sources (strings through the Marian tokenizer the artifact
        carries, or lists of ids without specials) with the KV cache: greedy,
        beam search or sampling, as `transfuse translate`. Returns one result per
        source: its best translation (a string, or a list of ids), or with
        n_best > 1 or return_scores a list of dicts (ids or text, score,
        log_prob, token_log_probs)."""
        ids, tok = self._text_in(sources, "marian")
        options = dict(beam=beam, alpha=alpha, max_len=max_len, min_len=min_len,
                       n_best=n_best, no_repeat_ngram=no_repeat_ngram,
                       repetition_penalty=repetition_penalty, sample=sample,
                       temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        result = self._native.translate(ids, options,
                                        None if prefixes is None else [list(p) for p in prefixes],
                                        batch_size)
        return _results(result, tok, n_best > 1 or return_scores)

    def generate(self, prompts: "Sequence[str] | Sequence[Sequence[int]]", *, max_new: int,
                 eos_id: "int | None" = None, min_len: int = 0, beam: int = 1,
                 alpha: float = 0.0, n_best: int = 1, no_repeat_ngram: int = 0,
                 repetition_penalty: float = 1.0, sample: bool = False,
                 temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                 batch_size: "int | None" = None, return_scores: bool = False) -> list:
        """Continues prompts (strings through the tokenizer the artifact carries,
        its template's specials added, or lists of ids) with a decoder_only
        model's KV cache, as `transfuse generate`: at most max_new new tokens
        each; EOS is the config's and every id the directory's files name (or
        eos_id). Returns the continuations as strings or id lists (dicts with
        n_best > 1 or return_scores)."""
        ids, tok = self._text_in(prompts, "directory")
        options = dict(beam=beam, alpha=alpha, max_len=max_new, min_len=min_len, n_best=n_best,
                       no_repeat_ngram=no_repeat_ngram, repetition_penalty=repetition_penalty,
                       sample=sample, temperature=temperature, top_k=top_k, top_p=top_p,
                       seed=seed)
        eos = self._native.token_ids()["eos"]
        if eos_id is None and eos >= 0:
            options["stop_ids"] = (tok.stop_ids(self.dir, eos) if tok is not None
                                   else _transfuse._stop_ids(self.dir, eos))
        result = self._native.generate(ids, options, eos_id, batch_size)
        return _results(result, tok, n_best > 1 or return_scores)

    def score(self, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], *,
              batch_size: "int | None" = None) -> "list[dict]":
        """Forced decoding: each target's log-probability (with its EOS) given its
        source, and each token's, as `transfuse score`."""
        return self._native.score([list(s) for s in sources], [list(t) for t in targets],
                                  batch_size)

    def embed(self, texts: "Sequence[str] | Sequence[Sequence[int]]", *, batch: int = 32,
              truncate: bool = True) -> Any:
        """Sentence embeddings [len(texts), width] from the `embed` entry (a
        sentence-transformers directory), texts through the model's tokenizer,
        truncated to its maximum length, batched by length as `transfuse embed`."""
        import numpy as np
        spec = self.signature("embed")["inputs"][0]
        compiled_batch, max_len = spec["max_shape"][0], spec["max_shape"][1]
        if texts and all(isinstance(t, str) for t in texts):
            tok = self.tokenizer()
            limit = max_len
            if tok.model_max_length() > 0:
                limit = min(limit, tok.model_max_length())
            sbert = os.path.join(self.dir, "sentence_bert_config.json")
            if os.path.exists(sbert):
                with open(sbert) as f:
                    limit = min(limit, int(json.load(f).get("max_seq_length", limit)))
            ids = [tok.encode(t, True, limit, truncate) for t in texts]
        else:
            ids = [list(map(int, t)) for t in texts]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        rows = min(batch, compiled_batch)
        out = None
        for start in range(0, len(order), rows):
            part = order[start:start + rows]
            length = len(ids[part[-1]])
            input_ids = np.zeros((len(part), length), np.int32)
            mask = np.zeros((len(part), length), np.int32)
            for r, i in enumerate(part):
                input_ids[r, :len(ids[i])] = ids[i]
                mask[r, :len(ids[i])] = 1
            inputs = {"input_ids": input_ids, "attention_mask": mask}
            if any(s["name"] == "token_type_ids" for s in self.signature("embed")["inputs"]):
                inputs["token_type_ids"] = np.zeros_like(input_ids)
            e = self.run("embed", **inputs)["sentence_embedding"]
            if out is None:
                out = np.zeros((len(ids), e.shape[1]), np.float32)
            out[part] = e
        return out if out is not None else np.zeros((0, 0), np.float32)


def _results(result: list, tok: Any, full: bool) -> list:
    def render(h: dict) -> dict:
        if tok is not None:
            h = dict(h, text=tok.decode(h["ids"]))
        return h
    if full:
        return [[render(h) for h in hyps] for hyps in result]
    return [(tok.decode(hyps[0]["ids"]) if tok is not None else hyps[0]["ids"]) for hyps in result]


class Parameters(Mapping):
    """A model's parameters by name (float32 arrays; a write reruns what depends
    on the weight before the next run)."""

    def __init__(self, native: Any, role: int):
        self._native, self._role = native, role

    def _names(self) -> "list[str]":
        return [name for name, role, _ in self._native.parameters() if role == self._role]

    def __getitem__(self, name: str) -> Any:
        return self._native.read_param(name, self._role)

    def __setitem__(self, name: str, value: Any) -> None:
        self._native.write_param(name, self._role, value)

    def __iter__(self):
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def shapes(self) -> "dict[str, list[int]]":
        return {n: s for n, r, s in self._native.parameters() if r == self._role}

    @property
    def adam_m(self) -> "Parameters":
        return Parameters(self._native, 1)

    @property
    def adam_v(self) -> "Parameters":
        return Parameters(self._native, 2)


class Trainer:
    """The training loop of `transfuse train` over a model compiled with train=True.

        model = transfuse.compile("models/tiny-encoder-decoder.json", train=True, seed=0)
        trainer = transfuse.Trainer(model, batch_tokens=256, steps=20, warmup=10,
                                    on_step=lambda r: print(r["step"], r["loss"]))
        trainer.fit(sources, targets)      # lists of id lists, without specials

    Batches by token count with length bucketing, shuffled per epoch by
    `seed`; Adam at the paper's rate (warmup, lr_factor, d_model: the
    config's width by default); stops at `steps`, `epochs` or `time_limit`
    minutes; checkpoints in `checkpoint_dir` (every `save_every` steps, at
    each epoch's end and at the last step; `keep` the last ones and the best
    by validation loss) and resume=True continues the newest bit for bit.
    `on_step` gets a dict per step: step, epoch, loss, lr, grad_norm, tokens,
    seconds, tokens_per_s (of the run so far).

    Data parallelism (docs/distributed.md): under `mpirun -np N python ...`
    every rank trains one of N shards of each batch, their gradients summed
    in rank order, and rank 0 alone checkpoints, validates, logs and calls
    on_step and on_validation (Trainer.rank, Trainer.ranks say which this
    is); `shards=N` in one process gives the same bits.

    `valid=(sources, targets)` (an encoder_decoder's pairs) is scored at
    each epoch's end as `transfuse train --src-valid/--tgt-valid` does: the
    weights copied into a decoding build of the same config, the loss the
    mean negative log-likelihood of the targets' tokens (EOS included, no
    label smoothing); `on_validation` gets {epoch, step, valid_loss,
    perplexity}. `log_json` writes the CLI's --log-json file (one object per
    step and per validation; appended to on resume), which
    transfuse.plot.training draws. Ctrl-C stops between steps with
    KeyboardInterrupt; the model stays usable.
    """

    def __init__(self, model: Model, *, batch_tokens: int = 4096, max_sentences: int = 0,
                 bucket: bool = True, seed: int = 0, accumulate: int = 1, steps: int = 0,
                 epochs: int = 0, time_limit: float = 0.0, warmup: int = 4000,
                 lr_factor: float = 1.0, d_model: "int | None" = None, clip_norm: float = 0.0,
                 weight_decay: float = 0.0, checkpoint_dir: "str | os.PathLike[str] | None" = None,
                 save_every: int = 0, keep: int = 0, shards: int = 1,
                 valid: "tuple[Sequence[Sequence[int]], Sequence[Sequence[int]]] | None" = None,
                 log_json: "str | os.PathLike[str] | None" = None,
                 on_step: "Callable[[dict], None] | None" = None,
                 on_validation: "Callable[[dict], None] | None" = None):
        if "loss_grad" not in model.entries:
            raise Error(f"'{model.dir}' is not a training build (compile with train=True)")
        config = model.manifest.get("config", {})
        self.model = model
        self.on_step = on_step
        self.on_validation = on_validation
        self.log_json = None if log_json is None else os.fspath(log_json)
        self.options = dict(batch_tokens=batch_tokens, max_sentences=max_sentences,
                            bucket=bucket, seed=seed, accumulate=accumulate, steps=steps,
                            epochs=epochs, time_limit=time_limit, warmup=warmup,
                            lr_factor=lr_factor, clip_norm=clip_norm, weight_decay=weight_decay,
                            d_model=d_model or int(config.get("d_model", 512)),
                            save_every=save_every, keep=keep, shards=shards,
                            # The build's products' precision, recorded in checkpoints.
                            dtype=model.manifest.get("dtype", "f32"))
        # Under mpirun: this process's rank and how many train (MPI joined here).
        self.rank, self.ranks = _transfuse._ranks()
        self.checkpoint_dir = None if checkpoint_dir is None else os.fspath(checkpoint_dir)
        if self.checkpoint_dir is not None:
            os.makedirs(self.checkpoint_dir, exist_ok=True)
            self.options["checkpoint_dir"] = self.checkpoint_dir
            self.options["run_info"] = json.dumps({"tokenizer": "ids", "config": config})
        self.valid = None
        if valid is not None:
            if config.get("architecture") != "encoder_decoder":
                raise Error("validation (valid=) is for encoder_decoder models")
            sources, targets = valid
            if len(sources) != len(targets) or not sources:
                raise InputError(f"valid: {len(sources)} sources and {len(targets)} targets "
                                 "(one target per source, at least one pair)")
            self.valid = ([list(map(int, s)) for s in sources],
                          [list(map(int, t)) for t in targets])
        self._decoder: "Model | None" = None
        self.step = 0
        self.epoch = 0

    def fit(self, sources: Sequence[Sequence[int]],
            targets: "Sequence[Sequence[int]] | None" = None, *, resume: bool = False) -> dict:
        """Trains on sentence pairs (targets given: an encoder_decoder) or lines
        (a decoder_only model), ids without specials. Returns where the run
        stands: step, epoch, resumed_from (a checkpoint, or "")."""
        log = (open(self.log_json, "a" if resume else "w")
               if self.log_json and self.rank == 0 else None)

        def write(row: dict) -> None:
            if log is not None:
                log.write(json.dumps(row) + "\n")
                log.flush()

        def on_step(r: dict) -> None:
            write({"step": r["step"], "loss": r["loss"], "lr": r["lr"], "tokens": r["tokens"],
                   "tokens_per_s": r["tokens"] / max(r["seconds"], 1e-9),
                   "grad_norm": r["grad_norm"]})
            if self.on_step is not None:
                self.on_step(r)

        def on_validation(v: dict) -> None:
            write(v)
            if self.on_validation is not None:
                import math
                self.on_validation(dict(v, perplexity=math.exp(v["valid_loss"])))

        try:
            result = self.model._native.train(
                [list(map(int, s)) for s in sources],
                None if targets is None else [list(map(int, t)) for t in targets],
                self.options, on_step if log or self.on_step else None,
                self._validate if self.valid else None, on_validation, resume)
        finally:
            if log is not None:
                log.close()
        self.step, self.epoch = result["step"], result["epoch"]
        return result

    def _validate(self) -> dict:
        """The validation loss of the weights as they stand (the CLI's)."""
        if self._decoder is None:
            config = self.model.manifest["config"]
            where = None
            if self.checkpoint_dir is not None:
                where = os.path.join(self.checkpoint_dir, "valid-model")
            self._decoder = compile(config, where, fusion="all", max_batch=32, max_beam=4,
                                    max_seq_len=int(config.get("max_seq_len", 0)),
                                    threads=self.model.threads)
        train, decoder = self.model.parameters, self._decoder.parameters
        for name in decoder:
            decoder[name] = train[name]
        nll, tokens = 0.0, 0
        for h in self._decoder.score(*self.valid):  # 32 pairs at a time, as the CLI
            nll -= h["log_prob"]
            tokens += len(h["token_log_probs"])
        return {"loss": nll / max(1, tokens)}


def fusion_report(model: "Model | str | os.PathLike[str]") -> "list[dict]":
    """What fused and why the rest did not (an artifact's report.json), one
    dict per row: {"fusion", "fused": count} for each kind, then
    {"fusion", "location", "reason"} for each candidate left alone."""
    dir = model.dir if isinstance(model, Model) else os.fspath(model)
    with open(os.path.join(dir, "report.json")) as f:
        report = json.load(f)
    rows: list = []
    for kind, entry in sorted(report.items()):
        rows.append({"fusion": kind, "fused": entry["fused"]})
    for kind, entry in sorted(report.items()):
        for miss in entry["not_fused"]:
            rows.append({"fusion": kind, "location": miss["location"], "reason": miss["reason"]})
    return rows


def graph(model: "Model | str | os.PathLike[str]", which: str = "after",
          format: str = "svg", output: "str | os.PathLike[str] | None" = None) -> str:
    """Renders an artifact's graph before or after fusion (DIR/graph.before.dot,
    DIR/graph.after.dot) with Graphviz's `dot`; returns the file written
    (default DIR/graph.WHICH.FORMAT)."""
    import shutil
    import subprocess
    if which not in ("before", "after"):
        raise Error(f"which={which!r} is not 'before' or 'after'")
    dir = model.dir if isinstance(model, Model) else os.fspath(model)
    source = os.path.join(dir, f"graph.{which}.dot")
    if not os.path.exists(source):
        raise Error(f"'{dir}' has no graph.{which}.dot (compile it with this version)")
    dot = shutil.which("dot")
    if dot is None:
        raise Error("Graphviz's `dot` is not installed (Debian: apt install graphviz)")
    output = os.fspath(output) if output is not None else os.path.join(dir, f"graph.{which}.{format}")
    done = subprocess.run([dot, f"-T{format}", source, "-o", output], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise Error(f"dot failed on {source}: {done.stderr.strip()}")
    return output


from . import bench, plot  # noqa: E402  (the benchmarks use compile and Model)
