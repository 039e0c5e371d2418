#!/usr/bin/env python3
"""Makes the golden outputs of Hugging Face's own BERT modelling code that
tests/oracle/bert_e2e.py holds Transfuse to (tests/oracle/bert-golden/).

For two tiny configs (GOLDEN_CONFIGS in bert_e2e.py: exact GELU with BERT's
eps, and tanh GELU with eps 1e-5, three token types, three heads), the
weights are drawn from a fixed NumPy seed by bert_e2e.golden_weights (the
test draws the same ones again), loaded into transformers'
BertForSequenceClassification, and run on a padded batch with token types.
Each file stores the inputs and, as float32: last_hidden_state (BertModel),
logits (the classification head) and sentence_embedding (mean pooling over
the attention mask, then L2 normalization, as sentence-transformers'
Pooling and Normalize modules compute them). Run once, by hand, in a venv
with transformers (no hub access is needed):

    python3 -m venv /work/venv-hf && /work/venv-hf/bin/pip install torch numpy transformers
    /work/venv-hf/bin/python tests/oracle/make_bert_golden.py
"""
import json
import os
import sys

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bert_e2e  # noqa: E402
import safetensors_io  # noqa: E402


def main():
    out_dir = os.path.join(HERE, "bert-golden")
    os.makedirs(out_dir, exist_ok=True)
    for name, cfg in bert_e2e.GOLDEN_CONFIGS.items():
        weights = bert_e2e.golden_weights(cfg)
        config = transformers.BertConfig(**{k: v for k, v in cfg.items() if k != "architectures"})
        model = transformers.BertForSequenceClassification(config).eval()
        state = {k: torch.tensor(v) for k, v in weights.items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        assert not unexpected and all("position_ids" in m for m in missing), (missing, unexpected)
        x = bert_e2e.golden_inputs(cfg)
        feeds = {k: torch.tensor(v, dtype=torch.long) for k, v in x.items()}
        with torch.inference_mode():
            h = model.bert(**feeds).last_hidden_state
            logits = model(**feeds).logits
            mask = feeds["attention_mask"].unsqueeze(-1).to(h.dtype)
            pooled = (h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            embedding = torch.nn.functional.normalize(pooled, p=2, dim=1)
        tensors = dict(x, last_hidden_state=h.numpy(), logits=logits.numpy(),
                       sentence_embedding=embedding.numpy())
        safetensors_io.write(os.path.join(out_dir, name + ".safetensors"),
                             {k: np.ascontiguousarray(v) for k, v in tensors.items()},
                             metadata={"transformers": transformers.__version__,
                                       "torch": torch.__version__, "config": json.dumps(cfg)})
        print(f"wrote {name}: transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
