#!/usr/bin/python3
"""Generates the end-to-end references of issue 10 with Debian's PyTorch 1.13.

For the seeds' MLP (20 Adam steps, cross-entropy) and ConvNet (5 Adam steps, NLL of
log_softmax), both with dropout p = 0, batch 64, samples in file order from Fashion-MNIST's
training set scaled as (x/255 - 0.5)/0.5: writes the initial weights PyTorch drew
(<model>_init.safetensors, loaded by dtrain through --init-weights) and the loss of every
step (<model>_losses.safetensors, F64). Run by `make refs`; `make test` only reads the files.
"""
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = "/usr/share/datasets/fashion-mnist"
BATCH = 64


def write_safetensors(path, tensors, metadata=None):
    """The safetensors layout: u64 LE header length, JSON header, raw LE data."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        t = t.detach().contiguous()
        dtype = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}[t.dtype]
        raw = t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def load_images(n):
    with gzip.open(os.path.join(DATA, "train-images-idx3-ubyte.gz")) as f:
        raw = f.read()
    x = np.frombuffer(raw, dtype=np.uint8, offset=16)[: n * 784].reshape(n, 1, 28, 28)
    with gzip.open(os.path.join(DATA, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8)[:n]
    x = (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.5) / 0.5
    return x, torch.from_numpy(y.astype(np.int64))


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Dropout(0.0),
                         nn.Linear(128, 10))


class ConvNet(nn.Module):
    """The seeds' ConvNet, with the module names its state_dict uses."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        x = torch.flatten(torch.max_pool2d(x, 2), 1)  # dropout(0) omitted: identity
        return torch.log_softmax(self.fc2(torch.relu(self.fc1(x))), dim=1)


def run(name, model, loss_fn, steps, seed):
    torch.manual_seed(seed)
    m = model()
    init = {k: v.clone() for k, v in m.state_dict().items()}
    x, y = load_images(steps * BATCH)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    losses = []
    for s in range(steps):
        xb, yb = x[s * BATCH:(s + 1) * BATCH], y[s * BATCH:(s + 1) * BATCH]
        opt.zero_grad()
        loss = loss_fn(m(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    write_safetensors(os.path.join(HERE, name + "_init.safetensors"), init,
                      {"format": "pt", "producer": "torch " + torch.__version__})
    write_safetensors(os.path.join(HERE, name + "_losses.safetensors"),
                      {"losses": torch.tensor(losses, dtype=torch.float64)},
                      {"steps": str(steps), "batch": str(BATCH)})
    print(name, ["%.6f" % v for v in losses])


def main():
    torch.set_num_threads(1)
    run("mlp", mlp, nn.CrossEntropyLoss(), 20, 1)
    run("convnet", ConvNet, nn.NLLLoss(), 5, 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
