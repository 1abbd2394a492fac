#!/usr/bin/env python3
"""Training throughput of the seeds' MLP and ConvNet in PyTorch, the peer dtrain is measured
against (bench/run.py runs it with Debian's python3-torch and with the newest PyTorch from
PyPI in bench/.venv, in the same run as bench_train).

Measured exactly as bench/bench_train.c measures dtrain (docs/BENCHMARKS.md):
  step time     the interval between the ends of consecutive training steps (batch gather
                and conversion included), median over --steps intervals after --warmup;
  setup_s       launch to the start of training (data loaded, model and optimizer built);
  first_step_s  launch to the end of the first training step;
  peak_rss_mb   the process's peak resident memory (getrusage ru_maxrss).
"Launch" is BENCH_T0 (CLOCK_MONOTONIC seconds, set by bench/run.py just before it starts
the process) or, without it, the process start time from /proc (1/CLK_TCK resolution).
Prints one JSON object. Same batch, threads, data and optimizer as `dtrain train`:
Fashion-MNIST in memory as uint8, converted batch by batch, Adam 1e-3.

PyTorch at its best (issue 39), each a column of bench/run.py: --optim picks the Adam
(fused: one kernel over every tensor, 2.x on the CPU; foreach: the multi-tensor form;
default: what torch.optim.Adam() gives on the CPU, the single-tensor loop), --compile runs
the model under torch.compile (mode default; its compilation falls in the first step, not in
the steady state), --channels-last keeps the ConvNet's weights and inputs channels_last.
--threads is torch.set_num_threads; the BLAS's own threads come from the environment
(bench/benchlib.py thread_settings).
"""
import os
import time


def launch_time():
    """CLOCK_MONOTONIC time of this process's launch (as bench_train.c's launch_time)."""
    env = os.environ.get("BENCH_T0", "")
    if env:
        return float(env)
    with open("/proc/self/stat") as f:
        stat = f.read()
    start = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22, starttime
    since_start = (time.clock_gettime(time.CLOCK_BOOTTIME)
                   - start / os.sysconf("SC_CLK_TCK"))
    return time.monotonic() - since_start


LAUNCH = launch_time()

import argparse  # noqa: E402
import gzip  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Dropout(0.2),
                         nn.Linear(128, 10))


def deep_mlp(depth, width):
    """The layer list as dtrain's model.layers spells it: index i here is layer i there."""
    layers, fan_in = [nn.Flatten()], 784
    for _ in range(depth):
        layers += [nn.Linear(fan_in, width), nn.ReLU()]
        fan_in = width
    layers.append(nn.Linear(fan_in, 10))
    return nn.Sequential(*layers)


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


def build(name):
    """The model and its loss, as examples/mlp.ini and examples/convnet.ini describe them."""
    if name == "mlp":
        return mlp(), nn.CrossEntropyLoss()
    return ConvNet(), nn.NLLLoss()


def load(data_dir):
    """Fashion-MNIST's training set as uint8 images (N, 1, 28, 28) and int64 labels."""
    with gzip.open(os.path.join(data_dir, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(data_dir, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    return torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64))


def batch_of(x, y, idx):
    """One batch converted from uint8 as dtrain converts it: (x/255 - 0.5)/0.5."""
    return (x[idx].float() / 255.0 - 0.5) / 0.5, y[idx]


def make_adam(params, kind, lr=1e-3):
    """torch.optim.Adam as `kind` says: "fused" (fused=True), "foreach" (foreach=True) or
    "default" (no flag: on the CPU, PyTorch's single-tensor loop). Raises SystemExit naming
    the version where this PyTorch's Adam lacks the flag."""
    if kind == "default":
        return torch.optim.Adam(params, lr=lr)
    if kind not in inspect.signature(torch.optim.Adam).parameters:
        raise SystemExit("torch %s's Adam has no %s=" % (torch.__version__, kind))
    return torch.optim.Adam(params, lr=lr, **{kind: True})


def end_distributed():
    """The end of a gloo worker started by mp.spawn: every rank leaves together, the process
    group is destroyed, and the process ends here with status 0, its output flushed.
    Left to the interpreter's exit, gloo's teardown ended a rank with SIGABRT ("terminate
    called without an active exception") in about one run in four of the PowerSGD hook and
    in some DDP runs, even after destroy_process_group (pytorch/pytorch#190489 reports the
    same message; the abandoned pull request #179291 traces it to gloo's threads releasing
    tensors while the interpreter is torn down). Nothing is timed after this point."""
    import torch.distributed as dist
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "convnet"], required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--optim", choices=["fused", "foreach", "default"], default="default",
                    help="which Adam (default: torch.optim.Adam's own choice)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--channels-last", action="store_true",
                    help="the ConvNet's weights and inputs in channels_last")
    a = ap.parse_args()
    if a.compile and not hasattr(torch, "compile"):
        raise SystemExit("torch %s has no torch.compile" % torch.__version__)
    if a.channels_last and a.model != "convnet":
        raise SystemExit("--channels-last: the ConvNet's only (the MLP has no image layers)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    t = time.monotonic()
    x, y = load(a.data)
    load_s = time.monotonic() - t
    model, loss_fn = build(a.model)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    opt = make_adam(model.parameters(), a.optim)
    fwd = torch.compile(model) if a.compile else model
    n = x.shape[0]
    perm = torch.randperm(n)
    setup_s = time.monotonic() - LAUNCH
    # Step 1 ends the first interval; warmup + steps intervals follow it (as bench_train).
    times = []
    first_step_s = None
    last = None
    for s in range(1 + a.warmup + a.steps):
        start = (s * a.batch) % (n - a.batch)
        xb, yb = batch_of(x, y, perm[start:start + a.batch])
        xb = xb.contiguous(memory_format=fmt)
        opt.zero_grad(set_to_none=True)  # 2.x's default; 1.13's zeroed every gradient
        loss = loss_fn(fwd(xb), yb)
        loss.backward()
        opt.step()
        now = time.monotonic()
        if last is None:
            first_step_s = now - LAUNCH
        else:
            times.append(now - last)
        last = now
    steady = sorted(times[a.warmup:])
    median = steady[len(steady) // 2]
    print(json.dumps({
        "impl": "pytorch " + torch.__version__, "model": a.model, "batch": a.batch,
        "threads": a.threads, "torch_threads": torch.get_num_threads(),
        "optimizer": a.optim, "compile": a.compile, "channels_last": a.channels_last,
        "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                               "OPENBLAS_NUM_THREADS") if k in os.environ},
        "steps": len(steady), "samples_per_s": a.batch / median,
        "step_ms_median": median * 1e3, "step_ms_min": steady[0] * 1e3,
        "setup_s": setup_s, "first_step_s": first_step_s, "load_s": load_s,
        "peak_rss_mb": peak_rss_mb(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
