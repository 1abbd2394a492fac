/* explain.c — `dtrain train --explain-layout`: the pipeline stage each layer runs on and
 * the tensor-parallel plan of the config's model, layer by layer, with the part each tp
 * rank holds and its parameter bytes, the collectives a step costs, and each stage's share
 * of the arithmetic and the activations it sends, and each stage's order of forwards and
 * backwards in a step (the pipeline's plan, as text). It runs in one process (no MPI): the
 * plan is a pure function of the config and the data's sample shape, the same on every
 * rank of a job. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/explain.h"
#include "dtrain/dtrain.h"

static void shape_text(const dt_shape *s, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < s->ndim && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, d ? ", %lld" : "%lld", (long long)s->d[d]);
    if (o < n)
        snprintf(buf + o, n - o, ")");
}

/* One row per layer: kind, whole output, role, then each rank's part and parameters. */
static void print_layers(const dt_config *cfg, const dt_shape *shapes,
                         dt_tp_layer_plan *const *plans, int tp, const int *stage_of)
{
    if (stage_of != NULL)
        printf("%-5s ", "stage");
    printf("%-3s %-20s %-16s %-7s %-6s", "#", "layer", "output (whole)", "role", "gather");
    for (int r = 0; r < tp; r++)
        printf("  rank %-2d part    params", r);
    printf("\n");
    for (int i = 0; i < cfg->nlayers; i++) {
        const dt_layer_spec *sp = &cfg->layers[i];
        char name[64], out[48];
        snprintf(name, sizeof name, "%s%s%s", sp->name, sp->name[0] ? " " : "",
                 dt_layer_kind_name(sp->kind));
        shape_text(&shapes[i + 1], out, sizeof out);
        const dt_tp_layer_plan *p0 = &plans[0][i];
        if (stage_of != NULL)
            printf("%-5d ", stage_of[i]);
        printf("%-3d %-20.20s %-16s %-7s %-6s", i, name, out, dt_tp_role_name(p0->role),
               p0->gather ? "yes" : "");
        for (int r = 0; r < tp; r++) {
            const dt_tp_layer_plan *p = &plans[r][i];
            char part[32] = "-";
            if (p->role != DT_TP_WHOLE)
                snprintf(part, sizeof part, "%lld:%lld", (long long)p->begin, (long long)p->end);
            if (p->sequence) { /* heads, then the positions of its residual stream */
                int64_t t0, t1;
                dt_tp_part(shapes[i + 1].d[0], 1, tp, r, &t0, &t1);
                if (p->role == DT_TP_WHOLE) /* a GPT on shares throughout: positions only */
                    snprintf(part, sizeof part, "t%lld:%lld", (long long)t0, (long long)t1);
                else
                    snprintf(part, sizeof part, "%lld:%lld t%lld:%lld", (long long)p->begin,
                             (long long)p->end, (long long)t0, (long long)t1);
            }
            printf("  %-13s %9zu", part, p->params);
        }
        printf("\n");
    }
}

/* Totals per rank, and the step's tensor-parallel collectives at the config's batch. */
static void print_totals(const dt_config *cfg, const dt_shape *shapes,
                         dt_tp_layer_plan *const *plans, int tp)
{
    size_t whole = 0;
    for (int i = 0; i < cfg->nlayers; i++)
        whole += plans[0][i].whole_params;
    printf("parameter bytes per rank:");
    for (int r = 0; r < tp; r++) {
        size_t n = 0;
        for (int i = 0; i < cfg->nlayers; i++)
            n += plans[r][i].params;
        printf(" %zu (%.3f)", n * sizeof(float), whole ? (double)n / (double)whole : 0.0);
    }
    printf(" of %zu whole\n", whole * sizeof(float));
    if (tp == 1)
        return;
    /* Forward: a sum after each row layer, a gather after each gathering one; backward: a
     * sum of each column layer's input gradient (not the first parameter layer's: training
     * skips the model input's gradient); a block split by heads, two of each (Megatron's 4 per
     * transformer layer). Bytes each rank contributes, per sample. */
    int64_t fwd_sum = 0, fwd_gather = 0, bwd_sum = 0, fwd_rs = 0, bwd_gather = 0, bwd_rs = 0;
    int n_fs = 0, n_fg = 0, n_bs = 0, n_frs = 0, n_bg = 0, n_brs = 0, seen_params = 0;
    int shares_all = 0; /* the whole model on shares (model.h, dt_tp_layout) */
    for (int i = 0; i < cfg->nlayers; i++) {
        const dt_tp_layer_plan *p = &plans[0][i];
        if (p->role == DT_TP_ROW) {
            fwd_sum += dt_shape_numel(&shapes[i + 1]);
            n_fs++;
        }
        if (p->gather) {
            fwd_gather += dt_shape_numel(&shapes[i + 1]);
            n_fg++;
        }
        if (p->role == DT_TP_COLUMN && seen_params) {
            bwd_sum += dt_shape_numel(&shapes[i]);
            n_bs++;
        }
        const int64_t te = dt_shape_numel(&shapes[i + 1]); /* a block's (T, E), whole */
        if (p->role == DT_TP_HEADS && !p->sequence) {      /* a block by heads: after each output
                                                            * projection, and each column
                                                            * projection's input gradient */
            fwd_sum += 2 * te;
            n_fs += 2;
            bwd_sum += 2 * te;
            n_bs += 2;
        }
        if (p->role == DT_TP_HEADS && p->sequence) {
            /* sequence parallelism (model.h, dt_tp_layout): forward 2 all-gathers and 2
             * reduce-scatters, and the output gathered where the run of blocks ends;
             * backward 4 and 2, and the input's gradient gathered where it begins */
            const int out = p->seq_out_whole, in = p->seq_in_whole && seen_params;
            fwd_gather += (2 + out) * te, n_fg += 2 + out;
            fwd_rs += 2 * te, n_frs += 2;
            bwd_gather += (4 + in) * te, n_bg += 4 + in;
            bwd_rs += 2 * te, n_brs += 2;
        }
        seen_params |= p->whole_params > 0;
        shares_all |= p->role == DT_TP_WHOLE && p->sequence;
    }
    const double b = (double)cfg->train.batch * sizeof(float) / 1e6;
    printf("tensor-parallel collectives per micro-batch of %lld: forward %d all-reduce%s "
           "(%.3f MB) and %d all-gather%s (%.3f MB whole), backward %d all-reduce%s (%.3f MB)\n",
           (long long)cfg->train.batch, n_fs, n_fs == 1 ? "" : "s", (double)fwd_sum * b, n_fg,
           n_fg == 1 ? "" : "s", (double)fwd_gather * b, n_bs, n_bs == 1 ? "" : "s",
           (double)bwd_sum * b);
    if (n_frs > 0)
        printf("sequence parallelism, per micro-batch: forward %d reduce-scatter%s (%.3f MB "
               "whole), backward %d all-gather%s (%.3f MB whole) and %d reduce-scatter%s (%.3f MB "
               "whole); the %s gradients summed over the tp ranks once per step\n",
               n_frs, n_frs == 1 ? "" : "s", (double)fwd_rs * b, n_bg, n_bg == 1 ? "" : "s",
               (double)bwd_gather * b, n_brs, n_brs == 1 ? "" : "s", (double)bwd_rs * b,
               shares_all ? "embeddings' and LayerNorms'" : "LayerNorms'");
    if (shares_all)
        printf("sequence parallelism over the whole model: the embeddings, the final LayerNorm, "
               "the head and the loss work on each rank's positions; the loss sums the ranks'\n");
}

/* Stage s's layers into buf: "a..b" for one run, else the list. */
static void stage_layers_text(const int *stage_of, int n, int s, char *buf, size_t len)
{
    int runs = 0, first = -1, last = -1;
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (stage_of[i] != s)
            continue;
        if (first < 0)
            first = i;
        runs += last < 0 || last != i - 1;
        last = i;
        if (o < len)
            o += (size_t)snprintf(buf + o, len - o, o ? ", %d" : "%d", i);
    }
    if (runs == 1)
        snprintf(buf, len, "%d..%d", first, last);
}

/* Each stage's order of forwards and backwards in a step, as the pipeline plans it. */
static dt_status print_orders(const dt_config *cfg, const int *stage_of, int pp, int m)
{
    /* At most 24 bytes per op (dt_pp_order_text), 2 x m ops per run of layers. */
    const size_t len = 24 * 2 * (size_t)m * (size_t)cfg->nlayers + 1;
    char *buf = NULL;
    dt_status st = DT_OK;
    DT_TRY(dt_alloc(len, "pipeline order", (void **)&buf));
    printf("order of each stage (vFj: micro-batch j's forward on virtual stage v, the runs of "
           "layers from the input; vBj: its backward; docs/PIPELINE.md):\n");
    for (int s = 0; s < pp; s++) {
        DT_TRY(dt_pp_order_text(stage_of, cfg->nlayers, pp, m, cfg->parallel.pp_schedule, s, buf,
                                len));
        printf("  stage %d: %s\n", s, buf);
    }
fail:
    dt_free(buf);
    return st;
}

/* Per stage: its layers, its share of the counted arithmetic (what a balanced split
 * evens out), its parameters, and the activations it sends on per sample; then the
 * schedule's bubble in theory. */
static dt_status print_stages(const dt_config *cfg, const dt_shape *shapes,
                              const dt_tp_layer_plan *plan, const int *stage_of, int pp)
{
    double flops[DT_CONFIG_MAX_LAYERS], total = 0.0;
    dt_status st = dt_model_layer_flops(cfg->layers, cfg->nlayers, &shapes[0], flops);
    if (st != DT_OK)
        return st;
    for (int i = 0; i < cfg->nlayers; i++)
        total += flops[i];
    const int rr =
        cfg->parallel.n_pp_split == 0 && cfg->parallel.pp_placement == DT_STAGES_ROUND_ROBIN;
    printf("pipeline of %d stages (%s):\n", pp,
           cfg->parallel.n_pp_split > 0 ? "split points from parallel.pp_split"
           : rr ? "round-robin: layer l on stage l mod pp, each layer a run of its own"
                : "balanced by counted forward and backward arithmetic");
    int crossings = 0;
    for (int s = 0; s < pp; s++) {
        double f = 0.0;
        size_t params = 0;
        int64_t sends = 0;
        for (int i = 0; i < cfg->nlayers; i++) {
            if (stage_of[i] != s)
                continue;
            f += flops[i];
            params += plan[i].params;
            if (i + 1 < cfg->nlayers && stage_of[i + 1] != s) {
                sends += dt_shape_numel(&shapes[i + 1]);
                crossings++;
            }
        }
        char layers[256];
        stage_layers_text(stage_of, cfg->nlayers, s, layers, sizeof layers);
        printf("  stage %d: layers %s, %.1f%% of the arithmetic, %zu parameter bytes on tp "
               "rank 0",
               s, layers, total > 0 ? 100.0 * f / total : 0.0, params * sizeof(float));
        if (sends > 0)
            printf(", sends %lld floats per sample on", (long long)sends);
        printf("\n");
    }
    const int m = dt_config_micro_batches(cfg);
    /* 1F1B holds as many micro-batches on stage 0 as there are runs from its first to the
     * last (pp for a contiguous split). */
    const int deep = crossings + 1,
              held = cfg->parallel.pp_schedule == DT_PP_GPIPE ? m : (deep < m ? deep : m);
    printf("%s schedule, %d micro-batch%s per step: ",
           dt_pp_schedule_name(cfg->parallel.pp_schedule), m, m == 1 ? "" : "es");
    if (crossings == pp - 1)
        printf("bubble (P-1)/(M+P-1) = %.3f of a step in theory, ",
               (double)(pp - 1) / (double)(m + pp - 1));
    else
        printf("each micro-batch crosses between stages %d times each way (docs/PIPELINE.md), ",
               crossings);
    printf("%d micro-batch%s of activations held on stage 0\n", held, held == 1 ? "" : "es");
    return print_orders(cfg, stage_of, pp, m);
}

/* The stage of every layer, as the trainer plans it. */
static dt_status plan_stages(const dt_config *cfg, const dt_shape *input, int tp, int pp,
                             int *stage_of)
{
    int first[DT_CONFIG_MAX_LAYERS];
    const int *given = NULL;
    if (cfg->parallel.n_pp_split > 0) {
        first[0] = 0;
        memcpy(first + 1, cfg->parallel.pp_split, sizeof(int) * (size_t)cfg->parallel.n_pp_split);
        given = first;
    }
    const dt_tp_layout lay = {.size = tp,
                              .rank = 0,
                              .min_weights = cfg->parallel.tp_min_weights,
                              .sequence_parallel = cfg->parallel.sequence_parallel};
    return dt_model_stage_plan(cfg->layers, cfg->nlayers, input, &lay, pp,
                               cfg->parallel.pp_placement, given, stage_of);
}

int dt_cli_explain_layout(const dt_config *cfg)
{
    dt_shape sample;
    dt_tp_layer_plan *plans[1024] = {0};
    dt_shape *shapes = NULL;
    int rc = DT_EXIT_FAIL;
    const int tp = cfg->parallel.tp > 0 ? cfg->parallel.tp : 1;
    if (tp > 1024) {
        fprintf(stderr, "dtrain: --explain-layout: at most 1024 tensor-parallel ranks\n");
        return DT_EXIT_USAGE;
    }
    if (dt_data_sample_shape(cfg, &sample) != DT_OK) {
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
        return DT_EXIT_FAIL;
    }
    const size_t n = (size_t)cfg->nlayers;
    if (dt_alloc(sizeof *shapes * (n + 1), "layout", (void **)&shapes) != DT_OK)
        goto fail;
    for (int r = 0; r < tp; r++) {
        const dt_tp_layout lay = {.size = tp,
                                  .rank = r,
                                  .min_weights = cfg->parallel.tp_min_weights,
                                  .sequence_parallel = cfg->parallel.sequence_parallel};
        if (dt_alloc(sizeof **plans * n, "layout", (void **)&plans[r]) != DT_OK ||
            dt_model_tp_plan(cfg->layers, cfg->nlayers, &sample, &lay, plans[r]) != DT_OK)
            goto fail;
    }
    /* Whole shapes: the plan of one rank, unsplit. */
    dt_model *m = NULL;
    if (dt_model_create(cfg->layers, cfg->nlayers, &sample, 1, &m) != DT_OK)
        goto fail;
    for (size_t i = 0; i <= n; i++)
        shapes[i] = *dt_model_shape(m, (int)i);
    dt_model_free(m);
    const int pp = cfg->parallel.pp > 0 ? cfg->parallel.pp : 1;
    int stage_of[DT_CONFIG_MAX_LAYERS];
    if (pp > 1 && plan_stages(cfg, &shapes[0], tp, pp, stage_of) != DT_OK)
        goto fail;
    printf("dtrain: tensor-parallel layout of %s over %d rank%s ",
           cfg->source[0] ? cfg->source : "the built-in ConvNet", tp, tp == 1 ? "" : "s");
    if (cfg->parallel.tp_min_weights > 0)
        printf("(layers with fewer than %lld weights stay whole: parallel.tp_min_weights)\n",
               (long long)cfg->parallel.tp_min_weights);
    else
        printf("(every linear and conv2d layer with at least %d outputs splits: "
               "parallel.tp_min_weights 0)\n",
               tp);
    print_layers(cfg, shapes, plans, tp, pp > 1 ? stage_of : NULL);
    print_totals(cfg, shapes, plans, tp);
    if (pp > 1 && print_stages(cfg, shapes, plans[0], stage_of, pp) != DT_OK)
        goto fail;
    rc = DT_EXIT_OK;
fail:
    if (rc != DT_EXIT_OK)
        fprintf(stderr, "dtrain: %s\n", dt_last_error());
    for (int r = 0; r < tp; r++)
        dt_free(plans[r]);
    dt_free(shapes);
    return rc;
}
