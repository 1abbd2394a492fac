#!/usr/bin/env python3
"""PyTorch's side of bench/compress.py: the seeds' MLP or ConvNet trained with
DistributedDataParallel (gloo) under one of DDP's built-in gradient-compression hooks, for
the same epochs, batch, optimizer and schedule as `mpirun -np N dtrain train CONFIG
--compress MODE`; then rank 0 evaluates on the 10,000 test images and prints one JSON object.

Hooks (--hook; register_comm_hook on the DDP model):
  none         no hook: DDP's default all-reduce of fp32 buckets;
  fp16         default_hooks.fp16_compress_hook (gradients cast to float16, all-reduced, cast
               back);
  bf16         default_hooks.bf16_compress_hook (the same with bfloat16);
  powersgd:R   powerSGD_hook.powerSGD_hook with PowerSGDState(process_group=None,
               matrix_approximation_rank=R, start_powerSGD_iter=2, use_error_feedback=True,
               warm_start=True), min_compression_rate left at its default.
PyTorch has no built-in top-k hook: bench/compress.py does not run this script for topk.

Training, as bench/torch_ddp.py (models from bench/torch_train.py, batches converted as
dtrain converts them): N processes from torch.multiprocessing, one thread each; every rank
takes its own --batch samples of each global batch of N x batch consecutive samples of one
permutation per epoch (the same on every rank, seeded by the epoch); the last, partial global
batch is split evenly over the ranks, as dtrain's parallel.last_batch = uneven; ceil(60000 /
(N x batch)) steps per epoch. Adam at --lr (--adam: torch.optim.Adam as it comes, on CPU its
single-tensor loop, or fused=True, PyTorch's fastest CPU Adam, from 2.4; the optimizer steps
after DDP's hook has returned the averaged gradients, so the hooks are the same under either); --schedule cosine decays it from lr to 0 over
the run's steps exactly as dtrain's schedule (lr x 0.5 (1 + cos(pi k / T)) before optimizer
step k of T), constant keeps it. --max-steps stops early (T is then max-steps, as in dtrain).
Dropout masks come from a per-rank seed.

Reported:
  test_accuracy  rank 0's model (model.module, eval mode) on the 10,000 test images after
                 training;
  train_s        the training loops' time summed over the epochs, evaluation excluded (as
                 dtrain's epoch_s);
  wire bytes     what one rank contributes to the all-reduces of one optimizer step, computed
                 from the hook's definition and the model's parameters (P = all parameter
                 elements), not measured on the socket:
                   none        4 x P              (fp32 buckets)
                   fp16, bf16  2 x P              (the buckets cast to 16 bits)
                   powersgd:R  sum over the parameter tensors, each viewed as
                               (shape[0], prod(shape[1:])) = (n, m) as the hook views it
                               (a 1-D tensor is (n, 1)), r = min(n, m, R):
                                 4 (n + m) r   when the hook compresses it (P and Q, fp32),
                                 4 n m         when it does not (one fp32 all-reduce of the
                                               uncompressed tensors);
                               "compresses it" is the installed torch's own
                               powerSGD_hook._should_compress(n, m, r, min_compression_rate)
                               with the state's min_compression_rate (default 2: compress
                               when (n + m) r x 2 < n m), so 1-D tensors are never
                               compressed. Its first start_powerSGD_iter steps all-reduce
                               the dense fp32 gradient (4 x P): wire_bytes_total counts them.
                 wire_bytes_per_step is the steady state; wire_bytes_total the whole run.
"""
import argparse
import gzip
import json
import math
import os
import socket
import sys
import time

# CPU training only. On a machine with a GPU, powerSGD_hook's decompress step calls
# torch.cuda.synchronize(device) whenever CUDA is available, with the CPU bucket's device,
# and fails ("Expected a cuda device"): hide the GPUs before torch is imported.
os.environ["CUDA_VISIBLE_DEVICES"] = ""

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import batch_of, build, end_distributed, load  # noqa: E402

# PyTorch refuses anything smaller with error feedback or warm start on: DDP rebuilds its
# buckets after the first iteration, which would invalidate the per-bucket error and Q
# memorised before it (PowerSGDState's docstring and ValueError), so the hook must run
# vanilla all-reduce for at least the first 2 steps. 2 keeps the dense warm-up as short
# as PyTorch allows, closest to dtrain's PowerSGD, which compresses from the first step.
START_POWERSGD_ITER = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_test(data_dir):
    """Fashion-MNIST's 10,000 test images as uint8 (N, 1, 28, 28) and int64 labels."""
    with gzip.open(os.path.join(data_dir, "t10k-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(data_dir, "t10k-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    return torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64))


def psgd_rank(hook):
    return int(hook.split(":", 1)[1])


def make_hook(model, hook):
    """Registers the hook on the DDP model; returns the PowerSGD state (or None)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    if hook == "none":
        return None
    if hook in ("fp16", "bf16"):
        name = hook + "_compress_hook"
        fn = getattr(default_hooks, name, None)
        if fn is None:
            raise RuntimeError("torch %s has no default_hooks.%s" % (torch.__version__, name))
        model.register_comm_hook(state=None, hook=fn)
        return None
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
    state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=psgd_rank(hook),
                               start_powerSGD_iter=START_POWERSGD_ITER,
                               use_error_feedback=True, warm_start=True)
    model.register_comm_hook(state, psgd.powerSGD_hook)
    return state


def wire_bytes(params, hook, state, steps):
    """(bytes per step, bytes over `steps` steps, dense bytes per step, formula, details) for
    one rank; `params` is [(name, shape)] (the module docstring gives the formulas)."""
    total = sum(math.prod(s) for _, s in params)
    dense = 4 * total
    if hook == "none":
        return dense, dense * steps, dense, "4 x parameters (fp32 all-reduce)", {}
    if hook in ("fp16", "bf16"):
        return 2 * total, 2 * total * steps, dense, "2 x parameters (%s all-reduce)" % hook, {}
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
    rate = state.min_compression_rate
    rank = state.matrix_approximation_rank

    def should(n, m, r):
        if hasattr(psgd, "_should_compress"):
            return psgd._should_compress(n, m, r, rate)[0]
        return (n + m) * r * rate < n * m  # the rule of torch's own function, where it has none

    per, compressed = 0, []
    for name, shape in params:
        n = shape[0]
        m = math.prod(shape[1:]) if len(shape) > 1 else 1
        r = min(n, m, rank)
        if should(n, m, r):
            per += 4 * (n + m) * r
            compressed.append("%s (%d,%d) r=%d" % (name, n, m, r))
        else:
            per += 4 * n * m
    warm = min(steps, state.start_powerSGD_iter)
    formula = ("sum over tensors viewed (n, m): 4 (n+m) r if _should_compress(n, m, r, %g) "
               "else 4 n m; the first %d steps 4 x parameters" % (rate, state.start_powerSGD_iter))
    return per, warm * dense + (steps - warm) * per, dense, formula, {
        "powersgd_compressed": compressed, "min_compression_rate": rate,
        "start_powerSGD_iter": state.start_powerSGD_iter,
        "should_compress_from": "torch" if hasattr(psgd, "_should_compress") else "copied rule"}


def lr_factor(schedule, total):
    if schedule == "constant":
        return lambda k: 1.0
    return lambda k: 0.5 * (1.0 + math.cos(math.pi * min(k, total) / total))


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], 1000):
            xb, yb = batch_of(x, y, torch.arange(i, min(i + 1000, x.shape[0])))
            correct += (model(xb).argmax(dim=1) == yb).sum().item()
    model.train()
    return correct / x.shape[0]


def worker(rank, a, port):
    torch.set_num_threads(a.threads)
    world = a.world_size
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=world)
    torch.manual_seed(a.seed)
    x, y = load(a.data)
    module, loss_fn = build(a.model)
    params = [(n, tuple(p.shape)) for n, p in module.named_parameters() if p.requires_grad]
    ddp_options = {}
    if a.hook.startswith("powersgd"):
        # One bucket for PowerSGD: its hook issues each bucket's P and Q all-reduces from the
        # callbacks of the bucket's earlier futures, which over gloo run on gloo's threads,
        # so with two buckets in flight the ranks can enqueue their collectives in different
        # orders, and gloo pairs collectives by order. Every ConvNet run (two buckets: DDP's
        # first one is 1 MiB) ended in "op.preamble.length <= op.nbytes" (a size mismatch)
        # or a SIGABRT at exit; the MLP (one bucket) never did. The computation is the same
        # (PowerSGD compresses each matrix on its own); only the overlap of the buckets goes.
        whole_mb = 4 * sum(math.prod(s) for _, s in params) / 2**20 + 1
        dist._DEFAULT_FIRST_BUCKET_BYTES = int(whole_mb * 2**20)  # 1.13 reads it
        ddp_options["bucket_cap_mb"] = whole_mb  # 2.15: the first bucket takes it too
    model = torch.nn.parallel.DistributedDataParallel(module, **ddp_options)
    state = make_hook(model, a.hook)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr,
                           **({"fused": True} if a.adam == "fused" else {}))
    n = x.shape[0]
    g = world * a.batch
    per_epoch = (n + g - 1) // g
    total = a.max_steps if a.max_steps > 0 else a.epochs * per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(a.schedule, max(total, 1)))
    torch.manual_seed(a.seed * 1000 + 1 + rank)  # dropout masks: each rank its own
    step, train_s = 0, 0.0
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
            step += 1
        train_s += time.monotonic() - t0
        if step >= total:
            break
    if rank == 0:
        tx, ty = load_test(a.data)
        acc = evaluate(module, tx, ty)
        per, whole, dense, formula, details = wire_bytes(params, a.hook, state, step)
        print(json.dumps(dict({
            "impl": "pytorch " + torch.__version__, "model": a.model, "world_size": world,
            "hook": a.hook, "batch_per_rank": a.batch, "threads": a.threads,
            "epochs": a.epochs, "steps": step, "lr": a.lr, "schedule": a.schedule,
            "adam": a.adam, "seed": a.seed,
            "test_accuracy": acc, "train_s": train_s,
            "parameters": sum(math.prod(s) for _, s in params),
            "wire_bytes_per_step": per, "wire_bytes_total": whole,
            "dense_bytes_per_step": dense, "wire_formula": formula,
        }, **details)), flush=True)
    end_distributed()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["mlp", "convnet"], required=True)
    ap.add_argument("--hook", default="none",
                    help="none, fp16, bf16 or powersgd:R (R the matrix approximation rank)")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--threads", type=int, default=1, help="threads per rank")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: none)")
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--schedule", choices=["cosine", "constant"], default="cosine")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--adam", choices=["default", "fused"], default="default",
                    help="torch.optim.Adam as it comes, or with fused=True")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--quick", action="store_true",
                    help="--max-steps 5 unless set: checks the script, measures nothing")
    a = ap.parse_args()
    if a.quick and a.max_steps == 0:
        a.max_steps = 5
    if a.hook not in ("none", "fp16", "bf16"):
        try:
            ok = a.hook.startswith("powersgd:") and psgd_rank(a.hook) >= 1
        except ValueError:
            ok = False
        if not ok:
            ap.error("--hook: none, fp16, bf16 or powersgd:R, not %r (PyTorch has no "
                     "built-in top-k hook)" % a.hook)
    if a.world_size < 2:
        ap.error("--world-size: 2 or more (DDP with a compression hook)")
    mp.spawn(worker, args=(a, free_port()), nprocs=a.world_size, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
