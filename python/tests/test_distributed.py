"""transfuse.Trainer under mpirun: 2 ranks equal `transfuse train --shards 2`
(and Trainer(shards=2) in one process) byte for byte; rank 0 alone logs."""

import filecmp
import json
import os
import shutil
import subprocess
import sys

import pytest

import transfuse
from conftest import BUILD, ROOT, cli
from test_train import CONFIG, corpus, write_ids

SCRIPT = """
import json, sys, transfuse
src, tgt = json.load(open(sys.argv[1]))
model = transfuse.compile(sys.argv[2], train=True, seed=7, max_batch=48, threads=1)
steps = []
trainer = transfuse.Trainer(model, batch_tokens=48, warmup=3, seed=7, steps=6,
                            checkpoint_dir=sys.argv[3], log_json=sys.argv[4],
                            on_step=steps.append)
trainer.fit(src, tgt)
print(json.dumps({"rank": trainer.rank, "ranks": trainer.ranks, "steps": len(steps)}))
"""


def same_checkpoint(a, b):
    return all(filecmp.cmp(os.path.join(a, "step-00000006", f),
                           os.path.join(b, "step-00000006", f), shallow=False)
               for f in ("model.safetensors", "optimizer.safetensors"))


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun (openmpi-bin)")
def test_two_ranks_from_python_equal_shards_from_the_cli(tmp_path):
    src, tgt = corpus(seed=5)
    write_ids(tmp_path / "s.ids", src)
    write_ids(tmp_path / "t.ids", tgt)
    cli("train", CONFIG, "--src-train", tmp_path / "s.ids", "--tgt-train", tmp_path / "t.ids",
        "--steps", 6, "--batch-tokens", 48, "--warmup", 3, "--seed", 7, "--fusion", "all",
        "--shards", 2, "--checkpoint-dir", tmp_path / "cli", "--log-json", tmp_path / "cli.jsonl")

    (tmp_path / "data.json").write_text(json.dumps([src, tgt]))
    (tmp_path / "train.py").write_text(SCRIPT)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.path.join(BUILD, "python"))
    done = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", sys.executable,
                           tmp_path / "train.py", tmp_path / "data.json", CONFIG,
                           tmp_path / "ranks", tmp_path / "ranks.jsonl"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    said = sorted((json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")),
                  key=lambda r: r["rank"])
    # Rank 0 reports every step; rank 1 trains silently.
    assert said == [{"rank": 0, "ranks": 2, "steps": 6}, {"rank": 1, "ranks": 2, "steps": 0}]
    assert same_checkpoint(tmp_path / "ranks", tmp_path / "cli")
    logged = [json.loads(l) for l in (tmp_path / "ranks.jsonl").read_text().splitlines()]
    expected = [json.loads(l) for l in (tmp_path / "cli.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in logged] == [r["loss"] for r in expected]

    # shards=2 in one process: the same bytes.
    model = transfuse.compile(CONFIG, tmp_path / "one-model", train=True, seed=7, max_batch=48)
    transfuse.Trainer(model, batch_tokens=48, warmup=3, seed=7, steps=6, shards=2,
                      checkpoint_dir=tmp_path / "one").fit(src, tgt)
    assert same_checkpoint(tmp_path / "one", tmp_path / "cli")
