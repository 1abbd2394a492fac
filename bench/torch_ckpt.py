"""torch.save / torch.load of the ConvNet's training state, for bench/ckpt.py: the model's
state_dict and Adam's (after one step, so its moments exist), as a user of PyTorch saves a
checkpoint. Runs under whichever Python it is started with (Debian's PyTorch or bench/.venv's)
and prints one JSON line: medians over --reps of save (torch.save, then fsync as dtrain does),
load (torch.load, load_state_dict of model and optimizer) and the file's bytes."""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import ConvNet  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    torch.set_num_threads(1)
    m = ConvNet()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    loss = m(torch.randn(32, 1, 28, 28)).sum()
    loss.backward()
    opt.step()
    path = os.path.join(a.dir, "torch_ckpt.pt")
    saves, loads = [], []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        torch.save({"model": m.state_dict(), "optim": opt.state_dict()}, path)
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        saves.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        state = torch.load(path)
        m.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        loads.append(time.perf_counter() - t0)
    print(json.dumps({"torch": torch.__version__, "save_s": statistics.median(saves),
                      "load_s": statistics.median(loads), "bytes": os.path.getsize(path)}))


if __name__ == "__main__":
    main()
