#!/usr/bin/env python3
"""mutants.py — plants one-line bugs, one at a time, and checks that the tests catch each.

    scripts/mutants.py [--build DIR] [--only ID,ID] [--list]

Each mutant below is a plausible slip in a line that carries a capability (a sum over the
right group, a boundary, a count a report prints). For each: the line is changed in the
source (the old text must occur exactly once, or the mutant is stale and reported as such),
the build directory is rebuilt, the tests the mutant names run (`ctest -R`, stopping at the
first failure), and the file is put back. A mutant whose tests all pass SURVIVED: a bug of
that kind would reach users. At the end the tree is rebuilt as it was. Exit status 0 when
every mutant was caught, 1 when one survived or is stale, 2 on a usage error.

The list began as the mutation passes of issue 40 and of 2026-11-27 over the GPT's layouts
(issue 38), and a second pass that day over the rest (the collectives, optimizers, the
trainer's sample order and schedule, checkpoints, sampling, compression, the config's
no-effect rules, evaluation, the watchdog, ddp's buckets, launch's hostfile, TensorBoard's
records): every mutant there that a test missed got the test that catches it, and sits
here so that it stays caught. Mutants named `long` are caught only by `make test-long`'s
cases. Known survivors, left out on purpose: the pipeline planner's tie-breaks and the
send-reuse wait of a depth that never binds (src/parallel/pipe_plan.c: they change the
order's idle time, not what is computed, and every order is still checked free of
deadlock), and --explain-layout's count of a run of blocks that gathers its output (a model
of blocks alone on a float input, which no data kind of the command line feeds).

The full run of 96 took 1392 s on 2 cores, all caught (2026-11-27; the last 18 of those
cover the skip limit, fedavg's non-finite guard and its dropped clients, clipping under
localsgd, fedavg and ps, and ps's LEAVE). The 11 added since (stop-*: the stop signal's
agreement, and ps's END; zero3-*: ZeRO-3's sums, slices, norm, tied head and table,
evaluation and sequence parallelism) were run alone and caught, as were the 2 after them
(zero3-half-*: ZeRO-3's 16-bit reduce-scatter; zero3-prefetch-*: its prefetch; 2026-11-28). Not part of `make test`. Run it from a tree whose mutated files have no
uncommitted changes (it refuses otherwise): it rewrites them."""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GPT = "cli_gpt_layouts$"
GPT_LONG = "cli_gpt_layouts_long"
TPGPT = "test_tp_gpt"
PP = "test_pp_np2|test_pp_np3"
COMM = "test_comm_coll|test_comm_det"
STEPS = "test_run_steps"

# id, file, the line's text, its mutant, the tests that must catch it (ctest -R), the slip
MUTANTS = [
    ("clip-replicated-per-tp-rank", "src/parallel/clip.c", "tp_rank != 0)", "tp_rank < 0)", GPT,
     "the clipping norm counts replicated tensors on every tp rank"),
    ("clip-tied-twice", "src/parallel/clip.c", " || p->tie == DT_TIE_COPY)", ")", GPT,
     "the clipping norm counts the tied table on both stages"),
    ("clip-no-pp-sum", "src/parallel/clip.c", "dt_grid_size(s->grid, DT_GRID_PP) > 1 ?",
     "dt_grid_size(s->grid, DT_GRID_PP) > 2 ?", GPT,
     "the clipping norm is not summed over 2 pipeline stages"),
    ("clip-zero-per-shard", "src/parallel/ddp.c", "dp->shard_count, dp->comm));",
     "dp->shard_count, NULL));", "test_dp_np2|test_dp_np3",
     "under ZeRO-1 the clipping norm is each rank's shard's"),
    ("tie-half-sum", "src/parallel/tie.c", "g + p->offset, g + p->offset, p->count,",
     "g + p->offset, g + p->offset, p->count / 2,", GPT,
     "half of the tied table's gradient summed between its stages"),
    ("tie-group-copy-left-out", "src/parallel/tie.c",
     "dt_model_tensor(m, i)->tie != DT_TIE_NONE", "dt_model_tensor(m, i)->tie == DT_TIE_ORIGINAL",
     GPT, "the head's stage is left out of the embedding group"),
    ("tie-group-from-pp3", "src/parallel/tie.c", "if (s->info.pp_size < 2 || s->tie_ready)",
     "if (s->info.pp_size < 3 || s->tie_ready)", GPT, "no embedding group at pp 2"),
    ("tie-no-sum-single", "src/parallel/single.c", "    dt_status st = dt_strategy_sum_tied(s);",
     "    dt_status st = DT_OK;", PP, "one replica's tied gradients never summed"),
    ("tie-no-sum-ddp", "src/parallel/ddp.c",
     "    DT_TRY(dt_strategy_sum_tied(s));\n    DT_TRY(dt_strategy_sum_positions(s));",
     "    DT_TRY(dt_strategy_sum_positions(s));", GPT,
     "ddp's update never sums the tied gradients"),
    ("sp-no-sum-ddp", "src/parallel/ddp.c",
     "    DT_TRY(dt_strategy_sum_positions(s));\n    if (!s->opt.zero) {",
     "    if (!s->opt.zero) {", GPT,
     "ddp's update never sums the position-shared gradients"),
    ("sp-sum-max", "src/parallel/tp_group.c",
     "DT_COMM_FLOAT32, DT_COMM_SUM);\n        if (st != DT_OK)\n            return st;\n"
     "        t->grad_sums++;",
     "DT_COMM_FLOAT32, DT_COMM_MAX);\n        if (st != DT_OK)\n            return st;\n"
     "        t->grad_sums++;", GPT, "position-shared gradients combined by max, not sum"),
    ("sp-report-floats", "src/parallel/tp_group.c", "t->grad_bytes += p->count * sizeof(float);",
     "t->grad_bytes += p->count;", GPT, "the report counts the sums' floats as bytes"),
    ("sp-embeddings-not-partial", "src/nn/model.c", "t->seq_partial = l->seq; /* used on",
     "t->seq_partial = 0; /* used on", GPT,
     "the embeddings' gradients not summed under sequence parallelism"),
    ("sp-ln2-bias-not-partial", "src/nn/block.c", " || k == T_LN2B);", ");", GPT,
     "a LayerNorm bias's gradient not summed under sequence parallelism"),
    ("sp-dropout-local-key", "src/nn/block.c", "base = d.t0 * d.E;", "base = 0;",
     "cli_text|" + GPT, "dropout masks keyed by the local position"),
    ("sp-position-rows", "src/nn/position.c", "j->l->w + j->l->seq_t0 * j->l->in.d[1]", "j->l->w",
     "cli_text|" + GPT, "every rank reads the first rows of the position table"),
    ("sp-embedding-ids", "src/nn/embedding.c", "j->x[i / n * T + l->seq_t0 + i % n]",
     "j->x[i / n * T + i % n]", "cli_text|" + GPT, "every rank embeds the first positions"),
    ("sp-gradient-rows", "src/nn/block.c", "rv(dy + d.t0 * E, d.T * E)", "rv(dy, d.T * E)",
     TPGPT, "the last block takes the first rows of the output gradient"),
    ("sp-padding", "src/nn/block.c", "d.Tp = (d.T + d.parts - 1) / d.parts;",
     "d.Tp = d.T / d.parts;", TPGPT, "shares padded to floor(T/tp), not ceil"),
    ("sp-positions-bound", "src/nn/model_tp.c", "if (l->seq_len < tp->size)",
     "if (l->seq_len < tp->size - 1)", TPGPT, "fewer positions than ranks accepted"),
    ("heads-wrong-rank", "src/nn/model_tp.c",
     "dt_tp_part(l->spec.heads, 1, tp->size, tp->rank, &h0, &h1);",
     "dt_tp_part(l->spec.heads, 1, tp->size, tp->size - 1 - tp->rank, &h0, &h1);",
     "cli_text|" + GPT, "an uneven split's heads planned on the wrong rank"),
    ("heads-bound", "src/nn/model_tp.c", "if (l->spec.heads < tp->size)",
     "if (l->spec.heads < tp->size - 1)", TPGPT, "more ranks than heads accepted"),
    ("mlp-split-begin", "src/nn/block.c", "t[k].split_begin = heads ? d.h0 * d.D : d.f0;",
     "t[k].split_begin = heads ? d.h0 * d.D : 0;", TPGPT,
     "every rank's MLP columns described as the first"),
    ("whole-index-groups", "src/nn/model_tp.c",
     "(g * gw + (size_t)t->split_begin + row % w) * inner", "(g * gw + row % w) * inner", GPT,
     "q, k and v's parts gathered to the wrong rows"),
    ("tp-overlap-rows", "src/nn/block.c", "                      .a = a + lo * K,",
     "                      .a = a,", GPT, "every overlapped weight-gradient piece reads row 0"),
    ("recompute-no-mask", "src/nn/block.c",
     "        if (active)\n            rows(l, batch, DO_MASK2, xs, o);\n        return DT_OK;",
     "        return DT_OK;", "test_gpt_model", "a block's recompute skips its second mask"),
    ("recompute-stale-ctx", "src/nn/model_run.c", "(m->recompute || m->inner) && first < last",
     "(m->recompute) && first < last", "test_gpt_model",
     "a block's recompute keys from a stale step"),
    ("tied-copy-own-key", "src/nn/model.c",
     "const int key_layer = t->tie == DT_TIE_COPY ? l->tie : l->index;",
     "const int key_layer = l->index;", "test_gpt_model",
     "the head's copy of the table drawn from its own key"),
    ("whole-params-table-twice", "src/train/trainer_weights.c", "if (p->tie == DT_TIE_COPY)",
     "if (0)", PP, "the whole parameters hold the tied table twice"),
    ("ckpt-table-twice", "src/parallel/state.c", "if (p->tie == DT_TIE_COPY)", "if (0)", GPT,
     "a checkpoint holds the tied table twice"),
    ("replicas-never-differ", "src/parallel/replica_check.c", "if (other[2 + i] != first[2 + i]) {",
     "if (0) {", PP, "--check-replicas never compares"),
    ("replicas-no-tied", "src/parallel/replica_check.c",
     "tp > 1 ? dt_grid_comm(g, DT_GRID_TP) : NULL, s->tie_comm};",
     "tp > 1 ? dt_grid_comm(g, DT_GRID_TP) : NULL, NULL};", PP,
     "--check-replicas skips the tied table's copies"),
    ("plan-sp-gathers", "src/cli/cmd_plan.c", "const int ag = 6 + plan[i].seq_out_whole",
     "const int ag = 5 + plan[i].seq_out_whole", GPT,
     "dtrain plan counts one all-gather too few per block"),
    ("plan-sp-sum-bytes", "src/cli/cmd_plan.c",
     "plan[i].role == DT_TP_HEADS ? 4 * E : mp->params[i];",
     "plan[i].role == DT_TP_HEADS ? 2 * E : mp->params[i];", GPT,
     "dtrain plan halves a block's position-shared gradients"),
    ("plan-pp-one-way", "src/cli/cmd_plan.c", "            pp_bytes += 2 * x;",
     "            pp_bytes += x;", GPT, "dtrain plan counts a cut's messages one way"),
    ("plan-share-long", "src/cli/cmd_plan.c", "    dt_tp_part(T, 1, tp, 0, &lo, &hi);",
     "    dt_tp_part(T, 1, tp, tp - 1, &lo, &hi);", GPT_LONG,
     "dtrain plan pads shares to the smallest, not the largest"),
    ("explain-allreduces", "src/cli/explain.c",
     "            fwd_sum += 2 * te;\n            n_fs += 2;",
     "            fwd_sum += 2 * te;\n            n_fs += 1;", "cli_text",
     "--explain-layout counts one forward all-reduce per block"),
    ("memory-kept-state", "src/cli/train_memory.c", "(double)(mem.kept_bytes + mem.state_bytes)",
     "(double)(mem.kept_bytes)", "cli_rank_memory",
     "the memory line's 'kept for backward' leaves out the layers' state"),
    ("memory-gradients", "src/cli/train_memory.c",
     "dt_model_whole_param_count(whole), params / 1e6,",
     "dt_model_whole_param_count(whole), act / 1e6,", "cli_rank_memory",
     "the memory line's gradients are the activations"),
    ("minimum-masks", "src/train/gpt_memory.c", "mask += s->p > 0 ? 2.0 * bits(TE) : 0.0;",
     "mask += s->p > 0 ? bits(TE) : 0.0;", "test_gpt_memory",
     "the design's minimum counts one dropout mask per block"),
    ("minimum-stats", "src/train/gpt_memory.c",
     "floats += TE + 3.0 * TE + TE + H * T + TE + 4.0 * TE + 4.0 * T;",
     "floats += TE + 3.0 * TE + TE + H * T + TE + 4.0 * TE;", "test_gpt_memory",
     "the design's minimum leaves out the LayerNorms' statistics"),
    ("dropout-mask-size", "src/nn/dropout.c", "l->state_bytes = l->spec.p > 0.0 ?",
     "l->state_bytes = l->spec.p > 1.0 ?", "test_gpt_memory",
     "a dropout of p > 0 plans no mask"),
    ("hf-config-dropouts", "src/infer/gpt_form.c", "attn, embd, (long long)n_positions",
     "embd, attn, (long long)n_positions", "cli_generate_export",
     "config.json's attn_pdrop and embd_pdrop swapped"),
    ("ckpt-part-offset", "src/parallel/state.c",
     "dt_status st = src->read(src->ctx, name, first, n, dst + (k - k0));",
     "dt_status st = src->read(src->ctx, name, first, n, dst + k);", "cli_ckpt|test_ckpt_mpi",
     "a ZeRO slice's part of a tensor read to the tensor's offset"),
    ("weights-split-offset", "src/train/weights.c",
     " " * 39 + "params + p->offset + k);", " " * 39 + "params + p->offset);",
     "test_tp_np2|cli_text",
     "every run of a split tensor's elements loaded to its first place"),
    ("nonfinite-pp-fold", "src/parallel/strategy.c",
     "            fold_bad(&s->bad, x + 4 * r + 1);", "            fold_bad(&s->bad, x + 4 * r);",
     "cli_pp|test_ckpt_mpi",
     "the stages' non-finite findings read from the loss's place"),
    ("sp-loss-share", "src/parallel/strategy.c", "        if (share)\n            *loss_sum = sum;",
     "", GPT, "under sequence parallelism each rank's loss is its own positions' only"),
    ("compress-mean", "src/parallel/gcomp.c", "const float inv = 1.0f / (float)g->size;",
     "const float inv = 1.0f;", "test_gcomp_mpi|cli_compress",
     "compressed gradients summed, not averaged"),
    # issue 40's five, each caught by the test that issue added
    ("resid-reshard-saved-count", "src/parallel/state.c",
     "mine[p->offset + k] += tmp[k] / (float)si->replicas;",
     "mine[p->offset + k] += tmp[k] / (float)saved;", "test_ckpt_mpi",
     "residuals resharded onto another replica count divided by the saved count"),
    ("ps-warmup-boundary", "src/parallel/ps.c", "plan->step < ps->base.opt.compress.warmup;",
     "plan->step <= ps->base.opt.compress.warmup;", "cli_compress_warmup|cli_ps",
     "a parameter server's compression starts a step late"),
    ("ps-topk-shard-residual", "src/parallel/ps_codec.c",
     "dt_topk_feedback(g, ps->resid + off, cnt", "dt_topk_feedback(g, ps->resid, cnt",
     "test_ps_codec|cli_ps_topk_shards", "every server shard's top-k uses the first residual"),
    ("fedavg-sampled-weight", "src/parallel/fedavg.c",
     "const int64_t nc = start[sampled[j] + 1] - start[sampled[j]];",
     "const int64_t nc = start[j + 1] - start[j];", "test_fed",
     "a sampled client weighted by another client's count"),
    ("phase-names", "src/obs/obs.c", '{"data", "forward",   "backward",',
     '{"data", "backward",   "forward",', "test_obs$|cli_obs", "forward and backward swapped"),
    ("pipe-slot-reuse", "src/parallel/pipe_plan.c",
     "    if (v == s->vlow[r] && j >= s->slots[r] && !ran_by",
     "    if (v == s->vlow[r] && j > s->slots[r] && !ran_by", "test_pipe_plan",
     "a micro-batch takes a slot before its previous holder's backward ends"),
    # The second pass (2026-11-27, session 2): the comm layer, optimizers, the trainer's
    # data order and schedule, checkpoints, sampling.
    ("max-nan", "src/comm/reduce_ops.c",
     "#define MAX_F(a, b) (((a) >= (b) || (a) != (a)) ? (a) : (b))",
     "#define MAX_F(a, b) (((a) >= (b)) ? (a) : (b))", COMM, "max drops a NaN on the left"),
    ("mpi-max-nan", "src/comm/validate.c", ": dtype == DT_COMM_FLOAT32 && minmax ? DT_CX_OWN_F32",
     ": 0 ? DT_CX_OWN_F32", "test_comm_coll", "MPI's own MAX and MIN on float32, which drop NaNs"),
    ("check-no-impl", "src/comm/check.c",
     "if (memcmp(r0, rp, DT_CHECK_FIELDS * sizeof *rp) == 0)",
     "if (memcmp(r0, rp, (DT_CHECK_FIELDS - 1) * sizeof *rp) == 0)", "test_comm_check",
     "--comm-check ignores the algorithm"),
    ("check-no-shape", "src/comm/check.c",
     "if (q->a.coll != DT_COMM_REDUCE_SCATTER && q->a.coll != DT_COMM_ALLGATHER)\n        return 0;",
     "return 0;", "test_comm_check", "--comm-check ignores block layouts"),
    ("shuffle-same-every-epoch", "src/train/trainer.c",
     "dt_rng_permutation(t->cfg.train.seed, (uint64_t)epoch, t->train.n, t->perm);",
     "dt_rng_permutation(t->cfg.train.seed, 0, t->train.n, t->perm);", STEPS,
     "every epoch takes the first epoch's order"),
    ("pad-no-wrap", "src/train/trainer.c", "pos[i] = (first + i) % t->train.n;",
     "pos[i] = first + i;", STEPS, "last_batch pad reads past the epoch's end"),
    ("drop-as-pad", "src/train/trainer.c", "? t->train.n / t->global_batch\n",
     "? (t->train.n + t->global_batch - 1) / t->global_batch\n", STEPS,
     "last_batch drop keeps the short batch"),
    ("cosine-total-warmup", "src/train/trainer.c",
     "sched.total_steps = total - sched.warmup_steps > 0 ? total - sched.warmup_steps : 1;",
     "sched.total_steps = total > 0 ? total : 1;", STEPS, "the run's cosine counts the warm-up"),
    ("resume-skipped", "src/train/trainer_ckpt.c", "t->start_step = m->step + m->skipped;",
     "t->start_step = m->step;", "test_text_train",
     "a finished text run resumed forgets its skipped steps"),
    ("prune-keeps-stale-incomplete", "src/ckpt/ckpt_set.c", "(!whole && complete > 0)",
     "(!whole && complete > keep)", "test_ckpt_format", "prune leaves old incomplete sets"),
    ("export-replica-state", "src/ckpt/ckpt_set.c",
     "strncmp(t->name, DT_CKPT_REPLICA_PREFIX, strlen(DT_CKPT_REPLICA_PREFIX)) != 0)", "1)",
     "test_ckpt_format", "export writes a replica's own state as weights"),
    ("sample-ties-high", "src/infer/sample.c",
     "return l[a] > l[b] || (l[a] == l[b] && a < b);",
     "return l[a] > l[b] || (l[a] == l[b] && a > b);", "test_generate$",
     "top-k ties go to the higher id"),
    ("greedy-ties-last", "src/infer/sample.c", "if (logits[v] > logits[best])",
     "if (logits[v] >= logits[best])", "test_generate$", "greedy ties go to the last id"),
    ("eval-share-offset", "src/parallel/replica.c",
     "DT_TRY(io->load_test(io->ctx, begin + off, c, 0, DT_LOAD_ALL));",
     "DT_TRY(io->load_test(io->ctx, off, c, 0, DT_LOAD_ALL));", "test_dp_np2|test_dp_np3",
     "every replica evaluates the first test samples"),
    ("watchdog-newest", "src/comm/watchdog.c",
     "if (o->state == DT_REQ_ACTIVE && o->is_coll && (q == NULL || o->seq < q->seq))",
     "if (o->state == DT_REQ_ACTIVE && o->is_coll && (q == NULL || o->seq > q->seq))",
     "test_comm_watchdog", "a rank's watchdog answer names its newest wait, not its oldest"),
    ("ddp-bad-rank-highest", "src/parallel/ddp.c",
     "if (x[2] != 0 && (dp->base.bad.ranks++ == 0 || x[3] < dp->base.bad.rank)) {",
     "if (x[2] != 0 && (dp->base.bad.ranks++ == 0 || x[3] > dp->base.bad.rank)) {",
     "test_ckpt_mpi_np3", "the non-finite report names the highest bad rank, not the lowest"),
    ("ddp-first-bucket-cap", "src/parallel/ddp.c",
     "if (b->count >= (dp->nbuckets == 1 ? first_cap : cap))", "if (b->count >= cap)",
     "cli_dp$", "the first bucket takes bucket_cap_mb, not first_bucket_mb"),
    ("launch-ipv6", "src/cli/launch_hosts.c",
     "if (colon != NULL && colon == strrchr(word, ':')) {", "if (colon != NULL) {",
     "cli_launch_args", "an IPv6 host in a hostfile read as NAME:N"),
    ("tb-mask", "src/cli/tensorboard.c", "return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;",
     "return ((crc >> 15) | (crc << 17)) + 0xA282EAD9u;", "cli_tensorboard$",
     "TFRecord CRCs masked with the wrong constant"),
    ("corpus-size-only", "src/train/data_setup.c",
     "if (all[2 * r] == all[0] && all[2 * r + 1] == all[1])", "if (all[2 * r] == all[0])",
     "cli_text$", "ranks' corpora compared by size alone"),
    ("psgd-redraw-inf", "src/parallel/compress.c", "bad |= !isfinite(q[i]);",
     "bad |= isnan(q[i]);", "test_compress$", "an infinite PowerSGD Q is kept"),
    ("maxpool-nan", "src/nn/maxpool2d.c", "int at = 0, up = (b > m) | (b != b);",
     "int at = 0, up = (b > m);", "test_grad_layers", "2x2 max pooling drops a NaN"),
    ("inert-text-shuffle", "src/train/config_inert.c",
     'judge(c, "data.shuffle", kind != DT_DATA_TEXT,', 'judge(c, "data.shuffle", 1,',
     "cli_misconf", "--shuffle accepted on a text run, where it does nothing"),
    ("inert-val-fraction", "src/train/config_inert.c",
     'judge(c, "data.val_fraction", kind == DT_DATA_TEXT,', 'judge(c, "data.val_fraction", 1,',
     "cli_misconf", "data.val_fraction accepted on an image run"),
    ("inert-total-steps", "src/train/config_inert.c",
     'judge(c, "schedule.total_steps", s == DT_SCHED_COSINE,',
     'judge(c, "schedule.total_steps", 1,', "cli_misconf",
     "schedule.total_steps accepted without a cosine schedule"),
    ("inert-test-samples-csv", "src/train/config_inert.c",
     'judge(c, "data.test_samples", c->data.test_file[0] == \'\\0\',',
     'judge(c, "data.test_samples", 1,', "cli_misconf",
     "data.test_samples accepted beside a CSV test file"),
    ("skip-run-never-reset", "src/train/trainer.c", "            t->skip_run = 0;\n",
     "", "test_ckpt_mpi", "skips with steps taken between them counted as in a row"),
    ("skip-limit-late", "src/train/trainer.c", "limit > 0 && t->skip_run + 1 >= limit;",
     "limit > 0 && t->skip_run >= limit;", "test_ckpt_mpi",
     "train.skip_limit lets one skip more through than it says"),
    ("ps-bad-push-uncounted", "src/parallel/strategy.c",
     "return s->bad.ranks == 0 ? s->bad_here : 0;", "return 0;", "cli_ps", "a ps worker whose every push is skipped trains on to its end"),
    ("localsgd-local-unclipped", "src/parallel/localsgd.c",
     "dt_model_param_count(s->model), lr, s->grad_scale,",
     "dt_model_param_count(s->model), lr, ls->warm ? s->grad_scale : 1.0,", "test_localsgd",
     "local SGD's local steps ignore optim.clip_norm"),
    ("localsgd-clip-over-dp", "src/parallel/localsgd.c", "st = dt_strategy_clip(s, g, 0, n, NULL);",
     "st = dt_strategy_clip(s, g, 0, n, ls->comm);", "test_localsgd",
     "a replica clips by the norm of every replica's gradient"),
    ("fedavg-unclipped", "src/parallel/fedavg.c", "lr, f->base.grad_scale, NULL);",
     "lr, 1.0, NULL);", "cli_fedavg", "fedavg's clients ignore optim.clip_norm"),
    ("ps-clip-shard-only", "src/parallel/ps_server.c",
     "DT_TRY(dt_comm_allreduce(ps->servers_comm, &sq, &sq, 1, DT_COMM_FLOAT64, DT_COMM_SUM));",
     "", "cli_ps", "each ps server clips the step's sum by its own shard's norm"),
    ("ps-clip-push-not-scaled", "src/parallel/ps.c", "const double sq = w * w *",
     "const double sq = 1.0 *", "cli_ps",
     "a ps worker clips its push by the norm of the push, not of what the servers apply"),
    ("fedavg-nan-kept", "src/parallel/fedavg.c",
     "    }\n    memcpy(w, f->global, f->n * sizeof(float));",
     "    }", "cli_fedavg",
     "a round a NaN skips keeps the last client's local weights"),
    ("fedavg-never-drop", "src/parallel/fedavg.c", "if (bad < k && !f->base.opt.nonfinite_stop)",
     "if (bad < 0 && !f->base.opt.nonfinite_stop)", "cli_fedavg",
     "a round with one bad client is skipped whole instead of averaging the others"),
    ("fedavg-drop-under-stop", "src/parallel/fedavg.c",
     "if (bad < k && !f->base.opt.nonfinite_stop)", "if (bad < k)", "cli_fedavg",
     "--on-nonfinite stop lets a round drop its bad client and go on"),
    ("fedavg-dropped-weighed", "src/parallel/fedavg.c",
     "            continue;\n        const int64_t nc", "            (void)0;\n        const int64_t nc",
     "test_fed_average", "a dropped client's samples counted in the round's total"),
    ("fedavg-dropped-summed", "src/parallel/fedavg.c",
     "            continue;\n        const float *d", "            (void)0;\n        const float *d",
     "test_fed_average", "a dropped client's update summed into the average"),
    ("ps-leave-unsent", "src/parallel/ps.c",
     "if (is_server(ps) || ps->told_left || ps->wreq == NULL)",
     "if (1 || ps->told_left || ps->wreq == NULL)", "test_ckpt_mpi_np3",
     "a ps worker that fails alone tells no server: the others wait for the watchdog"),
    ("ps-leave-untold", "src/parallel/ps_server.c", "        if (h.kind == PS_PULL)\n",
     "        if (h.kind == -PS_PULL)\n", "test_ckpt_mpi_np3",
     "a ps server that takes a LEAVE does not tell the other workers"),
    ("fedavg-nan-unseen", "src/parallel/fedavg.c",
     "*bad = !isfinite(loss) || dt_any_nonfinite(d, f->n, NULL);", "*bad = !isfinite(loss);",
     "cli_fedavg", "a client's non-finite update averaged into the model"),
    ("stop-unagreed", "src/train/stop.c", "if (t->stop_comm == NULL) { /* one rank",
     "if (1) { /* one rank", "cli_stop",
     "each rank stops after the step its own signal came, not where the ranks agree"),
    ("stop-ignored", "src/train/stop.c", "        if (t->stop_any != 0) {",
     "        if (0) {", "cli_stop", "the ranks agree on a stop and train on"),
    ("stop-ps-end-unsent", "src/parallel/ps.c",
     "if (is_server(ps))\n        return dt_ps_server_end(ps);",
     "if (1)\n        return is_server(ps) ? dt_ps_server_end(ps) : DT_OK;", "cli_stop",
     "ps workers stop without ending their streams, which their servers wait for"),
    # ZeRO-3 (src/parallel/zero3.c, src/nn/model_window.c)
    ("zero3-grad-assigned", "src/parallel/zero3.c", "to[i] += z->part[i];",
     "to[i] = z->part[i];", "test_dp_np2|" + GPT,
     "under ZeRO-3 a layer's reduced gradients overwrite the slice's (the tied head's table, "
     "an earlier micro-batch's) instead of adding to them"),
    ("zero3-slice-drawn-from-0", "src/parallel/zero3.c",
     "dt_model_init_range(m, s->opt.seed, z->lo, z->n, z->p);",
     "dt_model_init_range(m, s->opt.seed, 0, z->n, z->p);", "test_dp_np2",
     "each ZeRO-3 rank draws its slice from the model's first element"),
    ("zero3-clip-per-slice", "src/parallel/zero3.c", "dt_strategy_clip(s, z->g, z->lo, z->n, z->comm)",
     "dt_strategy_clip(s, z->g, z->lo, z->n, NULL)", "test_dp_np2|" + GPT,
     "under ZeRO-3 the clipping norm is each rank's slice's"),
    ("zero3-head-own-range", "src/nn/model_window.c", "*count = m->layers[j].weight_count;",
     "*count = 0;", GPT,
     "under ZeRO-3 the tied head reads no table (its window left as the last layer's)"),
    ("zero3-sp-unsummed", "src/parallel/zero3.c",
     "dt_strategy_sum_positions_in(&z->base, g, off, count);", "DT_OK;", GPT,
     "under ZeRO-3 with sequence parallelism a layer's position-shared gradients are not "
     "summed over the tp group"),
    ("zero3-tied-unsummed", "src/parallel/zero3.c", "    dt_status st = sum_tied(z);",
     "    dt_status st = DT_OK;", GPT,
     "under ZeRO-3 over pipeline stages the tied table's gradient is not summed with its "
     "copy's between the stages"),
    ("zero3-pipe-eval-own-share-long", "src/parallel/pipe.c",
     "dt_model_has_windows(p->model) ? most : count;", "count;", "test_dp_np4",
     "under ZeRO-3 through a pipeline a replica with a smaller test share runs fewer chunks, "
     "so the others' gathers wait for it"),
    ("zero3-eval-own-share", "src/parallel/replica.c",
     "dt_model_has_windows(s->model) ? most : count;", "count;", "test_dp_np3",
     "under ZeRO-3 a replica with a smaller test share makes fewer forward calls, so the "
     "others' gathers wait for it"),
    ("zero3-half-no-warmup", "src/parallel/zero3.c",
     "z->half != NULL && plan->step >= s->opt.compress.warmup;", "z->half != NULL;",
     "cli_compress$", "under ZeRO-3 fp16/bf16 reduce in 16 bits during the warm-up too"),
    ("zero3-half-bf16-as-fp16", "src/parallel/zero3.c",
     "f16 ? DT_COMM_FLOAT16 : DT_COMM_BFLOAT16,", "DT_COMM_FLOAT16,", "cli_compress$",
     "under ZeRO-3 bf16 gradients are summed as fp16 bit patterns"),
    ("zero3-prefetch-forward-none", "src/nn/model_run.c",
     "st = forward_layer(m, i, dt_model_window_next(m, i, 1, last), row0, batch, ctx);",
     "st = forward_layer(m, i, -1, row0, batch, ctx);", "cli_rank_memory",
     "under ZeRO-3 forward prefetches nothing (each gather waited for)"),
    ("zero3-prefetch-bound-other", "src/nn/model_window.c",
     "bind(&m->layers[i], m->pwin + (size_t)buf * m->win_count,",
     "bind(&m->layers[i], m->pwin + (size_t)(1 - buf) * m->win_count,", "test_dp_np2|" + GPT,
     "under ZeRO-3 a layer reads the window the next layer's prefetch fills"),
]


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="the build directory (default build)")
    ap.add_argument("--only", default="", help="comma-separated mutant ids")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    args = ap.parse_args()
    ids = [m[0] for m in MUTANTS]
    if len(set(ids)) != len(ids):
        sys.exit("mutants.py: two mutants share an id")
    chosen = [m for m in MUTANTS if not args.only or m[0] in args.only.split(",")]
    unknown = set(args.only.split(",")) - set(ids) if args.only else set()
    if unknown:
        print(f"mutants.py: no mutant {', '.join(sorted(unknown))}", file=sys.stderr)
        sys.exit(2)
    if args.list:  # each with whether its line still occurs exactly once
        stale = 0
        for m in chosen:
            with open(os.path.join(ROOT, m[1])) as f:
                n = f.read().count(m[2])
            stale += n != 1
            print(f"{m[0]:30} {m[1]}: {m[5]} (tests: {m[4]})" +
                  ("" if n == 1 else f" STALE: its line occurs {n} times"))
        return 1 if stale else 0
    build = os.path.join(ROOT, args.build)
    if not os.path.isfile(os.path.join(build, "CTestTestfile.cmake")):
        print(f"mutants.py: {build} is not a configured build (run make first)", file=sys.stderr)
        sys.exit(2)
    files = sorted({m[1] for m in chosen})
    dirty = run(["git", "status", "--porcelain", "--"] + files).stdout.strip()
    if dirty:
        print("mutants.py: these files have uncommitted changes, which a mutant would overwrite "
              "and restore:\n" + dirty, file=sys.stderr)
        sys.exit(2)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    bad = 0
    try:
        for mid, path, old, new, tests, what in chosen:
            full = os.path.join(ROOT, path)
            with open(full) as f:
                text = f.read()
            n = text.count(old)
            if n != 1:
                print(f"STALE    {mid}: its line occurs {n} times in {path} (the code changed: "
                      f"update the mutant)")
                bad = 1
                continue
            t0 = time.time()
            try:
                with open(full, "w") as f:
                    f.write(text.replace(old, new))
                b = run(["cmake", "--build", build, "-j", "2"])
                if b.returncode != 0:
                    verdict = "CAUGHT   by the build"
                else:
                    r = subprocess.run(
                        ["ctest", "-R", tests, "--stop-on-failure", "--timeout", "300", "-j", "2"],
                        cwd=build, capture_output=True, text=True, env=env)
                    failed = [ln.split(" - ")[1].split()[0] for ln in r.stdout.splitlines()
                              if " - " in ln and ln.strip()[:1].isdigit()]
                    ran = "No tests were found" not in r.stdout + r.stderr
                    if not ran:
                        verdict = f"STALE    no test matches {tests!r}"
                        bad = 1
                    elif r.returncode != 0:
                        verdict = "CAUGHT   by " + ", ".join(failed or ["ctest"])
                    else:
                        verdict = "SURVIVED"
                        bad = 1
            finally:
                with open(full, "w") as f:
                    f.write(text)
            print(f"{verdict.split()[0]:8} {mid}: {what} ({path}; {time.time() - t0:.0f} s)"
                  + (f" {' '.join(verdict.split()[1:])}" if len(verdict.split()) > 1 else ""),
                  flush=True)
    finally:
        run(["cmake", "--build", build, "-j", "2"])
    print("every mutant was caught" if not bad else "a mutant survived or is stale")
    return bad


if __name__ == "__main__":
    sys.exit(main())
