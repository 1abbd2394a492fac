"""torch.save / torch.load of the ConvNet's training state, for bench/ckpt.py: the model's
state_dict and Adam's (after one step, so its moments exist), as a user of PyTorch saves a
checkpoint. Runs under whichever Python it is started with (Debian's PyTorch or bench/.venv's)
and prints one JSON line.

Without --load-only: --reps saves in this process (torch.save, then fsync as dtrain does;
median), the file's bytes, and, for reference only, the median of --reps loads in this same,
warm process (load_warm_s: torch's code and allocator already warmed by the loads before).

With --load-only: one load of the file an earlier run left in --dir, in this fresh process,
as a user resuming meets it and as bench/ckpt.py times dtrain's (`dtrain train --resume` in a
new process, timed from the start of the resume to the state in place): the model and its
Adam are built first (dtrain's trainer exists before its resume too), then torch.load and
both load_state_dict calls are timed (load_s)."""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import ConvNet  # noqa: E402


def load(path, m, opt):
    """Seconds to read the checkpoint and put both states in place."""
    t0 = time.perf_counter()
    state = torch.load(path)
    m.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--load-only", action="store_true",
                    help="one load of DIR/torch_ckpt.pt in this fresh process")
    a = ap.parse_args()
    torch.set_num_threads(1)
    m = ConvNet()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    path = os.path.join(a.dir, "torch_ckpt.pt")
    if a.load_only:
        if not os.path.exists(path):
            sys.exit("torch_ckpt.py: %s missing: run without --load-only first" % path)
        print(json.dumps({"torch": torch.__version__, "load_s": load(path, m, opt)}))
        return
    loss = m(torch.randn(32, 1, 28, 28)).sum()
    loss.backward()
    opt.step()
    saves, loads = [], []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        torch.save({"model": m.state_dict(), "optim": opt.state_dict()}, path)
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        saves.append(time.perf_counter() - t0)
        loads.append(load(path, m, opt))
    print(json.dumps({"torch": torch.__version__, "save_s": statistics.median(saves),
                      "saves": saves,
                      "load_warm_s": statistics.median(loads), "bytes": os.path.getsize(path)}))


if __name__ == "__main__":
    main()
