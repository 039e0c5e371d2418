#!/usr/bin/env python3
"""Makes the golden outputs of Hugging Face's own modelling code that
tests/oracle/llama_e2e.py holds Transfuse to (tests/oracle/llama-golden/):
for each config of llama_e2e.GOLDEN (Llama with grouped K/V heads, a tied
head and llama3 rotary scaling; Mistral; Qwen2 with its biases; GPT-2), the
weights and tokens of llama_e2e.golden_inputs (drawn again by the test from
NumPy's stable PCG64) through LlamaForCausalLM, MistralForCausalLM,
Qwen2ForCausalLM or GPT2LMHeadModel in fp32 (eager attention): `logits`
[2, 7, 50], and `generated` [2, 8], generate()'s greedy continuation with
the cache on.

Run once, by hand, in a venv with transformers (no hub access is needed):

    /work/venv-hf/bin/pip install torch numpy transformers
    /work/venv-hf/bin/python tests/oracle/make_llama_golden.py
"""
import os
import sys

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llama_e2e  # noqa: E402
import safetensors_io  # noqa: E402

CLASSES = {"llama": transformers.LlamaForCausalLM, "mistral": transformers.MistralForCausalLM,
           "qwen2": transformers.Qwen2ForCausalLM, "gpt2": transformers.GPT2LMHeadModel}


def main():
    out = os.path.join(HERE, "llama-golden")
    os.makedirs(out, exist_ok=True)
    for name in llama_e2e.GOLDEN:
        cfg = llama_e2e.GPT2 if name == "gpt2" else llama_e2e.CONFIGS[name]
        weights, tokens = llama_e2e.golden_inputs(name)
        config = transformers.AutoConfig.for_model(**cfg)
        config._attn_implementation = "eager"
        model = CLASSES[cfg["model_type"]](config).eval()
        state = {k: torch.tensor(v) for k, v in weights.items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        tied = {"lm_head.weight"}
        assert set(missing) <= tied, missing
        assert not [u for u in unexpected if not u.endswith("attn.bias")], unexpected
        model.tie_weights()
        ids = torch.tensor(tokens, dtype=torch.long)
        with torch.no_grad():
            logits = model(ids).logits.numpy()
            gen = model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False,
                                 use_cache=True, pad_token_id=0)[:, ids.shape[1]:].numpy()
        safetensors_io.write(os.path.join(out, name + ".safetensors"),
                             {"logits": logits.astype(np.float32),
                              "generated": gen.astype(np.int32)})
        print(name, transformers.__version__, logits.shape, gen.tolist())


if __name__ == "__main__":
    main()
