"""Shared fixtures of the Python package's tests: the repository, the built
`transfuse` CLI, and tiny models compiled once per session."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("TRANSFUSE_BUILD", os.path.join(ROOT, "build"))
CLI = os.path.join(BUILD, "tools", "transfuse")
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))  # safetensors_io

import transfuse  # noqa: E402  (build/python on PYTHONPATH)


def cli(*args, check=True):
    """Runs the transfuse CLI; returns the finished process."""
    done = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"transfuse {' '.join(map(str, args))} failed:\n{done.stderr}")
    return done


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The tiny encoder-decoder, fused, compiled once (cache rows for decoding)."""
    out = tmp_path_factory.mktemp("tiny")
    return transfuse.compile(os.path.join(ROOT, "models", "tiny-encoder-decoder.json"), out,
                             fusion="all", max_batch=4, seed=3)


@pytest.fixture(scope="session")
def tiny_decoder(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-decoder")
    return transfuse.compile(os.path.join(ROOT, "models", "tiny-decoder-only.json"), out,
                             fusion="all", max_batch=4, seed=5)


@pytest.fixture
def sigint():
    """Python's own SIGINT handler for the test: a process started in the
    background by a shell (`cmd &`, nohup) has SIGINT ignored, and then
    _thread.interrupt_main() does nothing."""
    import signal
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
