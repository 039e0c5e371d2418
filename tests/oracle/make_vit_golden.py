#!/usr/bin/env python3
"""Makes the test images (tests/images) and the golden outputs of Hugging
Face's own ViT modelling code and image processors that
tests/oracle/vit_e2e.py holds Transfuse to (tests/oracle/vit-golden/).

- images: smooth photo-like pictures with noise, drawn from a fixed seed and
  written by Pillow: RGB of odd sizes (PNG, and JPEG at quality 90), grey
  (PNG and JPEG), RGBA, a palette PNG, 16-bit RGB and 16-bit grey PNGs (by
  hand: Pillow cannot write them), and a CMYK JPEG (refused by Transfuse).
- NAME.safetensors, for the two configs of vit_e2e.GOLDEN_CONFIGS (weights
  and pixel values from vit_e2e.golden_weights and golden_pixels, drawn
  again by the test from NumPy's stable PCG64): last_hidden_state (ViTModel)
  and logits (ViTForImageClassification).
- images.safetensors: each test image through ViTImageProcessorPil (Pillow)
  and ViTImageProcessor (torchvision) at 32x32, kept as the 8-bit RGB the
  pixel values are made from (checked exact here), the logits of the "gelu"
  model on the Pillow pixel values, and the 16-bit grey image's high byte
  (what Transfuse computes where Pillow clips).

Run once, by hand, in a venv with transformers, torchvision and Pillow (no
hub access is needed):

    /work/venv-hf/bin/pip install torch torchvision pillow numpy transformers
    /work/venv-hf/bin/python tests/oracle/make_vit_golden.py
"""
import json
import os
import struct
import sys
import zlib

import numpy as np
import PIL
import torch
import transformers
from PIL import Image
from transformers import ViTImageProcessor
from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402
import vit_e2e  # noqa: E402

IMAGES = os.path.join(HERE, "..", "images")


def smooth(rng, h, w, c):
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([np.sin(x / 7.0 + k) + np.cos(y / 5.0 - k) for k in range(c)], -1)
    return np.clip(127 + 60 * base + rng.normal(0, 20, (h, w, c)), 0, 255)


def png16(path, arr):
    h, w, c = arr.shape
    kind = {1: 0, 3: 2}[c]
    raw = b"".join(b"\0" + arr[y].astype(">u2").tobytes() for y in range(h))
    chunk = lambda t, d: (struct.pack(">I", len(d)) + t + d
                          + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, kind, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def make_images():
    os.makedirs(IMAGES, exist_ok=True)
    rng = np.random.default_rng(1)
    u8 = lambda a: a.astype(np.uint8)
    Image.fromarray(u8(smooth(rng, 37, 53, 3))).save(os.path.join(IMAGES, "rgb-odd.png"))
    Image.fromarray(u8(smooth(rng, 90, 120, 3))).save(os.path.join(IMAGES, "rgb.jpg"), quality=90)
    Image.fromarray(u8(smooth(rng, 29, 31, 1)[..., 0]), "L").save(os.path.join(IMAGES, "grey.png"))
    Image.fromarray(u8(smooth(rng, 40, 24, 1)[..., 0]), "L").save(os.path.join(IMAGES, "grey.jpg"))
    Image.fromarray(u8(smooth(rng, 45, 45, 4)), "RGBA").save(os.path.join(IMAGES, "rgba.png"))
    Image.fromarray(u8(smooth(rng, 50, 30, 3))).convert("P", palette=Image.ADAPTIVE).save(
        os.path.join(IMAGES, "palette.png"))
    png16(os.path.join(IMAGES, "rgb16.png"), (smooth(rng, 33, 41, 3) * 257).astype(np.uint16))
    grey16 = (smooth(rng, 33, 41, 1) * 257).astype(np.uint16)
    png16(os.path.join(IMAGES, "grey16.png"), grey16)
    Image.fromarray(u8(smooth(rng, 16, 16, 3))).convert("CMYK").save(
        os.path.join(IMAGES, "bad-cmyk.jpg"))
    return grey16


def rgb8(pixels):
    """The 8-bit RGB [3, H, W] that pixel values (x / 255 - 0.5) / 0.5 came from."""
    u8 = np.rint((pixels.astype(np.float64) * 0.5 + 0.5) * 255.0)
    assert np.abs((u8 / 255.0 - 0.5) / 0.5 - pixels).max() < 1e-6
    return u8.astype(np.uint8)


def main():
    grey16 = make_images()
    out_dir = os.path.join(HERE, "vit-golden")
    os.makedirs(out_dir, exist_ok=True)
    meta = {"transformers": transformers.__version__, "torch": torch.__version__,
            "pillow": PIL.__version__}
    models = {}
    for name, cfg in vit_e2e.GOLDEN_CONFIGS.items():
        weights = vit_e2e.golden_weights(cfg)
        # Loaded as a user's directory is: from_pretrained maps the stored
        # names onto the module's (transformers 5 renamed them).
        directory = os.path.join("/tmp", "vit-golden-" + name)
        vit_e2e.write_vit_dir(directory, cfg, weights)
        model, info = transformers.ViTForImageClassification.from_pretrained(
            directory, output_loading_info=True)
        model.eval()
        assert not any(info.values()), info
        models[name] = model
        x = vit_e2e.golden_pixels(cfg)
        with torch.inference_mode():
            h = model.vit(torch.tensor(x)).last_hidden_state
            logits = model(torch.tensor(x)).logits
        tensors = {"last_hidden_state": h.numpy(), "logits": logits.numpy()}
        if name == "gelu":  # square: interpolate_pos_encoding to 48x48 images
            with torch.inference_mode():
                tensors["interpolated_logits"] = model(
                    torch.tensor(vit_e2e.golden_pixels(cfg, vit_e2e.INTERPOLATED)),
                    interpolate_pos_encoding=True).logits.numpy()
        safetensors_io.write(os.path.join(out_dir, name + ".safetensors"), tensors,
                             metadata=dict(meta, config=json.dumps(cfg)))
        print(f"wrote {name}")
    size = {"height": 32, "width": 32}
    pil, tv = ViTImageProcessorPil(size=size), ViTImageProcessor(size=size)
    assert pil.to_dict()["resample"] == vit_e2e.PREPROCESSOR["resample"]
    pil_px, tv_px = [], []
    for n in vit_e2e.TEST_IMAGES:
        im = Image.open(os.path.join(IMAGES, n))
        rgb = im.convert("RGB")  # what a user passes: both processors need RGB
        pil_px.append(pil(rgb, return_tensors="np")["pixel_values"][0])
        tv_px.append(tv(rgb, return_tensors="np")["pixel_values"][0])
    with torch.inference_mode():
        logits = models["gelu"](torch.tensor(np.stack(pil_px))).logits.numpy()
    high = (grey16[..., 0] >> 8).astype(np.uint8)
    high_px = pil(Image.fromarray(high, "L").convert("RGB"), return_tensors="np")["pixel_values"]
    safetensors_io.write(os.path.join(out_dir, "images.safetensors"),
                         {"pil_rgb8": np.stack([rgb8(p) for p in pil_px]),
                          "torchvision_rgb8": np.stack([rgb8(p) for p in tv_px]),
                          "grey16_high_byte_rgb8": rgb8(high_px), "logits": logits},
                         metadata=dict(meta, images=json.dumps(vit_e2e.TEST_IMAGES)))
    print("wrote images")


if __name__ == "__main__":
    main()
