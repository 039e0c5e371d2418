"""compile, load and run from Python: bit for bit the CLI's, zero copy, DLPack,
threads, parameters and errors."""

import os
import threading

import numpy as np
import pytest
import safetensors_io

import transfuse
from conftest import ROOT, cli


def inputs(batch=2, src=5, tgt=4, seed=0):
    rng = np.random.default_rng(seed)
    return {"src_tokens": rng.integers(2, 23, (batch, src)).astype(np.int32),
            "tgt_tokens": rng.integers(2, 19, (batch, tgt)).astype(np.int32)}


def test_entries_and_signature(tiny):
    assert "forward" in tiny.entries and "decode_step" in tiny.entries
    sig = tiny.signature("forward")
    names = [s["name"] for s in sig["inputs"]]
    assert names == ["src_tokens", "tgt_tokens"]
    src = sig["inputs"][0]
    assert src["dtype"] == "int32" and src["shape"] == [None, None]
    assert src["max_shape"] == [4, 16]
    assert sig["outputs"][0]["name"] == "logits" and sig["outputs"][0]["shape"][2] == 19
    assert not sig["uses_state"] and tiny.signature("decode_step")["uses_state"]
    assert tiny.fusion == "all"


def test_run_equals_the_cli_bit_for_bit(tiny, tmp_path):
    x = inputs()
    out = tiny.run("forward", **x)
    assert out["logits"].shape == (2, 4, 19) and out["logits"].dtype == np.float32
    safetensors_io.write(tmp_path / "in.safetensors", x)
    cli("run", tiny.dir, "--seed", 3, "--inputs", tmp_path / "in.safetensors",
        "--outputs", tmp_path / "out.safetensors")
    expected = safetensors_io.read(tmp_path / "out.safetensors")["logits"]
    assert np.array_equal(out["logits"], expected)


def test_inputs_and_outputs_are_not_copied(tiny):
    x = inputs()
    out = tiny.run(**x)
    pointers = transfuse._transfuse._last_run_pointers()
    assert pointers["src_tokens"] == x["src_tokens"].ctypes.data
    assert pointers["tgt_tokens"] == x["tgt_tokens"].ctypes.data
    # The output array is the memory the model wrote, owned by its base.
    assert pointers["logits"] == out["logits"].ctypes.data
    assert out["logits"].base is not None and out["logits"].flags.writeable


def test_int64_and_strided_inputs(tiny):
    x = inputs()
    expected = tiny.run(**x)["logits"]
    wide = {k: v.astype(np.int64) for k, v in x.items()}
    assert np.array_equal(tiny.run(**wide)["logits"], expected)
    assert transfuse._transfuse._last_run_pointers()["src_tokens"] == wide["src_tokens"].ctypes.data
    # A strided view is copied once into a dense buffer.
    big = np.zeros((2, 10), np.int32)
    big[:, ::2] = x["src_tokens"]
    view = big[:, ::2]
    assert not view.flags.c_contiguous
    got = tiny.run(src_tokens=view, tgt_tokens=x["tgt_tokens"])["logits"]
    assert np.array_equal(got, expected)
    assert transfuse._transfuse._last_run_pointers()["src_tokens"] != view.ctypes.data
    # Lists go through NumPy.
    lists = {k: v.tolist() for k, v in wide.items()}
    assert np.array_equal(tiny.run(**lists)["logits"], expected)


def test_torch_tensors_by_dlpack(tiny):
    torch = pytest.importorskip("torch")
    x = inputs()
    expected = tiny.run(**x)["logits"]
    t = {k: torch.from_numpy(v.astype(np.int64)) for k, v in x.items()}
    got = tiny.run(**t)["logits"]
    assert np.array_equal(got, expected)
    assert transfuse._transfuse._last_run_pointers()["src_tokens"] == t["src_tokens"].data_ptr()
    # Outputs go back to torch without a copy.
    back = torch.from_numpy(got)
    assert back.data_ptr() == got.ctypes.data


def test_two_threads_give_the_bits_of_one(tiny):
    cases = [inputs(batch=1 + i % 4, src=3 + i % 7, tgt=2 + i % 5, seed=i) for i in range(24)]
    expected = [tiny.run(**c)["logits"] for c in cases]
    results = {}

    def work(name, order):
        results[name] = [(i, tiny.run(**cases[i])["logits"]) for i in order]

    threads = [threading.Thread(target=work, args=(n, order))
               for n, order in (("a", range(24)), ("b", reversed(range(24))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in ("a", "b"):
        for i, got in results[name]:
            assert np.array_equal(got, expected[i]), (name, i)


def test_errors_are_exceptions_with_the_clis_message(tiny, tmp_path):
    x = inputs()
    with pytest.raises(transfuse.InputError) as wrong_dtype:
        tiny.run(src_tokens=x["src_tokens"].astype(np.float64), tgt_tokens=x["tgt_tokens"])
    safetensors_io.write(tmp_path / "bad.safetensors",
                         {"src_tokens": x["src_tokens"].astype(np.float64),
                          "tgt_tokens": x["tgt_tokens"]})
    done = cli("run", tiny.dir, "--inputs", tmp_path / "bad.safetensors",
               "--outputs", tmp_path / "out.safetensors", check=False)
    assert done.returncode == 1
    message = str(wrong_dtype.value).split(": ", 1)[1]  # after "entry point 'forward'"
    assert message in done.stderr, (message, done.stderr)
    assert not (tmp_path / "out.safetensors").exists()

    with pytest.raises(transfuse.InputError, match="unknown|not an input|'tokens'"):
        tiny.run(tokens=x["src_tokens"], tgt_tokens=x["tgt_tokens"])
    with pytest.raises(transfuse.InputError, match="src_tokens"):
        tiny.run(src_tokens=np.zeros((2, 17), np.int32), tgt_tokens=x["tgt_tokens"])
    with pytest.raises(ValueError):  # InputError is a ValueError too
        tiny.run(src_tokens=x["src_tokens"])
    with pytest.raises(transfuse.InputError, match="entry point 'nope'"):
        tiny.run("nope", **x)
    with pytest.raises(transfuse.Error):  # an id outside the vocabulary, found while running
        tiny.run(src_tokens=np.full((1, 3), 99, np.int32), tgt_tokens=x["tgt_tokens"][:1])
    # The model stays usable.
    assert np.array_equal(tiny.run(**x)["logits"], tiny.run(**x)["logits"])


def test_parameters_are_read_and_written(tiny, tmp_path):
    params = tiny.parameters
    names = list(params)
    assert names and len(params) == len(names)
    name = next(n for n in names if "weight" in n)
    original = params[name]
    assert original.dtype == np.float32 and list(original.shape) == params.shapes()[name]
    x = inputs()
    before = tiny.run(**x)["logits"]
    try:
        params[name] = original * 2
        assert np.array_equal(params[name], original * 2)
        assert not np.array_equal(tiny.run(**x)["logits"], before)
        with pytest.raises(transfuse.InputError, match="float32"):
            params[name] = original.astype(np.float64)
        with pytest.raises(transfuse.InputError):
            params["no.such.weight"] = original
    finally:
        params[name] = original
    assert np.array_equal(tiny.run(**x)["logits"], before)


def test_compile_from_a_dict_and_mlir_text(tmp_path):
    import json
    with open(os.path.join(ROOT, "models", "tiny-encoder-decoder.json")) as f:
        config = json.load(f)
    m = transfuse.compile(config, fusion="attention", max_batch=2, seed=3)
    assert m.fusion == "attention" and os.path.isdir(m.dir)
    with open(os.path.join(m.dir, "model.mlir")) as f:
        text = f.read()
    again = transfuse.compile(text, tmp_path / "again", fusion="none", seed=3)
    x = inputs()
    assert np.allclose(again.run(**x)["logits"], m.run(**x)["logits"], atol=1e-5)
    with pytest.raises(transfuse.CompileError, match="fusion"):
        transfuse.compile(config, fusion="everything")
    with pytest.raises(transfuse.Error, match="no such model definition"):
        transfuse.compile(str(tmp_path / "absent.json"))


def test_verify_and_the_fusion_report(tmp_path):
    m = transfuse.compile(os.path.join(ROOT, "models", "tiny-encoder-decoder.json"),
                          tmp_path / "v", fusion="all", verify=True, max_batch=2)
    assert m.compile_info["verified"] and m.compile_info["verify"]
    assert all(c["max_abs_error"] <= c["bound"] for c in m.compile_info["verify"])
    rows = transfuse.fusion_report(m)
    counts = {r["fusion"]: r["fused"] for r in rows if "fused" in r}
    # forward: 2 encoder + 2·2 decoder layers; encode: 2; decode_step: 2·2.
    assert counts["attention"] == 12
    assert transfuse.fusion_report(m.dir) == rows
