#!/usr/bin/python3
"""The reference of dtrain export (tests/ckpt/test_export.c), with Debian's PyTorch.

The seeds' MLP from PyTorch's initial weights (tests/e2e/mlp_init.safetensors) trained as
tests/e2e/gen_e2e.py trains it (20 Adam steps, batch 64, file order: tests/e2e/mlp_nodrop.ini),
then its outputs (logits) for the first 16 training images. test_export trains the same run
in dtrain, checkpoints it (under tensor parallelism too), exports the checkpoint and checks
that the exported file, loaded as a state dict, gives these outputs. Run by `make refs`;
`make test` only reads export_ref.safetensors.
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import gen_e2e  # noqa: E402  (the models, the data and the training loop of the e2e refs)

STEPS, PROBE = 20, 16


def main():
    torch.set_num_threads(1)
    init = gen_e2e.read_safetensors(os.path.join(HERE, "..", "e2e", "mlp_init.safetensors"))
    m = gen_e2e.mlp()
    m.load_state_dict(init)
    x, y = gen_e2e.load_images(STEPS * gen_e2e.BATCH)
    gen_e2e.train(m, nn.CrossEntropyLoss(), torch.optim.Adam(m.parameters(), lr=1e-3), STEPS,
                  x, y)
    m.eval()
    with torch.no_grad():
        out = m(x[:PROBE]).to(torch.float64)
    gen_e2e.write_safetensors(os.path.join(HERE, "export_ref.safetensors"), {"outputs": out},
                              {"steps": str(STEPS), "samples": "training images 0..%d" % (PROBE - 1),
                               "producer": "torch " + torch.__version__})
    print("export_ref: outputs of %d samples after %d steps, |max| %.4f"
          % (PROBE, STEPS, out.abs().max().item()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
