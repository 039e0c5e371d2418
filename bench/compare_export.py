#!/usr/bin/python3
"""An exported kernel beside the same kernel inside Transfuse, side by side.

For each case (attention without a mask and causal at B=1, H=8, S=512, D=64;
a 1024^3 product as `linear` (weights packed once, as a compiled model
packs them) and as `gemm` (b packed on every call, as a compiled model's
product of two activations packs it: `bench gemm --pack-per-call`)) this
exports the kernel
with `transfuse export-kernel`, builds its test program with only Highway
(c++ -O2, as docs/export.md says), and then alternates, --rounds times, the
exported program's --bench with `transfuse bench attention|gemm`, on one
thread, for each Highway target given (TRANSFUSE_ISA forces one for both).
Each run reports its median; the table shows the best median of each side
and their ratio (exported / library; 1.0 = as fast).

    /usr/bin/python3 bench/compare_export.py --transfuse build/tools/transfuse \
        --isa AVX3,AVX2 --rounds 5
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

CASES = {
    "attention": (["attention", "--batch", "1", "--heads", "8", "--seq-q", "512", "--head-dim", "64"],
                  ["attention", "--batch", "1", "--heads", "8", "--seq", "512", "--head-dim", "64"]),
    "attention causal": (["attention", "--batch", "1", "--heads", "8", "--seq-q", "512", "--head-dim",
                          "64", "--causal"],
                         ["attention", "--batch", "1", "--heads", "8", "--seq", "512", "--head-dim",
                          "64", "--causal"]),
    "linear 1024^3": (["linear", "--rows", "1024", "--k", "1024", "--n", "1024"],
                      ["gemm", "--m", "1024", "--n", "1024", "--k", "1024"]),
    "gemm 1024^3": (["gemm", "--rows", "1024", "--k", "1024", "--n", "1024"],
                    ["gemm", "--m", "1024", "--n", "1024", "--k", "1024", "--pack-per-call"]),
}


def run(cmd, env=None):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    return out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transfuse", default="build/tools/transfuse")
    ap.add_argument("--isa", default="", help="Highway targets, comma-separated (default: the best)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=30, help="calls per exported --bench run")
    ap.add_argument("--cxx", default="c++")
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="compare_export.")
    programs = {}
    for case in args.cases.split(","):
        export, _ = CASES[case]
        d = os.path.join(work, case.replace(" ", "_").replace("^", ""))
        run([args.transfuse, "export-kernel", *export, "--name", "k", "-o", d])
        run([args.cxx, "-O2", "-std=c++17", "-I", d, os.path.join(d, "k.cc"), os.path.join(d, "k_test.cc"),
             "-lhwy", "-pthread", "-o", os.path.join(d, "test")])
        programs[case] = os.path.join(d, "test")

    print(f"{'case':18} {'target':6} {'library GFLOP/s':>16} {'exported GFLOP/s':>17} {'exported/library':>17}")
    for isa in (args.isa.split(",") if args.isa else [""]):
        env = dict(os.environ)
        if isa:
            env["TRANSFUSE_ISA"] = isa
        for case in args.cases.split(","):
            lib, exp = [], []
            target = isa
            for _ in range(args.rounds):
                row = json.loads(run([args.transfuse, "bench", *CASES[case][1], "--threads", "1", "--json"], env))
                row = row[0] if isinstance(row, list) else row
                lib.append(row["gflops"])
                target = row.get("target", target)
                text = run([programs[case], "--bench", str(args.iters)], env)
                exp.append(float(re.search(r"([0-9.]+) GFLOP/s at the median", text).group(1)))
            print(f"{case:18} {target:6} {max(lib):16.1f} {max(exp):17.1f} {max(exp) / max(lib):17.3f}")
    print(f"(best of {args.rounds} interleaved medians per side; 1 thread; exported built with {args.cxx} -O2)")


if __name__ == "__main__":
    main()
