#!/usr/bin/env python3
"""PyTorch's side of bench/localsgd.py: the seeds' MLP or ConvNet trained on N processes
(gloo) either with DistributedDataParallel (--period 0, the peer of dtrain's ddp) or with
PyTorch's post-local SGD (--period H, the peer of `dtrain train --strategy localsgd
--sync-every H`), for the same epochs, batch, optimizer and schedule; then rank 0 evaluates
on the 10,000 test images and prints one JSON object.

Post-local SGD, as PyTorch documents it (torch.distributed.algorithms.model_averaging):
the model wrapped in DDP with post_localSGD_hook and PostLocalSGDState(process_group=None,
subgroup=None, start_localSGD_iter=W, post_local_gradient_allreduce=False): the first W
iterations all-reduce the gradients (DDP's mean), the later ones keep each rank's own (its
batch's mean gradient); and after every optimizer step
PeriodicModelAverager(period=H, warmup_steps=W).average_parameters(model.parameters()),
which all-reduces the parameters and divides by the world size when its step counter s
(0 at the first call) has s >= W and (s - W) mod H = 0: after the (W + 1)-th step and every
H steps from there, where dtrain averages after the (W + H)-th and every H from there. After
the last step the parameters are averaged once more (utils.average_parameters), as dtrain
does after its last step, so that rank 0 evaluates the replicas' mean. The optimizer
state stays each rank's own in both.

Training, as bench/torch_compress.py (whose data split, schedule and evaluation this
imports): every rank takes its own --batch samples of each global batch of N x batch
consecutive samples of one permutation per epoch (the same on every rank); Adam at --lr;
--schedule cosine as dtrain's; --max-steps stops early; dropout masks from a per-rank seed.

Reported: test_accuracy (rank 0, after the last average); train_s (the training loops,
evaluation excluded, as dtrain's epoch_s); samples and samples_per_s (global samples trained
over train_s); steps; averages (the averager's averages, the last one included);
wire_bytes_per_step and wire_bytes_total (what one rank contributes, from the definitions,
not the socket: per step 4 x parameters for DDP and 4 x parameters / H, rounded down, for
local SGD, as dtrain reports it; in all, DDP's steps or local SGD's warm-up steps and
averages, the last included, at 4 x parameters each).
"""
import argparse
import json
import math
import os
import sys
import time

os.environ["CUDA_VISIBLE_DEVICES"] = ""  # CPU training only, as torch_compress.py

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_compress import evaluate, free_port, load_test, lr_factor  # noqa: E402
from torch_train import batch_of, build, end_distributed, load  # noqa: E402


def worker(rank, a, port):
    from torch.distributed.algorithms.model_averaging import averagers
    from torch.distributed.algorithms.model_averaging import utils as avg_utils
    from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as plsgd
    torch.set_num_threads(a.threads)
    world = a.world_size
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=world)
    torch.manual_seed(a.seed)
    x, y = load(a.data)
    module, loss_fn = build(a.model)
    params = sum(p.numel() for p in module.parameters() if p.requires_grad)
    model = torch.nn.parallel.DistributedDataParallel(module)
    averager = None
    if a.period > 0:
        state = plsgd.PostLocalSGDState(process_group=None, subgroup=None,
                                        start_localSGD_iter=a.warmup,
                                        post_local_gradient_allreduce=False)
        model.register_comm_hook(state, plsgd.post_localSGD_hook)
        averager = averagers.PeriodicModelAverager(period=a.period, warmup_steps=a.warmup)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    n = x.shape[0]
    g = world * a.batch
    per_epoch = (n + g - 1) // g
    total = a.max_steps if a.max_steps > 0 else a.epochs * per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(a.schedule, max(total, 1)))
    torch.manual_seed(a.seed * 1000 + 1 + rank)  # dropout masks: each rank its own
    step, averages, samples, train_s = 0, 0, 0, 0.0
    for epoch in range(a.epochs):
        gen = torch.Generator()
        gen.manual_seed(a.seed * 1000003 + epoch)  # the same permutation on every rank
        perm = torch.randperm(n, generator=gen)
        t0 = time.monotonic()
        for s in range(per_epoch):
            if step >= total:
                break
            first = s * g
            gb = min(g, n - first)
            lo, hi = first + rank * gb // world, first + (rank + 1) * gb // world
            xb, yb = batch_of(x, y, perm[lo:hi])
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            if averager is not None:
                s_avg = averager.step
                averager.average_parameters(model.parameters())
                averages += s_avg >= a.warmup and (s_avg - a.warmup) % a.period == 0
            step += 1
            samples += gb
        train_s += time.monotonic() - t0
        if step >= total:
            break
    if averager is not None:  # the replicas' mean, as dtrain's after its last step
        avg_utils.average_parameters(iter(module.parameters()), dist.group.WORLD)
        averages += 1
    if rank == 0:
        tx, ty = load_test(a.data)
        acc = evaluate(module, tx, ty)
        dense = 4 * params
        if averager is None:
            per, whole = dense, dense * step
        else:
            per, whole = dense // a.period, (min(a.warmup, step) + averages) * dense
        print(json.dumps({
            "impl": "pytorch " + torch.__version__, "model": a.model, "world_size": world,
            "period": a.period, "warmup": a.warmup, "batch_per_rank": a.batch,
            "threads": a.threads, "epochs": a.epochs, "steps": step, "averages": averages,
            "lr": a.lr, "schedule": a.schedule, "test_accuracy": acc, "train_s": train_s,
            "samples": samples, "samples_per_s": samples / train_s if train_s > 0 else None,
            "parameters": params, "wire_bytes_per_step": per, "wire_bytes_total": whole,
        }), flush=True)
    end_distributed()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["mlp", "convnet"], required=True)
    ap.add_argument("--period", type=int, default=0,
                    help="H: average the parameters every H steps (0: plain DDP)")
    ap.add_argument("--warmup", type=int, default=0,
                    help="local SGD: DDP's gradient all-reduce for the first W steps")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--threads", type=int, default=1, help="threads per rank")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: none)")
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--schedule", choices=["cosine", "constant"], default="cosine")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    if a.world_size < 2:
        ap.error("--world-size: 2 or more")
    if a.period < 0 or a.warmup < 0 or (a.warmup > 0 and a.period == 0):
        ap.error("--period: 0 (DDP) or H >= 1; --warmup W >= 0 with a period only")
    mp.spawn(worker, args=(a, free_port()), nprocs=a.world_size, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
