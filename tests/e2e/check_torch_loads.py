#!/usr/bin/python3
"""Checks, with Debian's PyTorch 1.13, that weights written by `dtrain train --save-weights`
load into the equivalent torch.nn.Sequential with one load_state_dict call and reproduce
dtrain's outputs: the test loss and accuracy PyTorch computes from the file equal the ones
dtrain reported for the same parameters. Run by `make refs` (not by `make test`).

usage: check_torch_loads.py DTRAIN
"""
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn

DATA = "/usr/share/datasets/fashion-mnist"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        assert e["dtype"] == "F32", (name, e["dtype"])
        b, end = e["data_offsets"]
        buf = bytearray(raw[8 + n + b:8 + n + end])
        out[name] = torch.frombuffer(buf, dtype=torch.float32).reshape(e["shape"])
    return out, meta


def test_set():
    with gzip.open(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(np.int64))


def main():
    dtrain = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        w, m = os.path.join(tmp, "w.safetensors"), os.path.join(tmp, "m.jsonl")
        subprocess.run([dtrain, "train", os.path.join(ROOT, "examples/mlp.ini"),
                        "--max-steps", "30", "--save-weights", w, "--metrics", m,
                        "--no-progress"], check=True, stdout=subprocess.DEVNULL)
        epochs = [json.loads(line) for line in open(m) if '"epoch"' in line]
        ours = [e for e in epochs if e.get("event") == "epoch"][-1]
        state, meta = load_safetensors(w)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Dropout(0.2),
                          nn.Linear(128, 10))
    model.load_state_dict(state)  # strict: every name and shape must match
    model.eval()
    mean, std = float(meta["input_mean"]), float(meta["input_std"])
    x, y = test_set()
    with torch.no_grad():
        out = model((x / 255.0 - mean) / std)
        loss = nn.functional.cross_entropy(out, y, reduction="sum").item() / len(y)
        acc = (out.argmax(1) == y).float().mean().item()
    print("dtrain : test loss %.7f accuracy %.4f" % (ours["test_loss"], ours["test_accuracy"]))
    print("pytorch: test loss %.7f accuracy %.4f" % (loss, acc))
    ok = abs(loss - ours["test_loss"]) <= 1e-5 * abs(loss) and abs(acc - ours["test_accuracy"]) < 2e-4
    print("weights load into torch.nn.Sequential and reproduce dtrain's outputs:",
          "yes" if ok else "NO")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
