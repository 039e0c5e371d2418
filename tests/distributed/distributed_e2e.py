#!/usr/bin/python3
"""Data-parallel training over MPI against the one-process run it must equal.

`mpirun -np N transfuse train` (one thread per rank) and `transfuse train
--shards N` in one process (two threads) on the tiny encoder-decoder, dropout
on: the per-step losses, rates, gradient norms and tokens, and the final
checkpoint's weights and Adam moments (the files, byte for byte) are equal,
at 2 ranks and at 4 (oversubscribed on 2 cores, with batches of at most 3
sentences, so that shards are uneven and some empty); a second run gives the
same bytes; sharding changes the run (so the comparison is not vacuous); a
run resumed from a 2-rank checkpoint on 4 ranks continues (same batches,
steps and schedule) and equals the one-process --shards 4 resume from the
same checkpoint; a rank killed mid-run ends the whole job with a non-zero
exit within a timeout; --shards that disagrees with mpirun, --shards 0 and
the reference backend are refused with one message.

usage: distributed_e2e.py --transfuse BIN --config JSON --workdir DIR
"""
import argparse
import filecmp
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
if "ASAN_OPTIONS" in MPI_ENV:
    # Under ASan (the sanitized suite), LeakSanitizer is off in the MPI
    # ranks alone: Open MPI leaves allocations of its plugins (dlopen'd MCA
    # components, unloaded at MPI_Finalize, so no suppression can name them)
    # at exit. Memory errors are still reported there, and leaks in the
    # one-process --shards runs, which never start MPI.
    MPI_ENV["ASAN_OPTIONS"] += ":detect_leaks=0"


def write_ids(path, rows):
    with open(path, "w") as f:
        f.write("".join(" ".join(map(str, r)) + "\n" for r in rows))


def corpus(workdir, n=60, seed=0):
    rng = random.Random(seed)
    src = [[rng.randrange(3, 23) for _ in range(rng.randrange(2, 9))] for _ in range(n)]
    tgt = [[rng.randrange(4, 19) for _ in range(rng.randrange(2, 9))] for _ in range(n)]
    write_ids(os.path.join(workdir, "s.ids"), src)
    write_ids(os.path.join(workdir, "t.ids"), tgt)


class Runner:
    def __init__(self, args):
        self.args = args
        self.ok = True

    def common(self, steps, extra=()):
        w = self.args.workdir
        return ["--src-train", os.path.join(w, "s.ids"), "--tgt-train", os.path.join(w, "t.ids"),
                "--steps", str(steps), "--batch-tokens", "48", "--warmup", "3", "--seed", "7",
                "--no-progress", *extra]

    def train(self, name, ranks, steps, extra=(), shards=None, threads=None, resume_from=None):
        """One run into WORKDIR/name: mpirun with `ranks` (> 1), or one process
        (--shards `shards`). Returns (ok, log rows, stderr)."""
        d = os.path.join(self.args.workdir, name)
        log = d + ".jsonl"  # appended to on resume
        if resume_from is None:
            shutil.rmtree(d, ignore_errors=True)
            if os.path.exists(log):
                os.remove(log)
        argv = [self.args.transfuse, "train", self.args.config,
                *self.common(steps, extra), "--checkpoint-dir", d, "--log-json", log]
        if resume_from is not None:
            argv.append("--resume")
        if ranks > 1:
            argv = ["mpirun", "-np", str(ranks), "--oversubscribe", *argv, "--threads",
                    str(threads or 1)]
        else:
            argv += ["--threads", str(threads or 2)]
            if shards:
                argv += ["--shards", str(shards)]
        p = subprocess.run(argv, capture_output=True, text=True,
                           env=MPI_ENV if ranks > 1 else os.environ, timeout=600)
        if p.returncode != 0:
            print(f"{name}: failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
            self.ok = False
            return False, [], p.stderr
        with open(log) as f:
            rows = [json.loads(line) for line in f]
        return True, rows, p.stderr

    def check(self, what, good, detail=""):
        print(f"{what}: {'ok' if good else 'FAILED'}{(' ' + detail) if detail else ''}")
        self.ok &= bool(good)


def same_checkpoint(a, b, step):
    names = ("model.safetensors", "optimizer.safetensors")
    ca = [os.path.join(a, f"step-{step:08d}", n) for n in names]
    cb = [os.path.join(b, f"step-{step:08d}", n) for n in names]
    return all(os.path.exists(x) and os.path.exists(y) and filecmp.cmp(x, y, shallow=False)
               for x, y in zip(ca, cb))


def steps_of(rows):
    """The per-step fields that must be equal (tokens_per_s is a clock's)."""
    return [(r["step"], r["loss"], r["lr"], r["grad_norm"], r["tokens"]) for r in rows
            if "loss" in r]


def kill_a_rank(args, r):
    """A rank killed mid-run: mpirun must end the job, non-zero, within 60 s."""
    d = os.path.join(args.workdir, "killed")
    shutil.rmtree(d, ignore_errors=True)
    argv = ["mpirun", "-np", "2", "--oversubscribe", args.transfuse, "train", args.config,
            *r.common(100000), "--threads", "1", "--checkpoint-dir", d]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=MPI_ENV, start_new_session=True)
    try:
        victim = None
        deadline = time.time() + 60
        while victim is None and time.time() < deadline:
            time.sleep(0.5)
            # A rank that has started its steps (its run directory exists).
            kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True,
                                  text=True).stdout.split()
            if len(kids) >= 2 and os.path.isdir(d) and os.listdir(d):
                victim = int(kids[-1])
        if victim is None:
            r.check("a killed rank", False, "the ranks did not start")
            return
        time.sleep(1.0)
        os.kill(victim, signal.SIGKILL)
        killed = time.time()
        try:
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            r.check("a killed rank ends the job", False, "mpirun still running 60 s after")
            return
        r.check("a killed rank ends the job", rc != 0,
                f"(exit {rc} {time.time() - killed:.1f} s after SIGKILL)")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transfuse", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    if shutil.which("mpirun") is None:
        print("mpirun is not installed (openmpi-bin): skipped")
        return 77
    os.makedirs(args.workdir, exist_ok=True)
    corpus(args.workdir)
    r = Runner(args)

    # 2 ranks against --shards 2; a second 2-rank run; --shards 1 differs.
    _, one, _ = r.train("shards2", 1, 8, shards=2)
    _, two, _ = r.train("ranks2", 2, 8)
    _, again, _ = r.train("ranks2-again", 2, 8)
    _, plain, _ = r.train("shards1", 1, 8)
    r.check("2 ranks: the steps equal --shards 2's", one and steps_of(two) == steps_of(one),
            f"({len(steps_of(one))} steps)")
    r.check("2 ranks: the weights and moments equal --shards 2's",
            same_checkpoint(os.path.join(args.workdir, "ranks2"),
                            os.path.join(args.workdir, "shards2"), 8))
    r.check("a second 2-rank run: the same bytes",
            steps_of(again) == steps_of(two) and
            same_checkpoint(os.path.join(args.workdir, "ranks2"),
                            os.path.join(args.workdir, "ranks2-again"), 8))
    r.check("sharding changes the run (the comparison is not vacuous)",
            plain and steps_of(plain) != steps_of(one) and
            [s[4] for s in steps_of(plain)] == [s[4] for s in steps_of(one)],
            "(the same batches and tokens, other losses)")

    # 4 ranks, batches of at most 3 sentences: uneven shards, some empty.
    small = ("--max-sentences", "3")
    _, one4, _ = r.train("shards4", 1, 8, small, shards=4)
    _, four, _ = r.train("ranks4", 4, 8, small)
    r.check("4 ranks (uneven and empty shards): the steps and bytes equal --shards 4's",
            one4 and steps_of(four) == steps_of(one4) and
            same_checkpoint(os.path.join(args.workdir, "ranks4"),
                            os.path.join(args.workdir, "shards4"), 8))

    # Resume on another rank count: 2 ranks to step 4, then 4 ranks to 8;
    # the one-process --shards 4 resume from a copy of the same checkpoint.
    _, first, _ = r.train("resume", 2, 4)
    shutil.rmtree(os.path.join(args.workdir, "resume-one"), ignore_errors=True)
    shutil.copytree(os.path.join(args.workdir, "resume"), os.path.join(args.workdir, "resume-one"))
    if os.path.exists(os.path.join(args.workdir, "resume-one.jsonl")):
        os.remove(os.path.join(args.workdir, "resume-one.jsonl"))
    _, cont, err = r.train("resume", 4, 8, resume_from=4)
    _, cont1, _ = r.train("resume-one", 1, 8, shards=4, resume_from=4)
    later = [s for s in steps_of(cont) if s[0] > 4]
    r.check("4 ranks resume a 2-rank run: steps 5-8, the same batches as 2 ranks",
            "resumed from" in err and [s[0] for s in later] == [5, 6, 7, 8] and
            [s[2] for s in later] == [s[2] for s in steps_of(two)[4:8]] and
            [s[4] for s in later] == [s[4] for s in steps_of(two)[4:8]])
    r.check("... and equal the one-process --shards 4 resume, byte for byte",
            later == steps_of(cont1) and
            same_checkpoint(os.path.join(args.workdir, "resume"),
                            os.path.join(args.workdir, "resume-one"), 8))

    kill_a_rank(args, r)

    # Refusals: one message, non-zero.
    for what, argv, expect in (
            ("--shards disagreeing with mpirun",
             ["mpirun", "-np", "2", "--oversubscribe", args.transfuse, "train", args.config,
              *r.common(2), "--shards", "3"], "one shard per rank"),
            ("--shards 0", [args.transfuse, "train", args.config, *r.common(2), "--shards", "0"],
             "--shards"),
            ("--shards with the reference backend",
             [args.transfuse, "train", args.config, *r.common(2), "--shards", "2", "--backend",
              "reference"], "--backend compiled")):
        p = subprocess.run(argv, capture_output=True, text=True, env=MPI_ENV, timeout=120)
        said = [l for l in p.stderr.splitlines() if "transfuse: error" in l]
        r.check(f"refused: {what}", p.returncode != 0 and said and expect in said[0],
                f"({said[0] if said else 'no message'})")

    print("distributed: " + ("all passed" if r.ok else "FAILURES"))
    return 0 if r.ok else 1


if __name__ == "__main__":
    sys.exit(main())
