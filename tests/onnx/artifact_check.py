"""What the ONNX end-to-end tests share (onnx_e2e.py in the onnx venv, exported_models.py on
Debian's python3): running a command, and running an artifact against expected outputs."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import safetensors_io  # noqa: E402


def run(cmd):
    """(exit status, stdout and stderr) of `cmd`."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def check_output(transfuse, art, ins, want, workdir, label, backend="compiled"):
    """Runs `transfuse run ART` on `ins` (name -> array) with `backend` and checks its one
    output against `want` within 1e-4 of scale (max(1, max |want|))."""
    inp = os.path.join(workdir, "in.safetensors")
    outp = os.path.join(workdir, f"out-{backend}.safetensors")
    safetensors_io.write(inp, ins)
    rc, out = run([transfuse, "run", art, "--inputs", inp, "--outputs", outp, "--backend", backend])
    assert rc == 0, f"{label} {backend}: run failed:\n{out}"
    got = next(iter(safetensors_io.read(outp).values()))
    assert got.shape == want.shape, f"{label}: shape {got.shape} vs {want.shape}"
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    bound = 1e-4 * max(1.0, float(np.max(np.abs(want))))
    print(f"{label} {backend}: max |error| {err:.2e} (bound {bound:.1e})")
    assert err <= bound, f"{label} {backend}: error {err} > {bound}"
