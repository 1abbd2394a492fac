#!/usr/bin/env python3
"""The tensor-parallel benchmark's PyTorch side (bench/tp.py): the wide MLP
784 -> 4096 -> 4096 -> 10 trained with PyTorch's own tensor parallelism,
torch.distributed.tensor.parallel, on the layout dtrain's planner picks for it:

    fc1  784 -> 4096   ColwiseParallel  (output features split; ReLU runs on the block)
    fc2 4096 -> 4096   RowwiseParallel  (input features split; the partial outputs all-reduced)
    fc3 4096 -> 10     whole on every rank (dtrain leaves layers under 65536 weights whole)

gloo on CPU, one DeviceMesh("cpu", ...) of --tp ranks, Adam 1e-3, --batch samples of
Fashion-MNIST per step, converted from uint8 as dtrain converts them. With --dp 2 the mesh
is (dp, tp), ranks tp-fastest as dtrain lays them out; each data-parallel replica takes its
own --batch samples and the replicas' gradients are averaged (see dp_sync). With --tp 1 and
--dp 1 it is the plain single-process loop (no process group, no DTensor): the reference,
and the only layout Debian's PyTorch 1.13 can run (it has no torch.distributed.tensor).

Measured as bench_tp.c measures dtrain: step time is the median interval between the ends
of consecutive steps after --warmup of them, on every rank. Parameter bytes per rank are the
local shards (DTensor.to_local()) plus the whole tensors. Time in the tp collectives is
taken afterwards, in a separate window of --profile-steps steps under torch.profiler (the
profiler slows the steps, so that window's step times are not used): the main thread's time
in the functional collectives DTensor issues (_c10d_functional::all_reduce and friends,
launch and wait_tensor together, the wait for a slower rank included, as in dtrain's
figure). Rank 0 prints one JSON line with a "ranks" array.
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import batch_of, end_distributed, load  # noqa: E402


class WideMLP(nn.Module):
    """Flatten, 784 -> 4096, ReLU, 4096 -> 4096, ReLU, 4096 -> 10 (the scores; the loss is
    cross-entropy on them, as dtrain's loss kind cross_entropy). Named layers, so that the
    parallelize plan can address them."""

    def __init__(self, hidden=4096):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local(t):
    """This rank's part of a parameter: a DTensor's shard, a plain tensor itself."""
    return t.to_local() if hasattr(t, "to_local") else t


def param_bytes(model):
    return sum(local(p).numel() * local(p).element_size() for p in model.parameters())


def dp_sync(model, group, dp):
    """Averages the gradients of the data-parallel replicas, after backward, one all-reduce
    per tensor on its local shard (a tp rank pairs with the rank holding the same shard in
    the other replica). Not DDP: in PyTorch 2.15 DistributedDataParallel fails on a module
    with DTensor parameters ("aten.cat.default got mixed torch.Tensor and DTensor": its
    buckets concatenate the gradients); the composable replicate() ran, but afterwards the
    module's named_parameters() listed fc3's alone, and fc1's and fc2's weights were no
    longer nn.Parameters, so their averaging could not be trusted; FSDP would shard the
    parameters further (another layout). So, unlike dtrain's bucketed all-reduce, nothing
    here overlaps backward."""
    for p in model.parameters():
        if p.grad is not None:
            g = local(p.grad)
            dist.all_reduce(g, group=group)
            g.div_(dp)


def tp_collective_ms(prof, steps):
    """Main-thread milliseconds per step in the tp collectives of a profile. DTensor issues
    them as functional collectives: _c10d_functional::all_reduce starts gloo's work (the
    c10d::allreduce_ inside it is part of its time, not added again), and
    _c10d_functional::wait_tensor blocks until it is done; gloo's own gloo:all_reduce runs
    on its worker thread and overlaps those, so it is left out. dp_sync's plain
    dist.all_reduce calls are c10d:: ops, not counted here."""
    total_us = sum(ev.cpu_time_total for ev in prof.key_averages()
                   if ev.key.startswith("_c10d_functional::"))
    return total_us / 1e3 / steps


def worker(rank, a, port):
    torch.set_num_threads(a.threads)
    world = a.tp * a.dp
    tp_rank, dp_rank = rank % a.tp, rank // a.tp
    mesh = dp_group = None
    if world > 1:
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                                world_size=world)
        from torch.distributed.device_mesh import init_device_mesh
        if a.dp > 1:
            mesh2 = init_device_mesh("cpu", (a.dp, a.tp), mesh_dim_names=("dp", "tp"))
            mesh, dp_group = mesh2["tp"], mesh2["dp"].get_group()
        else:
            mesh = init_device_mesh("cpu", (a.tp,), mesh_dim_names=("tp",))
    # The same seed everywhere: the same initial whole weights on every rank before the
    # split, and the same sample permutation.
    torch.manual_seed(1)
    x, y = load(a.data)
    model = WideMLP(a.hidden)
    if a.tp > 1:
        from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                       parallelize_module)
        model = parallelize_module(model, mesh, {"fc1": ColwiseParallel(),
                                                 "fc2": RowwiseParallel()})
    loss_fn = nn.CrossEntropyLoss()
    # PyTorch's default Adam on CPU is its single-tensor loop (it picks the multi-tensor
    # "foreach" form by default only for CUDA tensors); --adam fused is the single-pass
    # kernel (fused=True). The
    # fused kernel refuses a list mixing DTensors and plain tensors (fc3 is plain), so the
    # split and the whole parameters go in separate groups: same settings, one call each.
    params = list(model.parameters())
    groups = [{"params": [p for p in params if hasattr(p, "to_local")]},
              {"params": [p for p in params if not hasattr(p, "to_local")]}]
    opt = torch.optim.Adam([g for g in groups if g["params"]], lr=1e-3,
                           **({"fused": True} if a.adam == "fused" else {}))
    n = x.shape[0]
    perm = torch.randperm(n)
    g = a.dp * a.batch  # samples per step, all replicas

    def step(s):
        # The tp ranks of a replica take the same samples; replica r the r-th part.
        start = (s * g) % (n - g) + dp_rank * a.batch
        xb, yb = batch_of(x, y, perm[start:start + a.batch])
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        if dp_group is not None:
            t = time.monotonic()
            dp_sync(model, dp_group, a.dp)
            dp_seconds.append(time.monotonic() - t)
        opt.step()
        return loss.detach()

    times, dp_seconds, last = [], [], None
    for s in range(1 + a.warmup + a.steps):
        loss = step(s)
        now = time.monotonic()
        if last is not None:
            times.append(now - last)
        last = now
    window = sorted(times[a.warmup:])
    # The last measured step's loss: the same at every tp for the same replica batch.
    last_loss = loss.item()
    # The measured steps' gradient averaging (1 + warmup steps before them).
    dp_window = dp_seconds[1 + a.warmup:]
    dp_ms = sum(dp_window) / len(dp_window) * 1e3 if dp_window else None
    coll_ms = None
    if world > 1 and a.profile_steps > 0:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for s in range(a.profile_steps):
                step(1 + a.warmup + a.steps + s)
        coll_ms = tp_collective_ms(prof, a.profile_steps)
    mine = {"rank": rank, "tp_rank": tp_rank, "dp_rank": dp_rank,
            "step_ms_median": window[len(window) // 2] * 1e3, "step_ms_min": window[0] * 1e3,
            "tp_ms_per_step": coll_ms, "dp_ms_per_step": dp_ms,
            "param_bytes": param_bytes(model)}
    ranks = [mine]
    if world > 1:
        ranks = [None] * world
        dist.all_gather_object(ranks, mine)
    if rank == 0:
        whole = sum(p.numel() * p.element_size() for p in WideMLP(a.hidden).parameters())
        print(json.dumps({
            "impl": "pytorch " + torch.__version__, "adam": a.adam, "world_size": world,
            "tp": a.tp, "dp": a.dp, "threads": a.threads, "global_batch": g, "steps": len(window),
            "step_ms_median": mine["step_ms_median"], "last_loss": last_loss,
            "samples_per_s": g / (mine["step_ms_median"] * 1e-3),
            "whole_param_bytes": whole, "profile_steps": a.profile_steps if world > 1 else 0,
            "ranks": ranks,
        }), flush=True)
    if world > 1:
        end_distributed()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tp", type=int, default=2, help="tensor-parallel ranks")
    ap.add_argument("--dp", type=int, default=1, help="data-parallel replicas of the tp group")
    ap.add_argument("--batch", type=int, default=64, help="samples per replica per step")
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1, help="threads per rank")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--adam", choices=["default", "fused"], default="default",
                    help="torch.optim.Adam as it comes, or with fused=True")
    ap.add_argument("--profile-steps", type=int, default=20,
                    help="steps of the separate profiled window (0: collectives not timed)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    if a.tp < 1 or a.dp < 1:
        ap.error("--tp and --dp must be at least 1")
    if a.tp * a.dp == 1:
        worker(0, a, 0)
    else:
        mp.spawn(worker, args=(a, free_port()), nprocs=a.tp * a.dp, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
