#!/usr/bin/env python3
"""Data-parallel training throughput of the seeds' MLP and ConvNet with PyTorch
DistributedDataParallel (gloo backend), the peer of `mpirun -np N dtrain train` in
bench/ddp.py. With --world-size 1 it trains the same loop in one process without DDP: the
single-process reference of the scaling efficiency.

Each of the N processes runs --threads threads and takes its own --batch samples of every
global batch of N x batch consecutive samples of one permutation (the same on every rank),
as dtrain's data parallelism does. DDP's defaults otherwise (bucket_cap_mb 25, rank 0's
parameters broadcast at construction).

Rank 0 prints one JSON object, measured as bench_train.c measures dtrain (its data-parallel
runs included): samples_per_s is the global batch over the median interval between the ends
of consecutive steps after --warmup of them; samples_per_s_window (all samples of those
steps over their total time) is printed beside it.
"""
import argparse
import json
import os
import resource
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import batch_of, build, load  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, a, port):
    torch.set_num_threads(a.threads)
    world = a.world_size
    if world > 1:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                                world_size=world)
    torch.manual_seed(1)
    x, y = load(a.data)
    model, loss_fn = build(a.model)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    n = x.shape[0]
    perm = torch.randperm(n)  # same seed, same permutation on every rank
    g = world * a.batch
    times = []
    last = None
    for s in range(1 + a.warmup + a.steps):
        start = (s * g) % (n - g) + rank * a.batch
        xb, yb = batch_of(x, y, perm[start:start + a.batch])
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        now = time.monotonic()
        if last is not None:
            times.append(now - last)
        last = now
    window = times[a.warmup:]
    if rank == 0:
        median = sorted(window)[len(window) // 2]
        print(json.dumps({
            "impl": "pytorch " + torch.__version__, "model": a.model, "world_size": world,
            "batch_per_rank": a.batch, "threads": a.threads, "steps": len(window),
            "samples_per_s_window": g * len(window) / sum(window),
            "samples_per_s": g / median, "step_ms_median": median * 1e3,
            "peak_rss_mb_rank0": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        }), flush=True)
    if world > 1:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "convnet"], required=True)
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--threads", type=int, default=1, help="threads per rank")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    if a.world_size == 1:
        worker(0, a, 0)
    else:
        mp.spawn(worker, args=(a, free_port()), nprocs=a.world_size, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
