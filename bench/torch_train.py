#!/usr/bin/env python3
"""Training throughput of the seeds' MLP and ConvNet in PyTorch, the peer dtrain is measured
against (bench/run.sh runs it with Debian's python3-torch and with the newest PyTorch from
PyPI in bench/.venv, in the same run as dtrain).

Prints one JSON object: samples/s in steady state, time from process start to the first
training step, and peak resident memory. Same batch, threads, data and optimizer as
`dtrain train`: Fashion-MNIST in memory as uint8, converted batch by batch, Adam 1e-3.
"""
import argparse
import gzip
import json
import os
import resource
import sys
import time

T0 = time.monotonic()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Dropout(0.2),
                         nn.Linear(128, 10))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        x = torch.flatten(self.dropout1(torch.max_pool2d(x, 2)), 1)
        x = self.dropout2(torch.relu(self.fc1(x)))
        return torch.log_softmax(self.fc2(x), dim=1)


def load(data_dir):
    with gzip.open(os.path.join(data_dir, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(data_dir, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    return torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "convnet"], required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    x, y = load(a.data)
    model = mlp() if a.model == "mlp" else ConvNet()
    loss_fn = nn.CrossEntropyLoss() if a.model == "mlp" else nn.NLLLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    perm = torch.randperm(x.shape[0])
    first_step = None
    times = []
    for s in range(a.warmup + a.steps):
        t = time.monotonic()
        idx = perm[(s * a.batch) % (x.shape[0] - a.batch):][:a.batch]
        xb = (x[idx].float() / 255.0 - 0.5) / 0.5
        opt.zero_grad()
        loss = loss_fn(model(xb), y[idx])
        loss.backward()
        opt.step()
        if first_step is None:
            first_step = t - T0
        times.append(time.monotonic() - t)
    steady = sorted(times[a.warmup:])
    median = steady[len(steady) // 2]
    print(json.dumps({
        "impl": "pytorch " + torch.__version__, "model": a.model, "batch": a.batch,
        "threads": a.threads, "samples_per_s": a.batch / median,
        "step_ms_median": median * 1e3, "first_step_s": first_step,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
