#!/usr/bin/env python3
"""Makes the golden outputs of Hugging Face's own MarianMTModel that
tests/oracle/marian_e2e.py holds Transfuse to (tests/oracle/marian-golden/): for
each config of marian_e2e.GOLDEN, the weights and inputs of
marian_e2e.golden_inputs (drawn again by the test from NumPy's stable PCG64)
through MarianMTModel in fp32 (eager attention): `logits` [2, 5, V] of the
sources and targets, and `generated` [2, <= 10], generate(num_beams=4,
max_new_tokens=8) of the sources (the start id first, the pad id banned as the
config's bad_words_ids says).

Run once, by hand, in a venv with transformers (no hub access is needed):

    /work/venv-hf/bin/python tests/oracle/make_marian_golden.py
"""
import os
import sys

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import marian_e2e  # noqa: E402
import safetensors_io  # noqa: E402


def main():
    out = os.path.join(HERE, "marian-golden")
    os.makedirs(out, exist_ok=True)
    for name in marian_e2e.GOLDEN:
        cfg = marian_e2e.CONFIGS[name]
        weights, src, tgt = marian_e2e.golden_inputs(name)
        config = transformers.MarianConfig(**{k: v for k, v in cfg.items()
                                              if k not in ("model_type", "architectures")})
        config._attn_implementation = "eager"
        model = transformers.MarianMTModel(config).eval()
        state = {k: torch.tensor(v) for k, v in weights.items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        allowed = {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight",
                   "lm_head.weight", "model.encoder.embed_tokens.weight",
                   "model.decoder.embed_tokens.weight", "model.shared.weight"}
        assert set(missing) <= allowed, missing
        assert not unexpected, unexpected
        model.tie_weights()
        s = torch.tensor(src, dtype=torch.long)
        mask = (s != cfg["pad_token_id"]).long()
        with torch.no_grad():
            logits = model(input_ids=s, attention_mask=mask,
                           decoder_input_ids=torch.tensor(tgt, dtype=torch.long)).logits.numpy()
            gen = model.generate(input_ids=s, attention_mask=mask, num_beams=4, max_new_tokens=8,
                                 do_sample=False, length_penalty=0.0, early_stopping=True)
        gen = gen.numpy()
        safetensors_io.write(os.path.join(out, name + ".safetensors"),
                             {"logits": logits.astype(np.float32),
                              "generated": gen.astype(np.int32)})
        print(name, transformers.__version__, logits.shape, gen.tolist())


if __name__ == "__main__":
    main()
