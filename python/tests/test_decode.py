"""translate, score and generate from Python equal the CLI's; Ctrl-C stops a
search between steps and leaves the model usable."""

import _thread
import threading

import numpy as np
import pytest

import transfuse
from conftest import cli


def id_lines(rows):
    return "".join(" ".join(map(str, r)) + "\n" for r in rows)


SOURCES = [[5, 6, 7, 8], [9, 3], [4, 4, 12, 13, 14, 20], [7]]


def test_translate_equals_the_cli(tiny, tmp_path):
    (tmp_path / "src.ids").write_text(id_lines(SOURCES))
    for beam in (1, 3):
        got = tiny.translate(SOURCES, beam=beam, alpha=0.6, max_len=8)
        done = cli("translate", tiny.dir, "--weights-seed", 3, "--input", tmp_path / "src.ids",
                   "--beam", beam, "--alpha", 0.6, "--max-len", 8)
        expected = [[int(t) for t in line.split()] for line in done.stdout.splitlines()]
        assert got == expected, beam
    scored = tiny.translate(SOURCES, beam=3, n_best=2, max_len=8)
    assert all(len(h) == 2 and h[0]["score"] >= h[1]["score"] for h in scored)
    sampled = tiny.translate(SOURCES, sample=True, top_k=5, seed=11, max_len=8)
    done = cli("translate", tiny.dir, "--weights-seed", 3, "--input", tmp_path / "src.ids",
               "--sample", "--top-k", 5, "--seed", 11, "--max-len", 8)
    assert sampled == [[int(t) for t in l.split()] for l in done.stdout.splitlines()]


def test_score_equals_the_cli(tiny, tmp_path):
    targets = [[3, 4], [5], [6, 7, 8], []]
    (tmp_path / "src.ids").write_text(id_lines(SOURCES))
    (tmp_path / "tgt.ids").write_text(id_lines(targets))
    got = tiny.score(SOURCES, targets)
    done = cli("score", tiny.dir, "--weights-seed", 3, "--input", tmp_path / "src.ids",
               "--targets", tmp_path / "tgt.ids")
    for row, line in zip(got, done.stdout.splitlines()):
        total, tokens = line.split(" ||| ")
        assert f"{row['log_prob']:.6f}" == total
        assert [f"{x:.6f}" for x in row["token_log_probs"]] == tokens.split()
        assert len(row["token_log_probs"]) == len(targets[got.index(row)]) + 1


def test_generate_equals_the_cli(tiny_decoder, tmp_path):
    prompts = [[3, 4, 5], [6], [7, 8, 9, 10, 11], [12, 13]]
    (tmp_path / "p.ids").write_text(id_lines(prompts))
    got = tiny_decoder.generate(prompts, max_new=6)
    done = cli("generate", tiny_decoder.dir, "--weights-seed", 5, "--prompt-ids-file",
               tmp_path / "p.ids", "--max-new", 6)
    assert got == [[int(t) for t in l.split()] for l in done.stdout.splitlines()]
    beams = tiny_decoder.generate(prompts, max_new=6, beam=2, n_best=2)
    assert all(len(h) == 2 for h in beams)


def test_decoding_errors_name_the_line(tiny):
    with pytest.raises(transfuse.Error, match="line 2: id 99"):
        tiny.translate([[5], [99]])
    with pytest.raises(transfuse.InputError, match="n_best"):
        tiny.translate([[5]], beam=1, n_best=2)
    with pytest.raises(transfuse.Error, match="rows"):
        tiny.translate([[5]], beam=4, batch_size=5)  # 20 rows of 16
    assert tiny.translate([[5, 6]], max_len=3) == tiny.translate([[5, 6]], max_len=3)


def test_ctrl_c_stops_a_search_and_the_model_stays_usable(tiny, sigint):
    expected = tiny.translate(SOURCES, beam=2, max_len=8)
    many = SOURCES * 3000
    timer = threading.Timer(0.2, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            tiny.translate(many, beam=2, max_len=12)
    finally:
        timer.cancel()
    assert tiny.translate(SOURCES, beam=2, max_len=8) == expected
