#!/usr/bin/env python3
"""Data-parallel training throughput of the seeds' MLP and ConvNet with PyTorch
DistributedDataParallel (gloo backend), the peer of `mpirun -np N dtrain train` in
bench/ddp.py. With --world-size 1 it trains the same loop in one process without DDP: the
single-process reference of the scaling efficiency.

Each of the N processes runs --threads threads and takes its own --batch samples of every
global batch of N x batch consecutive samples of one permutation (the same on every rank),
as dtrain's data parallelism does. DDP at its best on the CPU (issue 39): its gradients are
views into its buckets (gradient_as_bucket_view=True: no copy in or out of them), the graph is
declared static (static_graph=True), --optim picks the Adam (torch_train.py make_adam: fused
where this PyTorch has it on the CPU, foreach, or the default single-tensor loop); buckets
of DDP's default 25 MB, rank 0's parameters broadcast at construction. --cpus pins rank r to
the r-th CPU list (os.sched_setaffinity), so that bench/ddp.py gives PyTorch's ranks the
cores mpirun binds dtrain's to.

Rank 0 prints one JSON object, measured as bench_train.c measures dtrain (its data-parallel
runs included): samples_per_s is the global batch over the median interval between the ends
of consecutive steps after --warmup of them; samples_per_s_window (all samples of those
steps over their total time) is printed beside it.

--allreduce instead times one all-reduce (sum, float32) of the model's gradient, every
parameter's element count, through gloo at --world-size ranks, as `dtrain bench-comm` times
MPI's (src/cli/cmd_bench_comm.c): --warmup untimed calls, a barrier, --steps timed calls
each on its own clock; the mean per rank, the largest over the ranks (allreduce_us).
--param-count prints the model's parameter count and exits.
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
from torch_train import batch_of, build, end_distributed, load, make_adam  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def param_count(name):
    model, _ = build(name)
    return sum(p.numel() for p in model.parameters())


def parse_cpus(text, world):
    """"0;1" -> [{0}, {1}]: rank r's CPUs; one list per rank."""
    lists = [set(int(c) for c in part.split(",")) for part in text.split(";")]
    if len(lists) != world:
        raise SystemExit("torch_ddp.py: --cpus %s: %d CPU lists for %d ranks" %
                         (text, len(lists), world))
    return lists


def allreduce(rank, a):
    """One all-reduce of the model's gradient size through gloo, timed as bench-comm."""
    count = param_count(a.model)
    buf = torch.ones(count)
    for _ in range(a.warmup):
        dist.all_reduce(buf)
    dist.barrier()
    spent = 0.0
    for _ in range(a.steps):
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        spent += time.perf_counter() - t0
    worst = torch.tensor([spent / a.steps], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"impl": "pytorch " + torch.__version__, "backend": "gloo",
                          "model": a.model, "world_size": a.world_size, "count": count,
                          "bytes": 4 * count, "iters": a.steps, "warmup": a.warmup,
                          "allreduce_us": worst.item() * 1e6,
                          "cpus": sorted(os.sched_getaffinity(0))}), flush=True)


def worker(rank, a, port):
    if a.cpus:
        os.sched_setaffinity(0, parse_cpus(a.cpus, a.world_size)[rank])
    torch.set_num_threads(a.threads)
    world = a.world_size
    if world > 1:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                                world_size=world)
    if a.allreduce:
        allreduce(rank, a)
        end_distributed()
    torch.manual_seed(1)
    x, y = load(a.data)
    model, loss_fn = build(a.model)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(
            model, gradient_as_bucket_view=True, static_graph=True)
    opt = make_adam(model.parameters(), a.optim)
    n = x.shape[0]
    perm = torch.randperm(n)  # same seed, same permutation on every rank
    g = world * a.batch
    times = []
    last = None
    for s in range(1 + a.warmup + a.steps):
        start = (s * g) % (n - g) + rank * a.batch
        xb, yb = batch_of(x, y, perm[start:start + a.batch])
        opt.zero_grad(set_to_none=not (world > 1))  # bucket views stay; zeroed in place
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
            "batch_per_rank": a.batch, "threads": a.threads, "optimizer": a.optim,
            "ddp": {"gradient_as_bucket_view": True, "static_graph": True} if world > 1 else None,
            "cpus": sorted(os.sched_getaffinity(0)), "steps": len(window),
            "samples_per_s_window": g * len(window) / sum(window),
            "samples_per_s": g / median, "step_ms_median": median * 1e3,
            "peak_rss_mb_rank0": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        }), flush=True)
    if world > 1:
        end_distributed()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "convnet"], required=True)
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--threads", type=int, default=1, help="threads per rank")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--optim", choices=["fused", "foreach", "default"], default="default",
                    help="which Adam (default: torch.optim.Adam's own choice)")
    ap.add_argument("--cpus", default="",
                    help="rank r's CPUs, ';' between ranks (\"0;1\"): os.sched_setaffinity")
    ap.add_argument("--allreduce", action="store_true",
                    help="time gloo's all-reduce of the model's gradient size instead")
    ap.add_argument("--param-count", action="store_true", help="print it and exit")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    if a.param_count:
        print(json.dumps({"model": a.model, "params": param_count(a.model)}))
        return 0
    if a.cpus:
        parse_cpus(a.cpus, a.world_size)  # refuse a bad list before spawning anything
    if a.allreduce and a.world_size < 2:
        raise SystemExit("torch_ddp.py: --allreduce needs --world-size 2 or more")
    if a.world_size == 1:
        worker(0, a, 0)
    else:
        mp.spawn(worker, args=(a, free_port()), nprocs=a.world_size, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
