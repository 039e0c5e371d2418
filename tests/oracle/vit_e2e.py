#!/usr/bin/python3
"""The Vision Transformer from Hugging Face directories, end to end.

Writes tiny ViTForImageClassification directories as Hugging Face saves them
(config.json, model.safetensors with the `vit.` prefix and the classifier,
preprocessor_config.json), compiles them (fusion none and all), runs
`encode` and `classify` compiled and on the reference backend through
`transfuse run`, and compares with oracle.vit (NumPy, fp64): reference
within 1e-6 and compiled within 1e-4 of max(1, max |output|). Where Debian's
torch is present, oracle.vit is itself checked against a ViT written here
with torch.nn.functional (fp64, the patch embedding as a real convolution).
Golden outputs of Hugging Face's own modelling code and image processors
(vit-golden/, made by make_vit_golden.py): encode and classify within 1e-5;
the pixel values `transfuse classify` computes from the test images
(tests/images: odd sizes, grey, alpha, a palette, 16-bit, JPEG) within 1e-6
of ViTImageProcessorPil and 2e-2 of the torchvision ViTImageProcessor, and
the same top-1 label as Hugging Face. Bad images (truncated, not an image,
empty, zero-sized, CMYK) each fail with one error naming the file and print
nothing. A classifier fine-tuned from the command line on a folder of class
folders and on a CSV: its loss falls, its run directory classifies, and a
run resumed from a checkpoint on one thread ends with the same bits.

usage: vit_e2e.py --transfuse BIN --workdir DIR
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402
import safetensors_io  # noqa: E402
from bert_e2e import check_close, run  # noqa: E402

IMAGES = os.path.join(HERE, "..", "images")

CONFIG = {
    "architectures": ["ViTForImageClassification"], "model_type": "vit",
    "attention_probs_dropout_prob": 0.0, "dtype": "float32", "encoder_stride": 8,
    "hidden_act": "gelu", "hidden_dropout_prob": 0.0, "hidden_size": 32, "image_size": 32,
    "initializer_range": 0.02, "intermediate_size": 64, "layer_norm_eps": 1e-12,
    "num_attention_heads": 4, "num_channels": 3, "num_hidden_layers": 2, "patch_size": 8,
    "pooler_act": "tanh", "pooler_output_size": 32, "qkv_bias": True,
    "transformers_version": "5.25.0",
    "id2label": {"0": "cat", "1": "dog", "2": "bird"}, "label2id": {"cat": 0, "dog": 1, "bird": 2},
}

# The configs of the golden outputs (make_vit_golden.py; vit-golden/NAME.safetensors).
GOLDEN_CONFIGS = {
    "gelu": CONFIG,
    "tanh-rect": dict(CONFIG, hidden_act="gelu_new", qkv_bias=False, image_size=[32, 48],
                      patch_size=[8, 16], hidden_size=24, num_attention_heads=3,
                      intermediate_size=40, layer_norm_eps=1e-6, pooler_output_size=24,
                      id2label={"0": "no", "1": "yes"}, label2id={"no": 0, "yes": 1}),
}

# ViTImageProcessorPil at the tiny model's size, as save_pretrained writes it.
PREPROCESSOR = {
    "do_normalize": True, "do_rescale": True, "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5], "image_processor_type": "ViTImageProcessor",
    "image_std": [0.5, 0.5, 0.5], "resample": 2, "rescale_factor": 0.00392156862745098,
    "size": {"height": 32, "width": 32},
}

# The test images (tests/images) and what each exercises.
TEST_IMAGES = ["rgb-odd.png", "rgb.jpg", "grey.png", "grey.jpg", "rgba.png", "palette.png",
               "rgb16.png", "grey16.png"]


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def vit_weights(cfg, rng):
    """ViTForImageClassification's tensors (the encoder under `vit.`)."""
    d, f, L, C = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["num_channels"]
    (ih, iw), (ph, pw) = pair(cfg["image_size"]), pair(cfg["patch_size"])
    n = (ih // ph) * (iw // pw)
    r = lambda *shape: 0.3 * rng.standard_normal(shape)
    w = {"embeddings.patch_embeddings.projection.weight": r(d, C, ph, pw) / np.sqrt(C * ph * pw),
         "embeddings.patch_embeddings.projection.bias": r(d),
         "embeddings.cls_token": r(1, 1, d), "embeddings.position_embeddings": r(1, n + 1, d),
         "layernorm.weight": 1 + 0.2 * r(d), "layernorm.bias": r(d)}
    for i in range(L):
        p = f"encoder.layer.{i}."
        for name, (o, k, bias) in {
                "attention.attention.query": (d, d, cfg["qkv_bias"]),
                "attention.attention.key": (d, d, cfg["qkv_bias"]),
                "attention.attention.value": (d, d, cfg["qkv_bias"]),
                "attention.output.dense": (d, d, True), "intermediate.dense": (f, d, True),
                "output.dense": (d, f, True)}.items():
            w[p + name + ".weight"] = r(o, k) / np.sqrt(k)
            if bias:
                w[p + name + ".bias"] = r(o)
        for ln in ("layernorm_before", "layernorm_after"):
            w[p + ln + ".weight"] = 1 + 0.2 * r(d)
            w[p + ln + ".bias"] = r(d)
    out = {"vit." + k: np.asarray(v, np.float32) for k, v in w.items()}
    labels = len(cfg["id2label"])
    out["classifier.weight"] = (0.5 * rng.standard_normal((labels, d))).astype(np.float32)
    out["classifier.bias"] = (0.1 * rng.standard_normal(labels)).astype(np.float32)
    return out


def golden_weights(cfg):
    return vit_weights(cfg, np.random.default_rng(2026))


def golden_pixels(cfg, size=None):
    (ih, iw) = pair(size or cfg["image_size"])
    return np.random.default_rng(7).standard_normal((2, cfg["num_channels"], ih, iw)).astype(np.float32)


# The interpolated golden: the "gelu" model on 48x48 images (6x6 patches
# whose positions come from the stored 4x4).
INTERPOLATED = 48


def write_vit_dir(path, cfg, weights, preprocessor=PREPROCESSOR):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(path, "preprocessor_config.json"), "w") as f:
        json.dump(preprocessor, f, indent=2)
    safetensors_io.write(os.path.join(path, "model.safetensors"), weights)


def torch_vit(cfg, weights, pixels):
    """ViTForImageClassification's forward in torch.nn.functional, fp64: the
    patch embedding as the convolution it is."""
    import torch
    import torch.nn.functional as F
    W = {k[4:] if k.startswith("vit.") else k: torch.tensor(np.asarray(v, np.float64))
         for k, v in weights.items()}
    d, H, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    act = F.gelu if cfg["hidden_act"] == "gelu" else (lambda x: F.gelu(x, approximate="tanh"))
    x = torch.tensor(np.asarray(pixels, np.float64))
    e = "embeddings."
    h = F.conv2d(x, W[e + "patch_embeddings.projection.weight"],
                 W[e + "patch_embeddings.projection.bias"], stride=pair(cfg["patch_size"]))
    h = h.flatten(2).transpose(1, 2)
    B = h.shape[0]
    pos = W[e + "position_embeddings"]
    if pos.shape[1] != h.shape[1] + 1:  # interpolate_pos_encoding, as ViTEmbeddings does it
        g, (ph, pw) = int((pos.shape[1] - 1) ** 0.5), pair(cfg["patch_size"])
        grid = pos[:, 1:].reshape(1, g, g, d).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, size=(x.shape[2] // ph, x.shape[3] // pw), mode="bicubic",
                             align_corners=False)
        pos = torch.cat([pos[:, :1], grid.permute(0, 2, 3, 1).reshape(1, -1, d)], 1)
    h = torch.cat([W[e + "cls_token"].expand(B, -1, -1), h], 1) + pos
    S = h.shape[1]
    lin = lambda t, p: F.linear(t, W[p + ".weight"], W.get(p + ".bias"))
    heads = lambda t: t.view(B, S, H, d // H).transpose(1, 2)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        ln = lambda t, n: F.layer_norm(t, (d,), W[p + n + ".weight"], W[p + n + ".bias"], eps)
        t = ln(h, "layernorm_before")
        q, k, v = (heads(lin(t, p + "attention.attention." + n)) for n in ("query", "key", "value"))
        a = torch.softmax(q @ k.transpose(-1, -2) / (d // H) ** 0.5, -1) @ v
        h = h + lin(a.transpose(1, 2).reshape(B, S, d), p + "attention.output.dense")
        h = h + lin(act(lin(ln(h, "layernorm_after"), p + "intermediate.dense")), p + "output.dense")
    h = F.layer_norm(h, (d,), W["layernorm.weight"], W["layernorm.bias"], eps)
    return h.numpy(), lin(h[:, 0], "classifier").numpy()


def transfuse_run(args, model, entry, pixels, env=None, extra=()):
    """`transfuse run` of `entry` on pixel_values; the outputs read back."""
    feeds = os.path.join(args.workdir, "pixels.safetensors")
    got = os.path.join(args.workdir, "got.safetensors")
    safetensors_io.write(feeds, {"pixel_values": pixels})
    if os.path.exists(got):
        os.remove(got)
    p = subprocess.run([args.transfuse, "run", model, "--entry", entry, "--inputs", feeds,
                        "--outputs", got] + list(extra), capture_output=True, text=True, env=env)
    if p.returncode != 0:
        print(f"run {entry} on {model}: {p.stderr.strip()}")
        return None
    return safetensors_io.read(got)


def oracle_cases(args):
    """encode and classify compiled (fusion none and all) and on the reference
    backend against oracle.vit; the oracle against torch."""
    ok = True
    weights = vit_weights(CONFIG, np.random.default_rng(1))
    model = os.path.join(args.workdir, "model")
    write_vit_dir(model, CONFIG, weights)
    x = np.random.default_rng(3).standard_normal((3, 3, 32, 32)).astype(np.float32)
    want_h = oracle.vit(CONFIG, weights, x.astype(np.float64))
    want_logits = oracle.vit_logits(CONFIG, weights, x.astype(np.float64))
    try:
        import torch  # noqa: F401
        h, logits = torch_vit(CONFIG, weights, x)
        ok &= check_close("oracle.vit against torch (conv2d patches)", want_h, h, 1e-10)
        ok &= check_close("oracle.vit_logits against torch", want_logits, logits, 1e-10)
    except ImportError:
        print("torch is absent: oracle.vit not checked against torch")
    for fusion in ("none", "all"):
        out = os.path.join(args.workdir, "out-" + fusion)
        p = run([args.transfuse, "compile", model, "-o", out, "--fusion", fusion, "--max-batch", "4"])
        if "warning" in p.stderr:
            print(f"compile: unexpected warnings: {p.stderr}")
            ok = False
        for entry, name, want in (("encode", "last_hidden_state", want_h),
                                  ("classify", "logits", want_logits)):
            got = transfuse_run(args, out, entry, x, extra=["--weights", model])
            ok &= got is not None and check_close(f"{entry} compiled, fusion {fusion}", got[name],
                                                  want, 1e-4)
            if fusion == "none":
                got = transfuse_run(args, out, entry, x,
                                    extra=["--weights", model, "--backend", "reference",
                                           "--f64-outputs"])
                ok &= got is not None and check_close(f"{entry} reference", got[name], want, 1e-6)
    # Compiled for 48x48 images: positions interpolated from the stored 4x4
    # grid, against the oracle (itself against torch's F.interpolate).
    x48 = np.random.default_rng(5).standard_normal((2, 3, 48, 48)).astype(np.float32)
    want = oracle.vit_logits(CONFIG, weights, x48.astype(np.float64))
    try:
        import torch  # noqa: F401
        ok &= check_close("oracle.vit interpolated against torch", want,
                          torch_vit(CONFIG, weights, x48)[1], 1e-10)
    except ImportError:
        pass
    out48 = os.path.join(args.workdir, "out-48")
    run([args.transfuse, "compile", model, "-o", out48, "--fusion", "all", "--image-size", "48"])
    got = transfuse_run(args, out48, "classify", x48, extra=["--weights", model])
    ok &= got is not None and check_close("classify at 48x48, positions interpolated",
                                          got["logits"], want, 1e-4)
    p = run([args.transfuse, "compile", model, "-o", out48 + "-bad", "--image-size", "44"],
            expect_ok=False)
    fine = p.returncode != 0 and "is not a whole number of the model's 8x8 patches" in p.stderr
    print(f"--image-size 44: {'refused' if fine else 'NOT REFUSED'}: {p.stderr.strip()}")
    ok &= fine
    # classify compiles a directory for its preprocessor's size: 48x48 here.
    model48 = os.path.join(args.workdir, "model-48")
    write_vit_dir(model48, CONFIG, weights, dict(PREPROCESSOR, size={"height": 48, "width": 48}))
    pixels = os.path.join(args.workdir, "pixels-48.safetensors")
    p = subprocess.run([args.transfuse, "classify", model48, os.path.join(IMAGES, "rgb.jpg"),
                        "--pixels-out", pixels], capture_output=True, text=True,
                       env=dict(os.environ, XDG_CACHE_HOME=os.path.join(args.workdir, "cache-48")))
    fine = (p.returncode == 0 and
            list(safetensors_io.read(pixels)["pixel_values"].shape) == [1, 3, 48, 48])
    print(f"classify with a 48x48 preprocessor: {'compiled for 48x48' if fine else 'FAILED'} "
          f"{p.stderr.strip()}")
    ok &= fine
    # Another image size than the compiled one is refused, naming the input.
    got = transfuse_run(args, os.path.join(args.workdir, "out-all"), "encode",
                        np.zeros((1, 3, 48, 48), np.float32), extra=["--weights", model])
    ok &= got is None
    return ok


def golden_cases(args):
    """encode and classify against Hugging Face's ViTForImageClassification."""
    ok = True
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(args.workdir, "cache-golden"))
    for name, cfg in GOLDEN_CONFIGS.items():
        path = os.path.join(HERE, "vit-golden", name + ".safetensors")
        golden = safetensors_io.read(path)
        if json.loads(safetensors_io.read_metadata(path)["config"]) != cfg:
            print(f"golden {name}: {path} was made from another config: run make_vit_golden.py")
            ok = False
            continue
        model = os.path.join(args.workdir, "golden-" + name)
        write_vit_dir(model, cfg, golden_weights(cfg))
        for entry, output in (("encode", "last_hidden_state"), ("classify", "logits")):
            got = transfuse_run(args, model, entry, golden_pixels(cfg), env=env)
            ok &= got is not None and check_close(f"{name} {entry} against Hugging Face's",
                                                  got[output], golden[output], 1e-5)
        if "interpolated_logits" in golden:
            out = os.path.join(args.workdir, f"golden-{name}-{INTERPOLATED}")
            run([args.transfuse, "compile", model, "-o", out, "--image-size", str(INTERPOLATED)])
            got = transfuse_run(args, out, "classify", golden_pixels(cfg, INTERPOLATED),
                                extra=["--weights", model])
            ok &= got is not None and check_close(
                f"{name} classify at {INTERPOLATED}x{INTERPOLATED} against Hugging Face's "
                "interpolate_pos_encoding", got["logits"], golden["interpolated_logits"], 1e-5)
    return ok


def image_cases(args):
    """`transfuse classify` on the test images: its pixel values against
    Hugging Face's processors, its top-1 labels and probabilities against
    ViTForImageClassification's on Hugging Face's pixels."""
    ok = True
    golden = safetensors_io.read(os.path.join(HERE, "vit-golden", "images.safetensors"))
    model = os.path.join(args.workdir, "golden-gelu")
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(args.workdir, "cache-golden"))
    pixels_out = os.path.join(args.workdir, "pixels-out.safetensors")
    paths = [os.path.join(IMAGES, n) for n in TEST_IMAGES]
    p = subprocess.run([args.transfuse, "classify", model] + paths +
                       ["--top-k", "3", "--pixels-out", pixels_out, "--batch", "3"],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        print(f"classify: {p.stderr}")
        return False
    got = safetensors_io.read(pixels_out)["pixel_values"]
    # HF's pixels were stored as the 8-bit RGB they are made from (exact).
    to_pixels = lambda u8: (u8.astype(np.float64) / 255.0 - 0.5) / 0.5
    pil, tv = to_pixels(golden["pil_rgb8"]), to_pixels(golden["torchvision_rgb8"])
    ours = to_pixels(golden["grey16_high_byte_rgb8"])
    for i, name in enumerate(TEST_IMAGES):
        if name == "grey16.png":
            # Pillow clips 16-bit grey at 255; here it keeps the high byte.
            ok &= check_close(f"{name}: pixels, 16-bit grey as its high byte", got[i], ours[0], 1e-6)
            print(f"{name}: Pillow's (clipped) pixels differ by "
                  f"{float(np.abs(got[i] - pil[i]).max()):.3g}, as docs/vision.md says")
            continue
        ok &= check_close(f"{name}: pixels against ViTImageProcessorPil", got[i], pil[i], 1e-6)
        ok &= check_close(f"{name}: pixels against ViTImageProcessor (torchvision)", got[i], tv[i],
                          2e-2)
    # The printed labels: each image's block, the top-1 Hugging Face's.
    blocks = p.stdout.strip().split("\n")
    names = CONFIG["id2label"]
    logits = golden["logits"]
    for i, name in enumerate(TEST_IMAGES):
        block = blocks[4 * i:4 * i + 4]
        probs = np.exp(logits[i] - logits[i].max())
        probs /= probs.sum()
        top = int(np.argmax(probs))
        printed = [line.split() for line in block[1:]]
        fine = (block[0] == paths[i] and len(printed) == 3 and printed[0][1] == names[str(top)]
                and abs(float(printed[0][0]) - probs[top]) <= 5e-5 + 1e-5)  # printed to 4 places
        if name == "grey16.png":
            fine = block[0] == paths[i] and len(printed) == 3
        print(f"{name}: top-1 {printed[0] if printed else None}, Hugging Face's "
              f"{names[str(top)]} {probs[top]:.4f}: {'ok' if fine else 'FAILED'}")
        ok &= fine
    return ok


def bad_image_cases(args):
    """Each bad image: one error naming it, a non-zero exit, nothing printed."""
    ok = True
    model = os.path.join(args.workdir, "golden-gelu")
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(args.workdir, "cache-golden"))
    good = os.path.join(IMAGES, "rgb-odd.png")
    data = open(good, "rb").read()
    jpeg = open(os.path.join(IMAGES, "rgb.jpg"), "rb").read()
    bad = {
        "truncated.png": (data[:len(data) // 2], "not a valid PNG"),
        "truncated.jpg": (jpeg[:len(jpeg) // 2], "the file is truncated"),
        "text.png": (b"not an image at all\n", "not a PNG or JPEG image"),
        "empty.jpg": (b"", "the file is empty"),
        "zero-width.png": (png(np.zeros((4, 0, 3), np.uint8)), "not a valid PNG"),
        "cmyk.jpg": (open(os.path.join(IMAGES, "bad-cmyk.jpg"), "rb").read(),
                     "CMYK JPEGs are not supported"),
    }
    for name, (content, expect) in bad.items():
        path = os.path.join(args.workdir, name)
        with open(path, "wb") as f:
            f.write(content)
        p = subprocess.run([args.transfuse, "classify", model, good, path], capture_output=True,
                           text=True, env=env)
        fine = (p.returncode != 0 and expect in p.stderr and path in p.stderr
                and p.stderr.count("error:") == 1 and p.stdout == "")
        print(f"{name}: {'refused' if fine else 'NOT REFUSED AS EXPECTED'}: {p.stderr.strip()}")
        ok &= fine
    p = subprocess.run([args.transfuse, "classify", model, os.path.join(args.workdir, "none.png")],
                       capture_output=True, text=True, env=env)
    fine = p.returncode != 0 and "none.png" in p.stderr and p.stdout == ""
    print(f"a missing image: {'refused' if fine else 'NOT REFUSED AS EXPECTED'}: {p.stderr.strip()}")
    return ok and fine


def png(rgb):
    """An 8-bit RGB PNG of `rgb` [H, W, 3] (zlib and struct: no image library)."""
    h, w, _ = rgb.shape
    chunk = lambda t, d: (struct.pack(">I", len(d)) + t + d
                          + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff))
    raw = b"".join(b"\0" + rgb[y].tobytes() for y in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def train_cases(args):
    """Fine-tuning from the command line: class folders (names from
    label2id) and a CSV; the loss falls; the run's directory classifies."""
    ok = True
    rng = np.random.default_rng(11)
    folder = os.path.join(args.workdir, "train-images")
    shutil.rmtree(folder, ignore_errors=True)
    rows = []
    for label, name in CONFIG["id2label"].items():
        os.makedirs(os.path.join(folder, name))
        for i in range(6):
            base = np.zeros((40, 36, 3))
            base[..., int(label)] = 190
            img = np.clip(base + rng.normal(0, 40, base.shape), 0, 255).astype(np.uint8)
            with open(os.path.join(folder, name, f"{i}.png"), "wb") as f:
                f.write(png(img))
            rows.append(f"{name}/{i}.png,{name if i % 2 else label}")
    csv = os.path.join(folder, "train.csv")
    with open(csv, "w") as f:
        f.write("path,label\n" + "\n".join(rows) + "\n")
    model = os.path.join(args.workdir, "train-model")
    write_vit_dir(model, CONFIG, vit_weights(CONFIG, np.random.default_rng(4)))
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(args.workdir, "cache-train"))
    for source in (folder, csv):
        run_dir = os.path.join(args.workdir, "run-" + os.path.basename(source))
        log = run_dir + ".jsonl"
        shutil.rmtree(run_dir, ignore_errors=True)
        p = subprocess.run([args.transfuse, "train", model, "--images", source, "--valid-images",
                            folder, "--batch", "6", "--epochs", "4", "--warmup", "4",
                            "--lr-factor", "0.5", "--checkpoint-dir", run_dir, "--log-json", log,
                            "--no-progress"], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            print(f"train --images {source}: {p.stderr}")
            return False
        steps = [json.loads(l) for l in open(log) if '"loss"' in l]
        valid = [json.loads(l) for l in open(log) if "valid_loss" in l]
        first, last = np.mean([s["loss"] for s in steps[:3]]), np.mean([s["loss"] for s in steps[-3:]])
        fine = (len(steps) == 12 and last < 0.5 * first and len(valid) == 4
                and valid[-1]["valid_loss"] < valid[0]["valid_loss"]
                and valid[-1]["valid_accuracy"] >= 0.9)
        print(f"train --images {os.path.basename(source)}: loss {first:.3f} -> {last:.3f}, valid "
              f"{valid[0]['valid_loss']:.3f} -> {valid[-1]['valid_loss']:.3f} accuracy "
              f"{valid[-1]['valid_accuracy']:.2f}: {'ok' if fine else 'FAILED'}\n{p.stdout}")
        ok &= fine
        # The run's directory is a Hugging Face directory of the fine-tuned model.
        image = os.path.join(folder, "dog", "0.png")
        c = subprocess.run([args.transfuse, "classify", run_dir, image, "--top-k", "1"],
                           capture_output=True, text=True, env=env)
        fine = c.returncode == 0 and c.stdout.split("\n")[1].split()[1] == "dog"
        print(f"classify with the run's directory: {c.stdout.strip()} {'ok' if fine else 'FAILED'}")
        ok &= fine
    # Resumed from its step-6 checkpoint on one thread, a run ends with the
    # same bits as the run above that went through on every thread.
    resumed = os.path.join(args.workdir, "run-resumed")
    shutil.rmtree(resumed, ignore_errors=True)
    common = [args.transfuse, "train", model, "--images", folder, "--batch", "6", "--epochs", "4",
              "--warmup", "4", "--lr-factor", "0.5", "--checkpoint-dir", resumed, "--no-progress"]
    first = subprocess.run(common + ["--steps", "6"], capture_output=True, text=True, env=env)
    second = subprocess.run(common + ["--resume", "--threads", "1"], capture_output=True, text=True,
                            env=env)
    whole = open(os.path.join(args.workdir, "run-train-images", "model.safetensors"), "rb").read()
    fine = (first.returncode == 0 and second.returncode == 0 and "resumed from" in second.stderr
            and open(os.path.join(resumed, "model.safetensors"), "rb").read() == whole)
    print(f"train --images resumed at step 6 on one thread: "
          f"{'the same bits' if fine else 'NOT THE SAME'}: "
          f"{second.stderr.strip()}")
    ok &= fine
    # A label that is not the model's: refused, naming the line.
    with open(csv, "a") as f:
        f.write("cat/0.png,horse\n")
    p = subprocess.run([args.transfuse, "train", model, "--images", csv, "--batch", "6",
                        "--steps", "1"], capture_output=True, text=True, env=env)
    fine = p.returncode != 0 and f"{csv}:{len(rows) + 2}: 'horse' is not a label" in p.stderr
    print(f"an unknown label: {'refused' if fine else 'NOT REFUSED AS EXPECTED'}: {p.stderr.strip()}")
    return ok and fine


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--transfuse", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    ok = oracle_cases(args)
    ok &= golden_cases(args)
    ok &= image_cases(args)
    ok &= bad_image_cases(args)
    ok &= train_cases(args)
    print("vit_e2e: " + ("all passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
