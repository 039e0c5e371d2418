"""The package around the model: graphs, plots, benchmarks as data, the wheel."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import transfuse
from conftest import BUILD, ROOT


def top_level_ops(mlir_text):
    """Ops directly in function bodies (4-space indent), the terminator aside."""
    return [l for l in mlir_text.splitlines()
            if re.match(r"^    (%\S+(, %\S+)* = )?\"?[a-z_]+\.[a-z_.]+", l)
            and not l.strip().startswith(("return", "func.return"))]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_graphs_parse_and_hold_one_node_per_op(tiny, tmp_path):
    for which in ("before", "after"):
        path = os.path.join(tiny.dir, f"graph.{which}.dot")
        parsed = json.loads(subprocess.run(["dot", "-Tjson", path], capture_output=True,
                                           text=True, check=True).stdout)
        ops = [o for o in parsed.get("objects", []) if o.get("name", "").startswith("op")]
        if which == "after":
            with open(os.path.join(tiny.dir, "model.mlir")) as f:
                mlir_ops = top_level_ops(f.read())
            assert len(ops) == len(mlir_ops)
            labels = [o["label"] for o in ops]
            assert (sum("transfuse.attention" in l for l in labels)
                    == sum("transfuse.attention" in l for l in mlir_ops) == 12)
            assert all(o["fillcolor"] != "#ffffff" for o in ops if "attention" in o["label"])
        else:
            assert not any("transfuse.attention" in o["label"] for o in ops)
            assert any("transfuse.softmax" in o["label"] for o in ops)
    svg = transfuse.graph(tiny, "after", output=str(tmp_path / "g.svg"))
    assert open(svg).read().lstrip().startswith(("<?xml", "<svg"))
    with pytest.raises(transfuse.Error, match="before"):
        transfuse.graph(tiny, "during")


def test_emit_dot_writes_only_the_graphs(tmp_path):
    info = transfuse.compile_only(os.path.join(ROOT, "models", "tiny-decoder-only.json"),
                                  tmp_path / "d", emit="dot", fusion="all")
    files = set(os.listdir(info["dir"]))
    assert {"graph.before.dot", "graph.after.dot", "model.mlir", "report.json"} <= files
    assert "libmodel.so" not in files and info["product"] == "graph.after.dot"


def test_bench_rows_are_data_and_plot(tmp_path):
    rows = transfuse.bench.model(os.path.join(ROOT, "models", "tiny-encoder-decoder.json"),
                                 ["none", "all"], batch=2, src_len=8, tgt_len=8, threads=1,
                                 min_seconds=0.05)
    assert [r["strategy"] for r in rows] == ["none", "all"]
    for r in rows:
        assert r["median_ms"] > 0 and r["gflops"] > 0 and r["peak_gflops"] > 0
        assert r["kernel_calls"] > 0 and r["threads"] == 1
    assert rows[1]["kernel_calls"] < rows[0]["kernel_calls"]
    from transfuse import plot
    plot.bench(rows, str(tmp_path / "bench.png"))
    assert (tmp_path / "bench.png").read_bytes()[:4] == b"\x89PNG"
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    done = subprocess.run([sys.executable, "-m", "transfuse.plot", "bench",
                           str(tmp_path / "rows.json"), "-o", str(tmp_path / "cli.svg")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "<svg" in (tmp_path / "cli.svg").read_text()


def test_training_plot_from_a_log(tmp_path):
    log = tmp_path / "log.jsonl"
    rows = [{"step": s, "loss": 5.0 / s, "lr": 1e-3 * s, "tokens": 10, "tokens_per_s": 100.0,
             "grad_norm": 1.0} for s in range(1, 6)]
    rows.append({"epoch": 1, "step": 5, "valid_loss": 1.5, "valid_bleu": 12.0})
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    from transfuse import plot
    plot.training(str(log), str(tmp_path / "t.png"))
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    log.write_text("{not json\n")
    done = subprocess.run([sys.executable, "-m", "transfuse.plot", "training", str(log),
                           "-o", str(tmp_path / "x.png")], capture_output=True, text=True)
    assert done.returncode == 1 and "line 1" in done.stderr
    assert not (tmp_path / "x.png").exists()


def test_stubs_ship_with_the_extension():
    here = os.path.dirname(transfuse.__file__)
    assert "class _Model" in open(os.path.join(here, "_transfuse.pyi")).read()
    assert "def _compile(" in open(os.path.join(here, "_compiler.pyi")).read()


@pytest.mark.skipif(os.environ.get("TRANSFUSE_SKIP_WHEEL") == "1", reason="asked to skip")
def test_the_wheel_installs_in_a_fresh_venv_and_imports(tmp_path):
    # The wheel reuses the CMake build (pyproject.toml: build-dir = "build").
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation",
                           "--no-deps", "-q", "-w", str(tmp_path / "dist"), ROOT],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    wheels = os.listdir(tmp_path / "dist")
    assert len(wheels) == 1 and wheels[0].startswith("transfuse-")
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    subprocess.run([str(venv / "bin/pip"), "install", "-q", "--no-deps", "--no-index",
                    str(tmp_path / "dist" / wheels[0])], check=True)
    code = ("import transfuse, numpy as np, sys; "
            f"m = transfuse.compile({os.path.join(ROOT, 'models', 'tiny-encoder-decoder.json')!r},"
            " max_batch=1); "
            "o = m.run(src_tokens=np.array([[5, 6]]), tgt_tokens=np.array([[1]])); "
            "print(transfuse.__file__, o['logits'].shape)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([str(venv / "bin/python"), "-c", code], capture_output=True,
                         text=True, env=env, cwd=str(tmp_path))
    assert run.returncode == 0, run.stderr
    assert str(venv) in run.stdout and "(1, 1, 19)" in run.stdout
