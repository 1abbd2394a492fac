/* cmd_plan.c — `dtrain plan [CONFIG] --ranks N [layout options] (--bandwidth GB/s --latency us
 * | --from bench-comm.jsonl)`: the communication a training step of CONFIG makes on the layout,
 * in bytes and in predicted time, from a link's bandwidth B and latency α (measured by
 * bench-comm). One process, no MPI: the layout is planned as on the ranks (docs/USER_GUIDE.md
 * has the formulas).
 *
 *   data parallelism, ring all-reduce of the gradients over d ranks, bucket by bucket (ddp's
 *   buckets, sizes b):
 *       T = sum over buckets of 2(d-1)/d * b/B(b) + 2(d-1) * α   (ZeRO-1: reduce-scatter +
 *       all-gather, the same)
 *   B(b) is the given bandwidth, or the measured one at b's size (plan_link.h).
 *   tensor parallelism, per micro-batch: all-reduces of X bytes over t ranks as above, and
 *       all-gathers of a whole activation X: (t-1)/t * X/B + (t-1) * α (under sequence
 *       parallelism X holds t shares of ceil(T/t) positions: the shares are padded)
 *   sequence parallelism, once a step: an all-reduce over t ranks of each tensor used on a
 *       rank's positions only (LayerNorms, embeddings, the head's copy of the table)
 *   pipeline, per micro-batch and cut the stage lies on: the activation forward and its
 *       gradient back, 2 * (X/B + α) (X a rank's share of the positions under sequence
 *       parallelism)
 *   a GPT's table and head on two stages: its gradient all-reduced between them, once a step.
 * With a pipeline each stage is predicted apart (its layers, its gradients, its cuts) and
 * the total is the busiest stage's: stages communicate at the same time.
 *
 * What it leaves out is said with the prediction: computation, and with it how much of the
 * gradient all-reduce backward hides (none with parallel.overlap off), and the pipeline's
 * bubble. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dtrain/dtrain.h"
#include "plan_link.h"

static const dt_cli_option plan_opts[] = {
    {"--set", "KEY=VALUE", DT_OPT_SET, NULL, "override any config key"},
    {"--ranks", "N", DT_OPT_STRING, "ranks", "ranks in the job (default dp x tp x pp, or 1)"},
    {"--dp", "N", DT_OPT_CONFIG_KEY, "parallel.dp", "data-parallel ranks (0: all left)"},
    {"--tp", "N", DT_OPT_CONFIG_KEY, "parallel.tp", "tensor-parallel ranks"},
    {"--pp", "N", DT_OPT_CONFIG_KEY, "parallel.pp", "pipeline stages"},
    {"--pp-split", "HOW", DT_OPT_CONFIG_KEY, "parallel.pp_split",
     "balanced, round_robin, or the first layer of each later stage ('4,7')"},
    {"--micro-batches", "M", DT_OPT_CONFIG_KEY, "parallel.micro_batches", "micro-batches per step"},
    {"--batch", "N", DT_OPT_CONFIG_KEY, "train.batch", "samples per micro-batch on each rank"},
    {"--zero", "0|1|3", DT_OPT_CONFIG_KEY, "parallel.zero", "ZeRO stage"},
    {"--sequence-parallel", NULL, DT_OPT_CONFIG_ON, "parallel.sequence_parallel",
     "with --tp: a GPT's blocks share their positions (all-gathers and reduce-scatters)"},
    {"--strategy", "S", DT_OPT_CONFIG_KEY, "parallel.strategy",
     "one of the strategies listed below (each predicts its own messages; fedavg's are not "
     "modelled)"},
    {"--servers", "K", DT_OPT_CONFIG_KEY, "parallel.servers", "ps: server ranks (of --ranks)"},
    {"--compress", "MODE", DT_OPT_CONFIG_KEY, "parallel.compress",
     "none, fp16, bf16, topk:RATIO or powersgd:RANK"},
    {"--bandwidth", "GB/s", DT_OPT_STRING, "bandwidth", "the link's bandwidth B"},
    {"--latency", "US", DT_OPT_STRING, "latency", "the link's latency per message, microseconds"},
    {"--json", "FILE", DT_OPT_STRING, "json",
     "also write each row as a JSON object to FILE: its stage (-1 without a pipeline), the "
     "group whose collectives carry it (as --trace names them), bytes and ms"},
    {"--from", "FILE", DT_OPT_STRING, "from",
     "take B and the latency from bench-comm --json output: each message's B from the auto "
     "all-reduce's time at its size, the latency from the smallest size's time"},
};
#define N_PLAN_OPTS ((int)(sizeof plan_opts / sizeof plan_opts[0]))

typedef struct layout {
    int world, dp, tp, pp, micro;
    int servers; /* ps: the last ranks; dp is then the workers */
    int64_t batch;
} layout;

/* Rank 0's positions of T shared among tp ranks: the largest share, what every rank's is
 * padded to in an all-gather or reduce-scatter (block.c), and what a cut sends. */
static int64_t first_share(int64_t T, int tp)
{
    int64_t lo, hi;
    dt_tp_part(T, 1, tp, 0, &lo, &hi);
    return hi - lo;
}

/* Where the rows go: stdout's table, and with --json one JSON object per row. A row belongs
 * to a stage (-1 without a pipeline) and names the group whose collectives carry it, as the
 * trace names them (the grid's axes, dt_grid_axis_name; "embedding group"; ps's own). */
typedef struct sink {
    FILE *json;
    int stage;
    const char *group; /* the strategy's rows' group */
} sink;

static void emit(const sink *k, const char *group, const char *what, double bytes, double s)
{
    /* a stage's rows indented under its heading, the numbers in the same columns */
    const int in = k->stage >= 0 ? 4 : 2;
    printf("%*s%-*s %12.3f MB %12.3f ms\n", in, "", 54 - in, what, bytes / 1e6, s * 1e3);
    if (k->json != NULL)
        fprintf(k->json,
                "{\"stage\": %d, \"group\": \"%s\", \"what\": \"%s\", \"bytes\": %.0f, "
                "\"ms\": %.6f}\n",
                k->stage, group, what, bytes, s * 1e3);
}

/* dt_strategy_predict's rows, into the sink under the strategy's group. */
static void strategy_row(void *ctx, const char *what, double bytes, double seconds)
{
    const sink *k = ctx;
    emit(k, k->group, what, bytes, seconds);
}

/* A row of the refusal's probe (make_layout): one replica sends nothing. */
static void ignore_row(void *ctx, const char *what, double bytes, double seconds)
{
    (void)ctx, (void)what, (void)bytes, (void)seconds;
}

/* ddp's buckets (src/parallel/ddp.c) on stage s: layers from the last, a bucket closed at the
 * first layer boundary where it holds its cap (the first bucket's is first_bucket_mb).
 * Returns their count; bucket[] their bytes. */
static int plan_buckets(const dt_config *cfg, const double *params, const int *stage_of, int s,
                        double *bucket)
{
    const double first = cfg->parallel.first_bucket_mb * 1048576.0,
                 cap = cfg->parallel.bucket_cap_mb * 1048576.0;
    int nb = 0, open = 0;
    for (int i = cfg->nlayers - 1; i >= 0; i--) {
        const double b = stage_of[i] == s ? params[i] * sizeof(float) : 0.0;
        if (b == 0)
            continue;
        if (!open)
            bucket[nb++] = 0, open = 1;
        bucket[nb - 1] += b;
        if (bucket[nb - 1] >= (nb == 1 ? first : cap))
            open = 0;
    }
    return nb;
}

/* The model's plan, where every stage's prediction reads it. */
typedef struct model_plan {
    const dt_config *cfg;
    const dt_shape *shapes;              /* the whole model's activations, per sample */
    const dt_tp_layer_plan *plan;        /* tp rank 0's part of every layer */
    const int *stage_of;                 /* each layer's stage */
    double params[DT_CONFIG_MAX_LAYERS]; /* each layer's parameters on its stage */
    int tied;                            /* a GPT whose table and head are on two stages */
    dt_gpt_form gpt;
    double psgd_p, psgd_q;  /* PowerSGD's bytes (dt_compress_psgd_bytes), or 0 */
    dt_strategy_options so; /* the strategy predicting its own rows */
} model_plan;

/* The messages of stage s (its tp rank 0: the largest part where a split is uneven) in one
 * step, emitted row by row; returns their predicted seconds. The tp collectives and the
 * pipeline's messages are per micro-batch; the gradients' once a step. */
static double predict_stage(const model_plan *mp, int s, const layout *y, const dt_link_model *l,
                            const sink *k)
{
    const dt_config *cfg = mp->cfg;
    const dt_shape *shapes = mp->shapes;
    const dt_tp_layer_plan *plan = mp->plan;
    double total = 0, bucket[DT_CONFIG_MAX_LAYERS];
    char what[128];
    const int nb = plan_buckets(cfg, mp->params, mp->stage_of, s, bucket);
    double grad = 0, fetch = 0;
    int fetches = 0;
    for (int b = 0; b < nb; b++)
        grad += bucket[b];
    /* ZeRO-3's layers (a whole model on one stage): each reads its parameters, a head that
     * shares the embedding's table (model_window.c) reads the table. */
    for (int i = 0; i < cfg->nlayers; i++) {
        const int head = mp->gpt.vocab > 0 && i == mp->gpt.head && !mp->tied;
        const double n = head ? (double)mp->gpt.vocab * (double)mp->gpt.embd : mp->params[i];
        if (mp->stage_of[i] == s && n > 0)
            fetch += n * sizeof(float), fetches++;
    }
    /* The strategy's own messages (its registry row's prediction), then the grid's axes. */
    double t = 0;
    const dt_predict_input step = {.world = y->world,
                                   .dp = y->dp,
                                   .apart = y->servers,
                                   .grad_bytes = grad,
                                   .bucket = bucket,
                                   .nbuckets = nb,
                                   .psgd_p_bytes = mp->psgd_p,
                                   .psgd_q_bytes = mp->psgd_q,
                                   .link = l,
                                   .fetch_bytes = fetch,
                                   .fetches = fetches,
                                   .micro = y->micro};
    /* make_layout asked it already: a strategy without a prediction was refused there */
    if (dt_strategy_predict(&mp->so, &step, strategy_row, (void *)k, &t) == DT_OK)
        total += t;
    const double mb = (double)y->batch * sizeof(float);
    double tp_bytes = 0, tp_s = 0, seen_params = 0, sum_bytes = 0, sum_s = 0;
    int sums = 0;
    for (int i = 0; y->tp > 1 && i < cfg->nlayers; i++) {
        /* A layer after one with parameters passes its input's gradient back (on a later
         * stage too: it goes to the stage before). */
        const int mine = mp->stage_of[i] == s;
        const double before = seen_params;
        seen_params += (double)plan[i].whole_params;
        if (!mine)
            continue;
        const double out = (double)dt_shape_numel(&shapes[i + 1]) * mb,
                     in = (double)dt_shape_numel(&shapes[i]) * mb;
        if (plan[i].role == DT_TP_ROW)
            tp_bytes += out, tp_s += dt_link_allreduce(l, out, y->tp);
        if (plan[i].gather)
            tp_bytes += out, tp_s += dt_link_allgather(l, out, y->tp);
        if (plan[i].role == DT_TP_COLUMN && before > 0)
            tp_bytes += in, tp_s += dt_link_allreduce(l, in, y->tp);
        if (plan[i].role == DT_TP_HEADS && !plan[i].sequence) /* 2 forward, 2 backward */
            tp_bytes += 2 * (out + in),
                tp_s += 2 * (dt_link_allreduce(l, out, y->tp) + dt_link_allreduce(l, in, y->tp));
        if (plan[i].role == DT_TP_HEADS && plan[i].sequence) {
            /* sequence parallelism (model.h): 6 all-gathers and 4 reduce-scatters of the
             * whole (T, E), one more all-gather at each end of a run of blocks; a ring
             * reduce-scatter costs what a ring all-gather of the same whole does. Each rank's
             * share is padded to the largest, ceil(T / tp) positions (block.c). */
            const int64_t T = shapes[i + 1].d[0];
            const double whole = out / (double)T * (double)(first_share(T, y->tp) * y->tp);
            const int ag = 6 + plan[i].seq_out_whole + (plan[i].seq_in_whole && before > 0);
            tp_bytes += (ag + 4) * whole;
            tp_s += (ag + 4) * dt_link_allgather(l, whole, y->tp);
        }
        if (!plan[i].sequence)
            continue;
        /* Sequence parallelism: the tensors a rank used on its positions only (its
         * LayerNorms', a block's two; the embeddings' and the head's copy) have partial
         * gradients, each summed over the group once a step (tp_group.c). */
        const double E = (double)shapes[i].d[shapes[i].ndim - 1];
        /* ZeRO-3 (zero3.c) sums each layer's as its backward hands them over, every
         * micro-batch, the head's share of the table it reads as well. */
        const int zero3 = cfg->parallel.zero == 3,
                  head = zero3 && mp->gpt.vocab > 0 && i == mp->gpt.head && !mp->tied;
        const double n = plan[i].role == DT_TP_HEADS ? 4 * E
                         : head                      ? (double)mp->gpt.vocab * mp->gpt.embd
                                                     : mp->params[i];
        const int tensors = plan[i].role == DT_TP_HEADS                 ? 4
                            : cfg->layers[i].kind == DT_LAYER_LAYERNORM ? 2
                                                                        : (n > 0 ? 1 : 0);
        const int times = zero3 ? y->micro : 1;
        for (int j = 0; j < tensors; j++) {
            const double b = n / tensors * sizeof(float);
            sum_bytes += times * b, sum_s += times * dt_link_allreduce(l, b, y->tp);
        }
        sums += times * tensors;
    }
    if (y->tp > 1) {
        snprintf(what, sizeof what, "tp activations, %d micro-batch%s", y->micro,
                 y->micro == 1 ? "" : "es");
        emit(k, dt_grid_axis_name(DT_GRID_TP), what, tp_bytes * y->micro, tp_s * y->micro);
        total += tp_s * y->micro;
    }
    if (sums > 0) {
        snprintf(what, sizeof what, "tp sums of %d position-shared gradients", sums);
        emit(k, dt_grid_axis_name(DT_GRID_TP), what, sum_bytes, sum_s);
        total += sum_s;
    }
    /* The pipeline: each cut this stage lies on sends the activation one way and receives
     * its gradient the other (or the reverse); where the layer before the cut leaves its
     * output on the ranks' shares of the positions (sequence parallelism), a rank's share. */
    double pp_bytes = 0, pp_s = 0;
    for (int i = 1; y->pp > 1 && i < cfg->nlayers; i++)
        if (mp->stage_of[i] != mp->stage_of[i - 1] &&
            (mp->stage_of[i] == s || mp->stage_of[i - 1] == s)) {
            double x = (double)dt_shape_numel(&shapes[i]) * mb;
            if (plan[i - 1].sequence && !plan[i - 1].seq_out_whole)
                x = x / (double)shapes[i].d[0] * (double)first_share(shapes[i].d[0], y->tp);
            pp_bytes += 2 * x;
            pp_s += 2 * dt_link_message(l, x);
        }
    if (y->pp > 1) {
        snprintf(what, sizeof what, "pp activations and their gradients, %d micro-batch%s",
                 y->micro, y->micro == 1 ? "" : "es");
        emit(k, dt_grid_axis_name(DT_GRID_PP), what, pp_bytes * y->micro, pp_s * y->micro);
        total += pp_s * y->micro;
    }
    /* A GPT's tied table on two stages: its two gradients summed between them once a step
     * (the embedding group, src/parallel/tie.c). */
    if (mp->tied && (mp->stage_of[mp->gpt.wte] == s || mp->stage_of[mp->gpt.head] == s)) {
        const double table = (double)mp->gpt.vocab * (double)mp->gpt.embd * sizeof(float);
        const double ts = dt_link_allreduce(l, table, 2);
        emit(k, "embedding group", "the tied table's gradient (embedding group)", table, ts);
        total += ts;
        if (cfg->parallel.zero == 3 && y->dp > 1) { /* gathered from the slices first */
            const double gs = dt_link_allgather(l, table, y->dp);
            emit(k, dt_grid_axis_name(DT_GRID_DP),
                 "dp all-gather of the tied table's gradient (ZeRO-3)", table, gs);
            total += gs;
        }
    }
    return total;
}

/* The step's communication, stage by stage (one without a pipeline); returns the predicted
 * seconds of the busiest stage, and its index in *busiest. */
static double predict(const dt_config *cfg, const dt_shape *shapes, const dt_tp_layer_plan *plan,
                      const int *stage_of, const double psgd[2], const layout *y,
                      const dt_link_model *l, FILE *json, int *busiest)
{
    static model_plan mp; /* DT_CONFIG_MAX_LAYERS doubles: not on the stack */
    memset(&mp, 0, sizeof mp);
    mp.cfg = cfg, mp.shapes = shapes, mp.plan = plan, mp.stage_of = stage_of;
    mp.psgd_p = psgd[0], mp.psgd_q = psgd[1];
    for (int i = 0; i < cfg->nlayers; i++)
        mp.params[i] = (double)plan[i].params;
    if (dt_gpt_form_of(cfg->layers, cfg->nlayers, &mp.gpt) == DT_OK) {
        /* The head on a stage without the table holds a copy of it (model.c's ties). */
        mp.tied = y->pp > 1 && stage_of[mp.gpt.wte] != stage_of[mp.gpt.head];
        if (mp.tied)
            mp.params[mp.gpt.head] = (double)mp.gpt.vocab * (double)mp.gpt.embd;
    }
    dt_error_clear(); /* not a GPT: no tied table */
    /* The strategy's rows travel in its group: the grid's dp axis, or ps's own ("ps"). */
    dt_config_strategy_options(cfg, &mp.so);
    const char *group = y->servers > 0 ? mp.so.strategy : dt_grid_axis_name(DT_GRID_DP);
    double worst = -1;
    *busiest = 0;
    for (int s = 0; s < y->pp; s++) {
        const sink k = {.json = json, .stage = y->pp > 1 ? s : -1, .group = group};
        if (y->pp > 1)
            printf("  stage %d:\n", s);
        const double t = predict_stage(&mp, s, y, l, &k);
        if (t > worst)
            worst = t, *busiest = s;
    }
    return worst;
}

/* B and α from the options. */
/* --ranks N: the whole of TEXT as a whole number from 1 to 2^24; 0 when it is not one. */
static int ranks_number(const char *text)
{
    long long v = 0;
    return dt_cli_whole(text, 1, 1LL << 24, &v) ? (int)v : 0;
}

static int link_of(const dt_cli_values *v, double bytes, dt_link_model *l)
{
    const char *from = dt_cli_string(v, "from"), *bw = dt_cli_string(v, "bandwidth"),
               *lat = dt_cli_string(v, "latency");
    if (from != NULL) {
        if (dt_plan_link_read(from, bytes, l) != 0) {
            fprintf(stderr, "dtrain plan: %s\n", dt_last_error());
            return DT_EXIT_FAIL;
        }
    } else if (bw == NULL || lat == NULL) {
        fprintf(stderr, "dtrain plan: give --bandwidth and --latency, or --from FILE\n");
        return DT_EXIT_USAGE;
    } else {
        double gbs = 0, us = 0;
        if (!dt_cli_real(bw, 0, DBL_MAX, &gbs) || !(gbs > 0)) {
            fprintf(stderr, "dtrain plan: --bandwidth: '%s' is not a bandwidth in GB/s > 0\n", bw);
            return DT_EXIT_USAGE;
        }
        if (!dt_cli_real(lat, 0, DBL_MAX, &us)) {
            fprintf(stderr, "dtrain plan: --latency: '%s' is not a latency in microseconds >= 0\n",
                    lat);
            return DT_EXIT_USAGE;
        }
        l->bw = gbs * 1e9;
        l->alpha = us * 1e-6;
    }
    if (!(l->bw > 0) || !(l->alpha >= 0)) {
        fprintf(stderr, "dtrain plan: the bandwidth must be positive, the latency not negative\n");
        return DT_EXIT_USAGE;
    }
    return DT_EXIT_OK;
}

static int make_layout(const dt_config *cfg, const dt_cli_values *v, layout *y)
{
    y->tp = cfg->parallel.tp > 0 ? cfg->parallel.tp : 1;
    y->pp = cfg->parallel.pp > 0 ? cfg->parallel.pp : 1;
    const char *ranks = dt_cli_string(v, "ranks");
    dt_strategy_options so;
    dt_config_strategy_options(cfg, &so);
    /* A strategy whose messages are not modelled is refused before anything is printed:
     * one replica sends nothing, so this asks without a link. */
    const dt_predict_input none = {.world = 1, .dp = 1};
    double zero = 0;
    if (dt_strategy_predict(&so, &none, ignore_row, NULL, &zero) != DT_OK) {
        fprintf(stderr, "dtrain plan: %s\n", dt_last_error());
        return DT_EXIT_USAGE;
    }
    y->servers = dt_strategy_apart(&so);
    if (y->servers > 0) {
        y->world = ranks != NULL ? ranks_number(ranks) : 0;
        y->dp = y->world - y->servers;
        y->micro = dt_config_micro_batches(cfg);
        y->batch = cfg->train.batch;
        if (ranks == NULL || y->dp < 1 || y->tp * y->pp != 1) {
            fprintf(stderr,
                    "dtrain plan: %s needs --ranks N with N > --servers (%d), and no tp "
                    "or pp\n",
                    so.strategy, y->servers);
            return DT_EXIT_USAGE;
        }
        return DT_EXIT_OK;
    }
    y->world = ranks != NULL ? ranks_number(ranks)
                             : (cfg->parallel.dp > 0 ? cfg->parallel.dp : 1) * y->tp * y->pp;
    y->dp = cfg->parallel.dp > 0 ? cfg->parallel.dp : y->world / (y->tp * y->pp);
    y->micro = dt_config_micro_batches(cfg);
    y->batch = cfg->train.batch;
    if (y->world < 1) {
        fprintf(stderr, "dtrain plan: --ranks: '%s' is not a number of ranks from 1 to 16777216\n",
                ranks);
        return DT_EXIT_USAGE;
    }
    if (y->tp * y->pp > y->world) {
        fprintf(stderr, "dtrain plan: tp %d x pp %d = %d ranks exceed --ranks %d\n", y->tp, y->pp,
                y->tp * y->pp, y->world);
        return DT_EXIT_USAGE;
    }
    if (y->dp < 1 || y->dp * y->tp * y->pp != y->world) {
        fprintf(stderr, "dtrain plan: dp %d x tp %d x pp %d = %d does not fill --ranks %d\n", y->dp,
                y->tp, y->pp, y->dp * y->tp * y->pp, y->world);
        return DT_EXIT_USAGE;
    }
    return DT_EXIT_OK;
}

static void help(FILE *out)
{
    dt_cli_print_help(out, "dtrain plan [CONFIG] --ranks N [options]",
                      "Predicts the communication of one training step of CONFIG on a layout\n"
                      "from a link's bandwidth and latency (measure them with bench-comm):\n"
                      "ring all-reduce T = 2(n-1)/n * S/B + 2(n-1) * alpha, and so on\n"
                      "(docs/USER_GUIDE.md). Computation is not predicted.",
                      plan_opts, N_PLAN_OPTS, 0);
}

int dt_cmd_plan(int argc, char **argv)
{
    dt_config cfg = dt_config_default();
    dt_cli_values vals;
    int rc = dt_cli_parse("plan", plan_opts, N_PLAN_OPTS, argc, argv, &cfg, &vals, 1);
    if (rc == -1) {
        help(stdout);
        return DT_EXIT_OK;
    }
    layout y;
    dt_link_model l;
    memset(&l, 0, sizeof l);
    if (rc != DT_EXIT_OK)
        return rc;
    /* The config train would take, with the same verdict on keys that change nothing: a
     * plan of --servers under ddp would predict ddp and say nothing. */
    if (dt_config_check(&cfg) != DT_OK) {
        fprintf(stderr, "dtrain plan: %s\n", dt_last_error());
        return DT_EXIT_USAGE;
    }
    if ((rc = make_layout(&cfg, &vals, &y)) != DT_EXIT_OK)
        return rc;
    dt_shape sample;
    dt_tp_layer_plan plan[DT_CONFIG_MAX_LAYERS];
    dt_shape shapes[DT_CONFIG_MAX_LAYERS + 1];
    int stage_of[DT_CONFIG_MAX_LAYERS] = {0};
    const dt_tp_layout tpl = {.size = y.tp,
                              .rank = 0,
                              .min_weights = cfg.parallel.tp_min_weights,
                              .sequence_parallel = cfg.parallel.sequence_parallel};
    if (dt_data_sample_shape(&cfg, &sample) != DT_OK ||
        dt_model_plan_shapes(cfg.layers, cfg.nlayers, &sample, shapes) != DT_OK ||
        dt_model_tp_plan(cfg.layers, cfg.nlayers, &sample, &tpl, plan) != DT_OK ||
        (y.pp > 1 && dt_config_stage_plan(&cfg, &sample, &tpl, y.pp, stage_of) != DT_OK)) {
        fprintf(stderr, "dtrain plan: %s\n", dt_last_error());
        return DT_EXIT_FAIL;
    }
    /* PowerSGD sends factors of the model's tensors (compression is plain data
     * parallelism's: the whole model's tensors, as its exchange plans them). */
    double psgd[2] = {0, 0};
    if (cfg.parallel.compress.kind == DT_COMPRESS_POWERSGD) {
        dt_model *whole = NULL;
        if (dt_model_describe(cfg.layers, cfg.nlayers, &sample, &whole) != DT_OK) {
            fprintf(stderr, "dtrain plan: %s\n", dt_last_error());
            return DT_EXIT_FAIL;
        }
        dt_compress_psgd_bytes(&cfg.parallel.compress, whole, &psgd[0], &psgd[1]);
        dt_model_free(whole);
    }
    double grad = 0; /* the whole stage 0's gradient bytes on tp rank 0: where B is read */
    for (int i = 0; i < cfg.nlayers; i++)
        grad += stage_of[i] == 0 ? (double)plan[i].params * sizeof(float) : 0.0;
    if ((rc = link_of(&vals, grad, &l)) != DT_EXIT_OK)
        return rc;
    FILE *json = NULL;
    const char *json_path = dt_cli_string(&vals, "json");
    if (json_path != NULL && json_path[0] == '\0') {
        fprintf(stderr, "dtrain plan: --json: the output path is empty\n");
        return DT_EXIT_FAIL;
    }
    if (json_path != NULL && (json = fopen(json_path, "w")) == NULL) {
        fprintf(stderr, "dtrain plan: --json %s: cannot be opened for writing: %s\n", json_path,
                strerror(errno));
        return DT_EXIT_FAIL;
    }
    char at[160] = "";
    if (l.npts > 0)
        snprintf(at, sizeof at,
                 " (bus bandwidth at %.0f bytes; each message at its size from %d sizes "
                 "measured on %d ranks, --gap %.1f ms)",
                 l.at, l.npts, l.ranks, l.gap_ms);
    char lay[96];
    if (y.servers > 0)
        snprintf(lay, sizeof lay, "ps: %d workers, %d server%s", y.dp, y.servers,
                 y.servers == 1 ? "" : "s");
    else
        snprintf(lay, sizeof lay, "dp %d x tp %d x pp %d", y.dp, y.tp, y.pp);
    printf("dtrain plan: %s on %d rank%s (%s, %d micro-batch%s of %lld), "
           "link %.3f GB/s%s, latency %.1f us\n",
           cfg.source[0] ? cfg.source : "the built-in ConvNet", y.world, y.world == 1 ? "" : "s",
           lay, y.micro, y.micro == 1 ? "" : "es", (long long)y.batch, l.bw / 1e9, at,
           l.alpha * 1e6);
    printf("  %-52s %15s %15s\n", "communication per step", "operand bytes", "predicted");
    int busiest = 0;
    const double t = predict(&cfg, shapes, plan, stage_of, psgd, &y, &l, json, &busiest);
    if (y.pp > 1) {
        char what[64];
        snprintf(what, sizeof what, "total (stage %d, the busiest)", busiest);
        printf("  %-52s %15s %12.3f ms\n", what, "", t * 1e3);
    } else {
        printf("  %-52s %15s %12.3f ms\n", "total", "", t * 1e3);
    }
    if (json != NULL) {
        fprintf(json, "{\"total_ms\": %.6f, \"busiest_stage\": %d}\n", t * 1e3,
                y.pp > 1 ? busiest : -1);
        if (fclose(json) != 0) {
            fprintf(stderr, "dtrain plan: --json %s: the write failed\n", json_path);
            return DT_EXIT_FAIL;
        }
    }
    printf(
        "dtrain plan: computation is not predicted: with parallel.overlap on, backward hides "
        "part of the gradient all-reduce; a pipeline adds its bubble. Nor are the step's "
        "exchanges of a few scalars (losses, norms, verdicts: 32 bytes or less from each rank)\n");
    return DT_EXIT_OK;
}
