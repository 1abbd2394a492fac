#!/usr/bin/env python3
"""The GPT across layouts in PyTorch: the peer bench/gpt_layouts.py measures dtrain against
(issue 38 "Measured", docs/BENCHMARKS.md "The GPT across layouts").

The model is bench/torch_gpt.py's GPT-2 (the same computation as dtrain's: pre-LN blocks,
GELU's tanh form, scaled_dot_product_attention, the head tied to the token embedding), read
from the same dtrain config, started from dtrain's initial weights (--init: `bench_train
CONFIG --save-init FILE`) and trained on dtrain's windows (--windows: `dtrain train
--windows-out FILE`, a line of the global batch's offsets per step), with the config's AdamW
(fused=True; foreach=True in 1.13, which has no fused AdamW; decay on the tensors of two or
more dimensions, betas, eps) after clipping the global gradient norm at optim.clip_norm, at
a constant optim.lr, dropout as the config has it (the driver gives 0). Debian's 1.13 runs
single, recompute and dp (it has neither DTensor nor pipelining). --layout picks how the
steps run:

  single      one process (--threads N), torch_gpt.py's loop;
  recompute   one process, each block under torch.utils.checkpoint (use_reentrant=False):
              only its input kept, its inside re-run in backward;
  dp          --world processes (2 unless given), DistributedDataParallel (gloo;
              gradient_as_bucket_view and static_graph), each rank the part of the global
              batch dtrain's rank takes;
  fsdp        as dp, the model under FSDP2 (torch.distributed.fsdp.fully_shard, on a CPU
              DeviceMesh over gloo) at its defaults: each block a unit of its own, the root
              (the embeddings, the final LayerNorm and the tied head) another, every
              parameter, gradient and AdamW state sharded over the ranks (dtrain's --zero 3;
              torch 2.6 or later);
  tp, tp_sp   --world processes, torch.distributed.tensor.parallel on a DeviceMesh of all (gloo;
              the head count a multiple of the world: whole heads per rank):
              per block q, k and v ColwiseParallel (c_attn's three column groups as three
              nn.Linear, so that a rank holds whole heads, as dtrain splits by heads), the
              attention's c_proj RowwiseParallel, c_fc ColwiseParallel, the MLP's c_proj
              RowwiseParallel; the embeddings, the final LayerNorm and the tied head
              replicated (as dtrain). tp_sp adds SequenceParallel on ln_1 and ln_2 and
              PrepareModuleInput(Shard(1) -> Replicate) before the attention and the MLP,
              the row-parallel outputs Shard(1) (reduce-scatter), the residual stream
              between the blocks each rank's half of the positions (taken from the whole
              embeddings' output, gathered whole again before ln_f), as torchtitan lays out
              a Llama block;
  pp_gpipe,   --world processes (2 unless given), torch.distributed.pipelining: stage 0 the
  pp_1f1b     embeddings and its --splits blocks, each later stage its number of blocks, the
              last the rest, ln_f and the head (the cuts dtrain's balanced split makes;
              --split-block K is --splits K on 2 stages), ScheduleGPipe or Schedule1F1B over
              --micro-batches. Its pipelining does not tie weights across stages: the last
              stage holds a copy of the token embedding for the head, and this peer keeps the
              two copies tied BY HAND as dtrain does (Megatron's embedding group): after each
              step's backward the first and last stages all-reduce (sum) the embedding's
              gradient and the copy's, so both copies take the same update; the clipping norm
              counts the tensor once.

Timed as bench/bench_tp.c times dtrain: the interval between the ends of consecutive steps
(drawing the step's windows included), median over --steps after --warmup of them, rank 0's.
Rank r is pinned to --cpus' r-th set (os.sched_setaffinity): the CPUs mpirun binds dtrain's
rank r to, which the driver asks mpirun for (benchlib.mpirun_bindings). Per
rank: parameter and optimizer-state bytes held (a DTensor's local shard), peak RSS
(getrusage), and under a pipeline the stage's compute (forward_one_chunk, backward_one_chunk
and the loss: bench/torch_pp.py's TimedStage) against its pipeline step. Every step's loss
over the whole global batch is printed, for the like-for-like check against dtrain's.

Usage: torch_gpt_layouts.py --config INI --layout L --batch GLOBAL --init FILE --windows FILE
                            [--world N] [--cpus C] [--micro-batches M] [--splits K,..]
                            [--threads N] [--steps N --warmup N]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpt as tg  # noqa: E402  (first: it takes the launch time)
from torch_tp import free_port, local  # noqa: E402  (a port for gloo; a DTensor's shard)
from torch_ddp import parse_cpus  # noqa: E402  (--cpus, as torch_ddp.py takes it)
from torch_train import end_distributed  # noqa: E402

import argparse  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

LAYOUTS = ("single", "recompute", "dp", "fsdp", "tp", "tp_sp", "pp_gpipe", "pp_1f1b")
MANY = ("dp", "fsdp", "tp", "tp_sp", "pp_gpipe", "pp_1f1b")  # the layouts of --world processes
HALVES = ("dp", "fsdp")  # each rank the part of the global batch dtrain's rank takes


def tensor_bytes(tensors):
    return sum(local(t).numel() * local(t).element_size() for t in tensors)


def optim_state_bytes(opt):
    return sum(tensor_bytes([v for v in st.values() if torch.is_tensor(v)])
               for st in opt.state.values())


def adamw_kind():
    """fused where this torch's AdamW has it (2.x), else foreach (1.13: its fastest on CPU)."""
    return "fused" if "fused" in inspect.signature(torch.optim.AdamW).parameters else "foreach"


def adamw(params, spec):
    """The config's AdamW (adamw_kind), decay on the tensors of two or more dimensions; the
    fused kernel takes one kind of tensor per list, so DTensors and plain tensors go in
    groups of their own (same settings)."""
    groups = []
    for decay in (True, False):
        for dt in (True, False):
            ps = [p for p in params if (p.dim() >= 2) == decay and hasattr(p, "to_local") == dt]
            if ps:
                groups.append({"params": ps, "weight_decay": spec.wd if decay else 0.0})
    return torch.optim.AdamW(groups, lr=spec.lr, betas=(spec.beta1, spec.beta2), eps=spec.eps,
                             **{adamw_kind(): True})


def clip_(grads, max_norm, group=None, once=(), also=()):
    """clip_grad_norm_'s rule (coefficient max_norm / (norm + 1e-6), at most 1) over the
    global norm of a model split across ranks: each rank's sum of squares of the gradients it
    alone holds (a DTensor shard, a pipeline stage's), all-reduced over `group` when given,
    plus the replicated ones counted once (`once`: gradients every rank holds whole, summed
    here without the all-reduce); `also` is scaled with them but not counted (a tied copy
    whose original another rank counts). Returns the norm."""
    own = [local(g) for g in grads]
    sq = sum(torch.sum(g.float() * g.float()) for g in own) if own else torch.zeros(())
    sq = torch.as_tensor(sq, dtype=torch.float64).reshape(1).clone()
    if group is not None:
        dist.all_reduce(sq, group=group)
    for g in once:
        g = local(g)
        sq += torch.sum(g.float() * g.float()).double()
    norm = float(sq.sqrt())
    coef = max_norm / (norm + 1e-6)
    if coef < 1.0:
        for g in own + [local(g) for g in once] + [local(g) for g in also]:
            g.mul_(coef)
    return norm


# ---- tensor parallelism -----------------------------------------------------------------

class TPAttention(nn.Module):
    """c_attn as three nn.Linear (q, k, v: ColwiseParallel shards each by output rows, so a
    rank holds whole heads) and c_proj; `heads` the heads this rank computes."""

    def __init__(self, s, heads):
        super().__init__()
        e = s.embd
        self.q, self.k, self.v = nn.Linear(e, e), nn.Linear(e, e), nn.Linear(e, e)
        self.c_proj = nn.Linear(e, e)
        self.heads, self.d = heads, e // s.heads

    def forward(self, x):
        b, t = x.shape[0], x.shape[1]
        q, k, v = (m(x).view(b, t, self.heads, self.d).transpose(1, 2)
                   for m in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, self.heads * self.d))


class TPMLP(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(s.embd, 4 * s.embd), nn.Linear(4 * s.embd, s.embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class TPBlock(nn.Module):
    def __init__(self, s, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(s.embd, eps=tg.EPS_LN)
        self.attn = TPAttention(s, heads)
        self.ln_2 = nn.LayerNorm(s.embd, eps=tg.EPS_LN)
        self.mlp = TPMLP(s)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TPGPT(nn.Module):
    """GPT-2 with tensor-parallel blocks; the embeddings, ln_f and the tied head whole."""

    def __init__(self, s, tp, mesh, sp):
        super().__init__()
        self.wte = nn.Embedding(s.vocab, s.embd)
        self.wpe = nn.Embedding(s.block, s.embd)
        self.h = nn.ModuleList([TPBlock(s, s.heads // tp) for _ in range(s.layers)])
        self.ln_f = nn.LayerNorm(s.embd, eps=tg.EPS_LN)
        self.mesh, self.sp = mesh, sp

    def forward(self, idx, targets):
        from torch.distributed.tensor import DTensor, Replicate, Shard
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        if self.sp:  # each rank's half of the positions (backward: the gradient gathered)
            x = DTensor.from_local(x, self.mesh, [Replicate()], run_check=False).redistribute(
                self.mesh, [Shard(1)]).to_local()
        for b in self.h:
            x = b(x)
        if self.sp:  # the positions gathered whole for ln_f and the head
            x = DTensor.from_local(x, self.mesh, [Shard(1)], run_check=False).redistribute(
                self.mesh, [Replicate()]).to_local()
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def tp_model(s, init, tp, mesh, sp):
    """TPGPT from dtrain's weights (Conv1D (in, out) transposed into nn.Linear's (out, in);
    c_attn's columns q | k | v), then parallelized."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                   RowwiseParallel, SequenceParallel,
                                                   parallelize_module)
    if s.heads % tp:
        raise SystemExit("torch_gpt_layouts.py: %d heads do not split over %d ranks evenly "
                         "(DTensor shards whole tensors evenly)" % (s.heads, tp))
    m = TPGPT(s, tp, mesh, sp)
    e = s.embd
    with torch.no_grad():
        m.wte.weight.copy_(init["transformer.wte.weight"])
        m.wpe.weight.copy_(init["transformer.wpe.weight"])
        m.ln_f.weight.copy_(init["transformer.ln_f.weight"])
        m.ln_f.bias.copy_(init["transformer.ln_f.bias"])
        for i, b in enumerate(m.h):
            w = lambda n: init["transformer.h.%d.%s" % (i, n)]  # noqa: E731
            for ln in ("ln_1", "ln_2"):
                getattr(b, ln).weight.copy_(w(ln + ".weight"))
                getattr(b, ln).bias.copy_(w(ln + ".bias"))
            for j, lin in enumerate((b.attn.q, b.attn.k, b.attn.v)):
                lin.weight.copy_(w("attn.c_attn.weight")[:, j * e:(j + 1) * e].t())
                lin.bias.copy_(w("attn.c_attn.bias")[j * e:(j + 1) * e])
            for lin, n in ((b.attn.c_proj, "attn.c_proj"), (b.mlp.c_fc, "mlp.c_fc"),
                           (b.mlp.c_proj, "mlp.c_proj")):
                lin.weight.copy_(w(n + ".weight").t())
                lin.bias.copy_(w(n + ".bias"))
    for b in m.h:
        if sp:
            plan = {"ln_1": SequenceParallel(), "ln_2": SequenceParallel(),
                    "attn": PrepareModuleInput(input_layouts=(Shard(1),),
                                               desired_input_layouts=(Replicate(),)),
                    "mlp": PrepareModuleInput(input_layouts=(Shard(1),),
                                              desired_input_layouts=(Replicate(),)),
                    "attn.c_proj": RowwiseParallel(output_layouts=Shard(1)),
                    "mlp.c_proj": RowwiseParallel(output_layouts=Shard(1))}
        else:
            plan = {"attn.c_proj": RowwiseParallel(), "mlp.c_proj": RowwiseParallel()}
        plan.update({"attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(),
                     "attn.v": ColwiseParallel(), "mlp.c_fc": ColwiseParallel()})
        parallelize_module(b, mesh, plan)
    return m


def grads_by_kind(params):
    """(gradients split over the ranks, gradients every rank holds whole) for clip_: a
    DTensor with a Shard placement is split; a Replicate DTensor or a plain tensor whole. A
    Partial gradient (a replicated parameter used on each rank's positions) is summed first:
    redistributed to Replicate, the same all-reduce DTensor makes for the optimizer."""
    from torch.distributed.tensor import Replicate
    split, whole = [], []
    for p in params:
        g = p.grad
        if g is None:
            continue
        if hasattr(g, "placements"):
            if any(pl.is_partial() for pl in g.placements):
                g = g.redistribute(placements=[Replicate()] * len(g.placements))
                p.grad = g
            (split if any(pl.is_shard() for pl in g.placements) else whole).append(g)
        else:
            whole.append(g)
    return split, whole


# ---- pipelines ----------------------------------------------------------------------------

class Stage(nn.Module):
    """Blocks lo..hi-1 of a GPT (torch_gpt's modules); the first stage also the embeddings,
    the last ln_f and the head, whose table is a copy of the embedding's."""

    def __init__(self, gpt, lo, hi, first, last):
        super().__init__()
        t = gpt.transformer
        self.first, self.last = first, last
        if first:
            self.wte, self.wpe, self.drop = t.wte, t.wpe, t.drop
        self.h = nn.ModuleList(t.h[lo:hi])
        if last:
            self.ln_f = t.ln_f
            self.head = nn.Parameter(t.wte.weight.detach().clone())

    def forward(self, x):
        if self.first:
            x = self.drop(self.wte(x) + self.wpe(torch.arange(x.shape[1])))
        for b in self.h:
            x = b(x)
        return F.linear(self.ln_f(x), self.head) if self.last else x


# ---- the run ------------------------------------------------------------------------------

def world_of(a):
    return a.world if a.layout in MANY else 1


def worker(rank, a, port):
    world = world_of(a)
    if world > 1:
        if a.cpus:  # the CPUs mpirun binds dtrain's rank r to
            os.sched_setaffinity(0, a.cpus[rank])
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                                world_size=world)
    torch.set_num_threads(a.threads)
    spec = tg.Spec(a.config)
    torch.manual_seed(spec.seed)
    train, _ = tg.load_text(spec)
    offsets = tg.read_windows(a.windows, a.batch)
    total = 1 + a.warmup + a.steps
    if len(offsets) < total:
        raise SystemExit("torch_gpt_layouts.py: %s holds %d steps, %d needed" %
                         (a.windows, len(offsets), total))
    init = tg.read_safetensors(a.init)
    stages, compute, pipe = [], [], []

    def windows(s):
        return tg.windows_at(train, offsets[s], spec.block)

    if a.layout in ("single", "recompute") + HALVES:
        model = tg.GPT(spec)
        tg.load_init(model, a.init)
        if a.layout == "recompute":
            from torch.utils.checkpoint import checkpoint

            def logits(idx, t=model.transformer):
                x = t.drop(t.wte(idx) + t.wpe(torch.arange(idx.shape[1])))
                for b in t.h:
                    x = checkpoint(b, x, use_reentrant=False)
                return F.linear(t.ln_f(x), t.wte.weight)
            model.logits = logits
        params = list(model.parameters())
        run = model
        if a.layout == "dp":
            from torch.nn.parallel import DistributedDataParallel as DDP
            # The causal masks (1.13's attention) are constants, and bool, which 1.13's gloo
            # cannot broadcast: left out of DDP's start-up sync.
            DDP._set_params_and_buffers_to_ignore_for_model(
                model, [n for n, b in model.named_buffers() if b.dtype == torch.bool])
            run = DDP(model, gradient_as_bucket_view=True, static_graph=True)
        if a.layout == "fsdp":
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard
            mesh = init_device_mesh("cpu", (world,))
            for b in model.transformer.h:
                fully_shard(b, mesh=mesh)
            fully_shard(model, mesh=mesh)
            params = list(model.parameters())  # now DTensors, each rank's shard
        opt = adamw(params, spec)
        half = a.batch // world

        def step(s):
            x, y = windows(s)
            if world > 1:  # dtrain's rank r takes the r-th part of the global batch
                x, y = x[rank * half:(rank + 1) * half], y[rank * half:(rank + 1) * half]
            opt.zero_grad(set_to_none=True)
            loss = run(x, y)
            loss.backward()
            if spec.clip > 0:
                torch.nn.utils.clip_grad_norm_(params, spec.clip)
            opt.step()
            return loss.item()
    elif a.layout in ("tp", "tp_sp"):
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
        model = tp_model(spec, init, world, mesh, a.layout == "tp_sp")
        params = list(model.parameters())
        opt = adamw(params, spec)

        def step(s):
            x, y = windows(s)
            opt.zero_grad(set_to_none=True)
            loss = model(x, y)
            loss.backward()
            # A replicated parameter used on each rank's positions (the LayerNorms under
            # sequence parallelism) has a Partial gradient: summed here, clipping or not.
            split, whole = grads_by_kind(params)
            if spec.clip > 0:
                clip_(split, spec.clip, group=None if not split else mesh.get_group(),
                      once=whole)
            opt.step()
            return loss.item()
    else:
        from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe
        from torch_pp import TimedStage
        gpt = tg.GPT(spec)
        tg.load_init(gpt, a.init)
        cuts = [0]
        for k in a.splits:
            cuts.append(cuts[-1] + k)
        if len(a.splits) != world - 1 or any(k < 1 for k in a.splits) or \
                cuts[-1] >= spec.layers:
            raise SystemExit("torch_gpt_layouts.py: --splits %s: %d counts of 1 or more blocks, "
                             "under %d together" % (",".join(map(str, a.splits)), world - 1,
                                                    spec.layers))
        cuts.append(spec.layers)
        part = Stage(gpt, cuts[rank], cuts[rank + 1], rank == 0, rank == world - 1)
        # The embedding group: the two stages holding the table (every rank creates it).
        tie = dist.new_group([0, world - 1]) if world > 2 else dist.group.WORLD
        stage = TimedStage(part, rank, world, torch.device("cpu"))
        stages.append(stage)

        def loss_fn(out, target):
            t0 = time.monotonic()
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
            stage.compute_s += time.monotonic() - t0
            return loss
        kind = ScheduleGPipe if a.layout == "pp_gpipe" else Schedule1F1B
        sched = kind(stage, n_microbatches=a.micro_batches, loss_fn=loss_fn)
        params = list(part.parameters())
        tied = part.wte.weight if rank == 0 else part.head if rank == world - 1 else None
        opt = adamw(params, spec)
        pp_losses = []

        def step(s):
            t0, c0 = time.monotonic(), stage.compute_s
            # Contiguous copies of the windows (views of stride block + 1): PyTorch 2.11's
            # pipelining refuses an input whose strides differ from its shape inference's.
            x, y = (w.contiguous() for w in windows(s))
            opt.zero_grad(set_to_none=True)
            if rank == 0:
                sched.step(x)
            elif rank == world - 1:
                losses = []
                sched.step(target=y, losses=losses)
                pp_losses.append(sum(v.item() for v in losses) / len(losses))
            else:
                sched.step()
            # The tie, by hand: both copies' gradients summed, so both take one update.
            if tied is not None:
                dist.all_reduce(tied.grad, group=tie)
            if spec.clip > 0:
                # The tied tensor counted once (stage 0's), its copy scaled alike.
                mine = [p.grad for p in params if p.grad is not None
                        and (rank == 0 or p is not tied)]
                clip_(mine, spec.clip, group=dist.group.WORLD,
                      also=[tied.grad] if rank == world - 1 else [])
            opt.step()
            pipe.append(time.monotonic() - t0)
            compute.append(stage.compute_s - c0)
            return pp_losses[-1] if pp_losses else None

    times, losses, last = [], [], None
    for s in range(total):
        losses.append(step(s))
        now = time.monotonic()
        if last is not None:
            times.append(now - last)
        last = now
    window = sorted(times[a.warmup:])
    mine = {"rank": rank, "step_ms_median": window[len(window) // 2] * 1e3,
            "step_ms_min": window[0] * 1e3, "param_bytes": tensor_bytes(params),
            "optim_state_bytes": optim_state_bytes(opt), "peak_rss_mb": tg.peak_rss_mb(),
            "losses": losses}
    if stages:
        mine["pp_step_ms_per_step"] = sum(pipe[-a.steps:]) / a.steps * 1e3
        mine["pp_compute_ms_per_step"] = sum(compute[-a.steps:]) / a.steps * 1e3
    ranks = [mine]
    if world > 1:
        ranks = [None] * world
        dist.all_gather_object(ranks, mine)
    if rank == 0:
        # The global batch's loss per step: dp's ranks hold halves (equal: their mean);
        # tp's every rank the whole; a pipeline's last stage its micro-batches' mean.
        if a.layout in HALVES:
            losses = [sum(r["losses"][s] for r in ranks) / world for s in range(total)]
        elif a.layout.startswith("pp"):
            losses = ranks[-1]["losses"]
        for r in ranks:
            del r["losses"]
        med = mine["step_ms_median"] * 1e-3
        print(json.dumps({
            "impl": "pytorch " + torch.__version__, "layout": a.layout, "world_size": world,
            "threads": a.threads, "global_batch": a.batch, "block_size": spec.block,
            "micro_batches": a.micro_batches if a.layout.startswith("pp") else 1,
            "splits": a.splits if a.layout.startswith("pp") else None,
            "optimizer": "AdamW " + adamw_kind(), "steps": len(window), "step_ms_median": med * 1e3,
            "step_ms_min": mine["step_ms_min"], "tokens_per_s": a.batch * spec.block / med,
            "losses": losses, "first_loss": losses[0],
            "tie": ("the head's copy of wte and wte itself: gradients all-reduced (summed) "
                    "between the stages every step" if a.layout.startswith("pp")
                    else "one tensor"),
            "ranks": ranks,
        }), flush=True)
    if world > 1:
        end_distributed()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="a dtrain text config of a GPT")
    ap.add_argument("--layout", choices=LAYOUTS, required=True)
    ap.add_argument("--batch", type=int, required=True, help="global batch (windows per step)")
    ap.add_argument("--micro-batches", type=int, default=4, help="pipelines: per step")
    ap.add_argument("--world", type=int, default=2,
                    help="processes of the dp, tp and pipeline layouts (2)")
    ap.add_argument("--cpus", default="",
                    help="each rank's CPUs, ';' between ranks ('0;1'): mpirun's binding of "
                         "dtrain's ranks; empty: unpinned")
    ap.add_argument("--splits", default="",
                    help="pipelines: blocks on each stage but the last, comma-separated "
                         "(dtrain's balanced cut)")
    ap.add_argument("--split-block", type=int, default=0,
                    help="pipelines of 2 stages: blocks on stage 0 (--splits K)")
    ap.add_argument("--threads", type=int, default=1, help="threads per process")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--init", required=True, help="dtrain's initial weights (safetensors)")
    ap.add_argument("--windows", required=True, help="dtrain train --windows-out's file")
    a = ap.parse_args()
    a.splits = [int(k) for k in a.splits.split(",") if k] or [a.split_block]
    world = world_of(a)
    a.cpus = parse_cpus(a.cpus, world) if a.cpus else []
    if (a.layout in HALVES and a.batch % world) or \
            (a.layout.startswith("pp") and a.batch % a.micro_batches):
        ap.error("--batch %d does not divide over %d ranks / %d micro-batches" %
                 (a.batch, world, a.micro_batches))
    if world == 1:
        worker(0, a, 0)
    else:
        # Forked, not spawned: the children inherit the imported torch (seconds each);
        # nothing here has started a thread pool or a process group yet.
        mp.start_processes(worker, args=(a, free_port()), nprocs=world, join=True,
                           start_method="fork")
    return 0


if __name__ == "__main__":
    sys.exit(main())
