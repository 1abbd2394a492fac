#!/usr/bin/env python3
"""The pipeline-parallel benchmark's PyTorch side (bench/pp.py): the deep MLP (flatten,
--depth linear layers of --width with a ReLU after each, a linear head of 10 outputs: the
scores, cross-entropy on them) cut into two pipeline stages at layer --split of that list,
trained with torch.distributed.pipelining on two processes, gloo on CPU.

The layer list is the one dtrain's model.layers names (bench/pp.py passes the same index to
both), so stage 0 is layers [0, split) and stage 1 layers [split, end) in both programs.
Each stage is a PipelineStage around its nn.Sequential slice; ScheduleGPipe or Schedule1F1B
runs --micro-batches micro-batches of --batch samples per step (the schedule splits the
step's batch along dim 0), averaging the micro-batches' mean losses (scale_grads), which is
the mean over the step's samples as in dtrain; then each stage's Adam (1e-3) steps its own
parameters. The same seed on both ranks: the same initial whole model before the cut, the
same sample permutation (stage 0 takes the images, stage 1 the labels).

Measured on every rank, as bench_tp.c measures dtrain:
  step time      the median interval between the ends of consecutive steps after --warmup;
  pipeline step  this rank's time from the step's start (zero_grad, the batch gathered and
                 converted as dtrain converts it) to the end of schedule.step(): dtrain's
                 pipeline step, the optimizer left out;
  compute        of it, the time in the stage's forward_one_chunk and backward_one_chunk
                 (timed in a PipelineStage subclass: the schedule calls them for every
                 micro-batch, its receives and waits outside them) and, on the last stage,
                 in the loss function. The bubble is 1 - compute / pipeline step.
Rank 0 prints one JSON line with a "ranks" array.
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
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,
                                          ScheduleInterleaved1F1B, ScheduleLoopedBFS)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import batch_of, deep_mlp, end_distributed, load  # noqa: E402

STAGES = 2
SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
# Round robin (--placement round_robin): layer l is stage l of the layer list, on rank
# l mod 2, the multi-stage schedules' "looped" placement. GPipe's breadth-first form is
# ScheduleLoopedBFS; 1F1B's is ScheduleInterleaved1F1B.
LOOPED = {"gpipe": ScheduleLoopedBFS, "1f1b": ScheduleInterleaved1F1B}


class TimedStage(PipelineStage):
    """A PipelineStage that adds the seconds of its forwards and backwards to `compute_s`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.compute_s = 0.0

    def forward_one_chunk(self, *args, **kwargs):
        t0 = time.monotonic()
        try:
            return super().forward_one_chunk(*args, **kwargs)
        finally:
            self.compute_s += time.monotonic() - t0

    def backward_one_chunk(self, *args, **kwargs):
        t0 = time.monotonic()
        try:
            return super().backward_one_chunk(*args, **kwargs)
        finally:
            self.compute_s += time.monotonic() - t0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, a, port):
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=STAGES)
    torch.manual_seed(1)
    x, y = load(a.data)
    whole = deep_mlp(a.depth, a.width)
    ce = nn.CrossEntropyLoss()
    if a.placement == "round_robin":
        mine_idx = list(range(rank, len(whole), STAGES))
        stages = [TimedStage(whole[i], i, len(whole), torch.device("cpu")) for i in mine_idx]
        part = nn.ModuleList([whole[i] for i in mine_idx])
    else:
        part = whole[:a.split] if rank == 0 else whole[a.split:]
        stages = [TimedStage(part, rank, STAGES, torch.device("cpu"))]
    stage = stages[-1]

    def loss_fn(out, target):
        t0 = time.monotonic()
        loss = ce(out, target)
        stage.compute_s += time.monotonic() - t0
        return loss

    if a.placement == "round_robin":
        sched = LOOPED[a.schedule](stages, n_microbatches=a.micro_batches, loss_fn=loss_fn)
    else:
        sched = SCHEDULES[a.schedule](stage, n_microbatches=a.micro_batches, loss_fn=loss_fn)
    # Round robin on the deep MLP leaves rank 0 only flatten and the ReLUs: no parameters,
    # which torch.optim refuses.
    params = list(part.parameters())
    opt = torch.optim.Adam(params, lr=1e-3,
                           **({"fused": True} if a.adam == "fused" else {})) if params else None
    n = x.shape[0]
    perm = torch.randperm(n)
    g = a.batch * a.micro_batches  # samples per step

    times, pipe_s, compute_s, last, losses = [], [], [], None, []
    for s in range(1 + a.warmup + a.steps):
        t0 = time.monotonic()
        c0 = sum(st.compute_s for st in stages)
        if opt is not None:
            opt.zero_grad()
        start = (s * g) % (n - g)
        idx = perm[start:start + g]
        # Stage 0 takes the step's images, stage 1 its labels (dtrain loads the same way).
        # Under round robin rank 0 holds the first layer and rank 1 the last.
        if rank == 0:
            sched.step(batch_of(x, y, idx)[0])
        else:
            losses = []
            sched.step(target=y[idx], losses=losses)
        pipe_s.append(time.monotonic() - t0)
        compute_s.append(sum(st.compute_s for st in stages) - c0)
        if opt is not None:
            opt.step()
        now = time.monotonic()
        if last is not None:
            times.append(now - last)
        last = now
    window = sorted(times[a.warmup:])
    # Step 1 ends the first interval: the measured steps are the last a.steps.
    pipe = sum(pipe_s[-a.steps:]) / a.steps
    compute = sum(compute_s[-a.steps:]) / a.steps
    mine = {"rank": rank, "pp_rank": rank,
            "stage_first": (rank if a.placement == "round_robin" else
                            0 if rank == 0 else a.split),
            "stage_last": (len(whole) - (len(whole) - 1 - rank) % STAGES
                           if a.placement == "round_robin" else
                           a.split if rank == 0 else len(whole)),
            "step_ms_median": window[len(window) // 2] * 1e3, "step_ms_min": window[0] * 1e3,
            "pp_step_ms_per_step": pipe * 1e3, "pp_compute_ms_per_step": compute * 1e3,
            "param_bytes": sum(p.numel() * p.element_size() for p in part.parameters()),
            "last_loss": (sum(v.item() for v in losses) / len(losses)) if losses else None}
    ranks = [None] * STAGES
    dist.all_gather_object(ranks, mine)
    if rank == 0:
        print(json.dumps({
            "impl": "pytorch " + torch.__version__, "adam": a.adam, "world_size": STAGES,
            "pp": STAGES, "micro_batches": a.micro_batches, "pp_schedule": a.schedule,
            "split": a.split, "placement": a.placement, "threads": a.threads,
            "global_batch": g,
            "steps": len(window), "step_ms_median": mine["step_ms_median"],
            "samples_per_s": g / (mine["step_ms_median"] * 1e-3),
            "last_loss": ranks[-1]["last_loss"], "ranks": ranks,
        }), flush=True)
    end_distributed()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedule", choices=sorted(SCHEDULES), default="1f1b")
    ap.add_argument("--micro-batches", type=int, default=4, help="micro-batches per step")
    ap.add_argument("--batch", type=int, default=32, help="samples per micro-batch")
    ap.add_argument("--depth", type=int, default=16, help="hidden linear layers")
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--split", type=int, required=True,
                    help="index in the layer list (flatten first) where stage 1 begins")
    ap.add_argument("--placement", choices=["split", "round_robin"], default="split",
                    help="two stages cut at --split, or layer l on rank l mod 2")
    ap.add_argument("--threads", type=int, default=1, help="threads per process")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--adam", choices=["default", "fused"], default="fused",
                    help="torch.optim.Adam as it comes, or with fused=True")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    if not 0 < a.split < 2 * a.depth + 2:
        ap.error("--split must cut the %d layers into two non-empty stages" % (2 * a.depth + 2))
    # Forked, not spawned: the children inherit the imported torch (seconds of start-up
    # each); nothing in this process has started a thread pool or a process group yet.
    mp.start_processes(worker, args=(a, free_port()), nprocs=STAGES, join=True,
                       start_method="fork")
    return 0


if __name__ == "__main__":
    sys.exit(main())
