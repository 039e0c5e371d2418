"""A short training run from Python equals `transfuse train` bit for bit, and
resumes bit for bit."""

import _thread
import json
import os
import threading

import numpy as np
import pytest
import safetensors_io

import transfuse
from conftest import ROOT, cli

CONFIG = os.path.join(ROOT, "models", "tiny-encoder-decoder.json")


def corpus(n=40, seed=0):
    rng = np.random.default_rng(seed)
    src = [rng.integers(3, 23, rng.integers(2, 9)).tolist() for _ in range(n)]
    tgt = [rng.integers(3, 19, rng.integers(2, 9)).tolist() for _ in range(n)]
    return src, tgt


def write_ids(path, rows):
    path.write_text("".join(" ".join(map(str, r)) + "\n" for r in rows))


OPTIONS = dict(batch_tokens=48, warmup=3, seed=7, steps=6)


def test_training_from_python_equals_the_cli(tmp_path):
    src, tgt = corpus()
    write_ids(tmp_path / "s.ids", src)
    write_ids(tmp_path / "t.ids", tgt)
    cli("train", CONFIG, "--src-train", tmp_path / "s.ids", "--tgt-train", tmp_path / "t.ids",
        "--steps", 6, "--batch-tokens", 48, "--warmup", 3, "--seed", 7, "--fusion", "all",
        "--checkpoint-dir", tmp_path / "cli", "--log-json", tmp_path / "cli.jsonl")
    cli_steps = [json.loads(l) for l in (tmp_path / "cli.jsonl").read_text().splitlines()]
    cli_weights = safetensors_io.read(tmp_path / "cli" / "step-00000006" / "model.safetensors")

    model = transfuse.compile(CONFIG, tmp_path / "py-model", train=True, seed=7, max_batch=48)
    steps = []
    trainer = transfuse.Trainer(model, **OPTIONS, checkpoint_dir=str(tmp_path / "py"),
                                on_step=steps.append)
    assert trainer.fit(src, tgt) == {"step": 6, "epoch": trainer.epoch, "resumed_from": ""}
    assert [s["loss"] for s in steps] == [s["loss"] for s in cli_steps]
    assert [s["lr"] for s in steps] == [s["lr"] for s in cli_steps]
    assert all(s["tokens_per_s"] > 0 for s in steps)
    for name, value in cli_weights.items():
        assert np.array_equal(model.parameters[name], value), name


def test_resume_is_bit_exact_and_callbacks_may_stop(tmp_path):
    src, tgt = corpus(seed=1)
    whole = transfuse.compile(CONFIG, tmp_path / "a", train=True, seed=7, max_batch=48)
    transfuse.Trainer(whole, **OPTIONS).fit(src, tgt)

    part = transfuse.compile(CONFIG, tmp_path / "b", train=True, seed=7, max_batch=48)
    run = str(tmp_path / "run")
    transfuse.Trainer(part, **dict(OPTIONS, steps=4), checkpoint_dir=run).fit(src, tgt)
    again = transfuse.compile(CONFIG, tmp_path / "c", train=True, seed=11, max_batch=48)
    result = transfuse.Trainer(again, **OPTIONS, checkpoint_dir=run).fit(src, tgt, resume=True)
    assert result["resumed_from"].endswith("step-00000004") and result["step"] == 6
    for name in whole.parameters:
        assert np.array_equal(again.parameters[name], whole.parameters[name]), name

    def fail(report):
        if report["step"] == 2:
            raise RuntimeError("stop here")
    third = transfuse.compile(CONFIG, tmp_path / "d", train=True, seed=7, max_batch=48)
    with pytest.raises(RuntimeError, match="stop here"):
        transfuse.Trainer(third, **OPTIONS, on_step=fail).fit(src, tgt)
    with pytest.raises(transfuse.Error, match="training build"):
        transfuse.Trainer(transfuse.compile(CONFIG, max_batch=2))


def test_validation_and_the_log_equal_the_cli(tmp_path):
    src, tgt = corpus(seed=2)
    vsrc, vtgt = corpus(n=9, seed=3)
    for name, rows in (("s", src), ("t", tgt), ("vs", vsrc), ("vt", vtgt)):
        write_ids(tmp_path / f"{name}.ids", rows)
    cli("train", CONFIG, "--src-train", tmp_path / "s.ids", "--tgt-train", tmp_path / "t.ids",
        "--src-valid", tmp_path / "vs.ids", "--tgt-valid", tmp_path / "vt.ids",
        "--epochs", 2, "--batch-tokens", 48, "--warmup", 3, "--seed", 7, "--fusion", "all",
        "--checkpoint-dir", tmp_path / "cli", "--keep", 1, "--log-json", tmp_path / "cli.jsonl")
    expected = [json.loads(l) for l in (tmp_path / "cli.jsonl").read_text().splitlines()]

    model = transfuse.compile(CONFIG, tmp_path / "py-model", train=True, seed=7, max_batch=48)
    seen = []
    trainer = transfuse.Trainer(model, batch_tokens=48, warmup=3, seed=7, epochs=2,
                                checkpoint_dir=tmp_path / "py", keep=1, valid=(vsrc, vtgt),
                                log_json=tmp_path / "py.jsonl", on_validation=seen.append)
    trainer.fit(src, tgt)
    got = [json.loads(l) for l in (tmp_path / "py.jsonl").read_text().splitlines()]
    assert len(got) == len(expected) and len(seen) == 2
    for g, e in zip(got, expected):
        assert g.keys() == e.keys()
        # Every field but the wall-clock rate equals the CLI's (JSON's
        # decimal forms of the same doubles).
        for key in g.keys() - {"tokens_per_s"}:
            assert g[key] == pytest.approx(e[key], rel=1e-15, abs=0), key
    valid = [r for r in got if "valid_loss" in r]
    assert [v["epoch"] for v in valid] == [1, 2]
    assert [s["valid_loss"] for s in seen] == [v["valid_loss"] for v in valid]
    assert all(s["perplexity"] == pytest.approx(np.exp(s["valid_loss"])) for s in seen)
    # keep=1 with validation: the last checkpoint and the best by validation loss.
    kept = sorted(p.name for p in (tmp_path / "py").iterdir() if p.name.startswith("step-"))
    assert 1 <= len(kept) <= 2 and kept == sorted(
        p.name for p in (tmp_path / "cli").iterdir() if p.name.startswith("step-"))
    with pytest.raises(transfuse.Error, match="encoder_decoder"):
        decoder_only = transfuse.compile(os.path.join(ROOT, "models", "tiny-decoder-only.json"),
                                         train=True, max_batch=8)
        transfuse.Trainer(decoder_only, valid=(vsrc, vtgt))


def test_ctrl_c_stops_training_between_steps(tmp_path, sigint):
    src, tgt = corpus(n=400, seed=4)
    model = transfuse.compile(CONFIG, tmp_path / "m", train=True, seed=7, max_batch=48)
    steps = []
    trainer = transfuse.Trainer(model, batch_tokens=48, warmup=3, seed=7, epochs=1000,
                                checkpoint_dir=tmp_path / "run", on_step=steps.append)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            trainer.fit(src, tgt)
    finally:
        timer.cancel()
    assert steps, "no step ran before the interrupt"
    # The last step taken is checkpointed (the interrupt may land in the
    # on_step callback of a step already taken), and the run resumes from it.
    newest = max(int(p.name[5:]) for p in (tmp_path / "run").glob("step-*"))
    assert newest in (steps[-1]["step"], steps[-1]["step"] + 1)
    more = transfuse.Trainer(model, batch_tokens=48, warmup=3, seed=7, steps=newest + 2,
                             checkpoint_dir=tmp_path / "run")
    result = more.fit(src, tgt, resume=True)
    assert result["resumed_from"].endswith(f"step-{newest:08d}")
    assert result["step"] == newest + 2


def test_bf16_training_from_python_equals_the_cli(tmp_path):
    # dtype="bf16" (docs/bf16.md): the build's manifest says so, the Trainer
    # records it in each checkpoint, and the run equals `transfuse train
    # --dtype bf16` bit for bit; its losses are not fp32's.
    src, tgt = corpus(seed=2)
    write_ids(tmp_path / "s.ids", src)
    write_ids(tmp_path / "t.ids", tgt)
    cli("train", CONFIG, "--src-train", tmp_path / "s.ids", "--tgt-train", tmp_path / "t.ids",
        "--steps", 6, "--batch-tokens", 48, "--warmup", 3, "--seed", 7, "--fusion", "all",
        "--dtype", "bf16", "--checkpoint-dir", tmp_path / "cli", "--log-json",
        tmp_path / "cli.jsonl")
    cli_steps = [json.loads(l) for l in (tmp_path / "cli.jsonl").read_text().splitlines()]
    cli_weights = safetensors_io.read(tmp_path / "cli" / "step-00000006" / "model.safetensors")

    model = transfuse.compile(CONFIG, tmp_path / "bf16", train=True, seed=7, max_batch=48,
                              dtype="bf16")
    assert model.manifest["dtype"] == "bf16"
    steps = []
    transfuse.Trainer(model, **OPTIONS, checkpoint_dir=str(tmp_path / "py"),
                      on_step=steps.append).fit(src, tgt)
    assert [s["loss"] for s in steps] == [s["loss"] for s in cli_steps]
    for name, value in cli_weights.items():
        assert np.array_equal(model.parameters[name], value), name
    state = json.loads((tmp_path / "py" / "step-00000006" / "state.json").read_text())
    assert state["dtype"] == "bf16"

    f32 = transfuse.compile(CONFIG, tmp_path / "f32", train=True, seed=7, max_batch=48)
    assert f32.manifest["dtype"] == "f32"
    f32_steps = []
    transfuse.Trainer(f32, **OPTIONS, on_step=f32_steps.append).fit(src, tgt)
    assert [s["loss"] for s in f32_steps] != [s["loss"] for s in steps]
    with pytest.raises(transfuse.CompileError, match="dtype 'f16' is not one of f32, bf16, int8"):
        transfuse.compile(CONFIG, tmp_path / "bad", dtype="f16")
