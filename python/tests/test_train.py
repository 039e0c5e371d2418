"""A short training run from Python equals `transfuse train` bit for bit, and
resumes bit for bit."""

import json
import os

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
