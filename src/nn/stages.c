/* stages.c — which pipeline stage each layer runs on (model.h): a balanced contiguous
 * split by arithmetic, the round-robin placement (layer l on stage l mod P), or split
 * points given by hand. The pipeline that runs the plan is src/parallel/pipe.c.
 *
 * The cost is counted, not timed: a timing pass would give each rank its own numbers and
 * the ranks could disagree on the split; a count is the same everywhere. */
#include <float.h>

#include "nn/tp.h"

/* Forward and backward arithmetic per sample of a planned layer. */
static double layer_flops(const dt_layer *l)
{
    if (l->spec.kind == DT_LAYER_CAUSAL_ATTENTION) {
        /* Half of the T x T scores and products with v, each 2 E multiply-adds, forward;
         * backward recomputes the scores and takes four products. */
        const double T = (double)l->out.d[0], E = (double)l->out.d[1];
        return 7.0 * T * T * E;
    }
    if (l->spec.kind == DT_LAYER_BLOCK) {
        /* Its four products (12 E^2 multiply-adds per position) three times over, and the
         * attention's, as above. */
        const double T = (double)l->out.d[0], E = (double)l->out.d[1];
        return 3.0 * 2.0 * 12.0 * E * E * T + 7.0 * T * T * E;
    }
    if (l->spec.kind == DT_LAYER_LM_HEAD)
        return 3.0 * 2.0 * (double)l->spec.vocab * (double)l->spec.out_features *
               (l->in.ndim == 2 ? (double)l->in.d[0] : 1.0);
    if (l->weight_count == 0 || l->spec.kind == DT_LAYER_EMBEDDING ||
        l->spec.kind == DT_LAYER_POSITION || l->spec.kind == DT_LAYER_LAYERNORM)
        return 2.0 * (double)l->out_numel;
    /* Each weight meets each output position once: a linear layer's outputs are its rows
     * (T of them per sample on a (T, E) input), a convolution's weights slide over its
     * H x W outputs. */
    const double positions = l->spec.kind == DT_LAYER_CONV2D ? (double)(l->out.d[1] * l->out.d[2])
                             : l->in.ndim == 2               ? (double)l->in.d[0]
                                                             : 1.0;
    return 3.0 * 2.0 * (double)l->weight_count * positions;
}

dt_status dt_model_layer_flops(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                               double *flops)
{
    DT_ASSERT(specs != NULL && input != NULL && flops != NULL && nlayers >= 1);
    dt_status st = DT_OK;
    dt_layer *layers = NULL;
    dt_shape *shapes = NULL;
    DT_TRY(dt_alloc(sizeof *layers * (size_t)nlayers, "stage plan", (void **)&layers));
    DT_TRY(dt_alloc(sizeof *shapes * (size_t)(nlayers + 1), "stage plan", (void **)&shapes));
    shapes[0] = *input;
    DT_TRY(dt_tp_plan_layers(layers, specs, nlayers, shapes, NULL));
    for (int i = 0; i < nlayers; i++)
        flops[i] = layer_flops(&layers[i]);
fail:
    dt_free(layers);
    dt_free(shapes);
    return st;
}

dt_status dt_model_plan_shapes(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                               dt_shape *shapes)
{
    DT_ASSERT(specs != NULL && input != NULL && shapes != NULL && nlayers >= 1);
    dt_status st = DT_OK;
    dt_layer *layers = NULL;
    DT_TRY(dt_alloc(sizeof *layers * (size_t)nlayers, "shape plan", (void **)&layers));
    shapes[0] = *input;
    DT_TRY(dt_tp_plan_layers(layers, specs, nlayers, shapes, NULL));
fail:
    dt_free(layers);
    return st;
}

/* The contiguous split of flops[0..n) into `stages` non-empty runs whose largest sum is
 * smallest (the linear partition problem, by dynamic programming over prefixes; n is at
 * most a few dozen layers). best[s][i]: the least largest sum splitting the first i layers
 * into s runs; cut[s][i]: where its last run begins. Ties keep the earliest cut. */
static dt_status balance(const double *flops, const unsigned char *cuttable, int n, int stages,
                         int *stage_of)
{
    dt_status st = DT_OK;
    double *best = NULL, *prefix = NULL;
    int *cut = NULL;
    const size_t cells = (size_t)(stages + 1) * (size_t)(n + 1);
    DT_TRY(dt_alloc(sizeof *best * cells, "stage plan", (void **)&best));
    DT_TRY(dt_alloc(sizeof *cut * cells, "stage plan", (void **)&cut));
    DT_TRY(dt_alloc(sizeof *prefix * (size_t)(n + 1), "stage plan", (void **)&prefix));
    prefix[0] = 0.0;
    for (int i = 0; i < n; i++)
        prefix[i + 1] = prefix[i] + flops[i];
#define AT(s, i) ((size_t)(s) * (size_t)(n + 1) + (size_t)(i))
    for (int i = 0; i <= n; i++)
        best[AT(1, i)] = prefix[i];
    for (int s = 2; s <= stages; s++) {
        for (int i = s; i <= n; i++) {
            double least = DBL_MAX; /* DBL_MAX: no split keeps every block whole */
            int where = s - 1;
            for (int j = s - 1; j < i; j++) { /* the last run is layers [j, i) */
                if (!cuttable[j] || best[AT(s - 1, j)] == DBL_MAX)
                    continue;
                const double run = prefix[i] - prefix[j];
                const double worst = best[AT(s - 1, j)] > run ? best[AT(s - 1, j)] : run;
                if (worst < least) {
                    least = worst;
                    where = j;
                }
            }
            best[AT(s, i)] = least;
            cut[AT(s, i)] = where;
        }
    }
    if (best[AT(stages, n)] == DBL_MAX) {
        st = dt_fail(DT_ERR_INVALID,
                     "parallel.pp: no split into %d stages keeps every tensor-parallel block "
                     "whole (a stage may not begin or end inside one): use fewer stages",
                     stages);
        goto fail;
    }
    /* Walk the cuts back from the whole model. */
    int end = n;
    for (int s = stages; s >= 1; s--) {
        const int begin = s == 1 ? 0 : cut[AT(s, end)];
        for (int i = begin; i < end; i++)
            stage_of[i] = s - 1;
        end = begin;
    }
#undef AT
fail:
    dt_free(best);
    dt_free(cut);
    dt_free(prefix);
    return st;
}

/* A stage may begin at layer i unless i works on part of its input (a tensor-parallel
 * block's row or shard layer) or layer i - 1 leaves its output split. */
static void plan_cuts(const dt_layer *layers, int n, unsigned char *cuttable)
{
    cuttable[0] = 1;
    for (int i = 1; i < n; i++) {
        const dt_tp_role in = layers[i].tp.role, before = layers[i - 1].tp.role;
        const int starts_in = in == DT_TP_SHARD || in == DT_TP_ROW;
        const int ends_in =
            !layers[i - 1].tp.gather && (before == DT_TP_COLUMN || before == DT_TP_SHARD);
        cuttable[i] = !starts_in && !ends_in;
    }
}

/* Every boundary between stages of stage_of must be cuttable. */
static dt_status check_cuts(const unsigned char *cuttable, int n, const int *stage_of)
{
    for (int i = 1; i < n; i++)
        if (stage_of[i] != stage_of[i - 1] && !cuttable[i])
            return dt_fail(DT_ERR_INVALID,
                           "parallel.pp_split: stage %d would begin at layer %d, inside a "
                           "tensor-parallel block (layer %d works on part of its input, or "
                           "layer %d leaves its output split): move the split point",
                           stage_of[i], i, i, i - 1);
    return DT_OK;
}

static dt_status explicit_split(int n, int stages, const int *first, int *stage_of)
{
    if (first[0] != 0)
        return dt_fail(DT_ERR_INVALID,
                       "parallel.pp_split: the first stage must begin at layer 0, not %d",
                       first[0]);
    for (int s = 1; s < stages; s++)
        if (first[s] <= first[s - 1] || first[s] >= n)
            return dt_fail(DT_ERR_INVALID,
                           "parallel.pp_split: stage %d begins at layer %d, after stage %d's "
                           "layer %d and before the last layer (%d): every stage needs a layer",
                           s, first[s], s - 1, first[s - 1], n - 1);
    for (int s = 0; s < stages; s++) {
        const int end = s + 1 < stages ? first[s + 1] : n;
        for (int i = first[s]; i < end; i++)
            stage_of[i] = s;
    }
    return DT_OK;
}

dt_status dt_model_stage_plan(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                              const dt_tp_layout *tp, int stages, dt_stage_split how,
                              const int *first, int *stage_of)
{
    DT_ASSERT(specs != NULL && input != NULL && stage_of != NULL && nlayers >= 1);
    dt_status st = DT_OK;
    double *flops = NULL;
    dt_layer *layers = NULL;
    dt_shape *shapes = NULL;
    unsigned char *cuttable = NULL;
    if (stages < 1 || stages > nlayers)
        return dt_fail(DT_ERR_INVALID,
                       "parallel.pp: %d pipeline stages for a model of %d layers: every stage "
                       "needs at least one layer",
                       stages, nlayers);
    DT_TRY(dt_alloc(sizeof *flops * (size_t)nlayers, "stage plan", (void **)&flops));
    DT_TRY(dt_alloc(sizeof *layers * (size_t)nlayers, "stage plan", (void **)&layers));
    DT_TRY(dt_alloc(sizeof *shapes * (size_t)(nlayers + 1), "stage plan", (void **)&shapes));
    DT_TRY(dt_alloc((size_t)nlayers, "stage plan", (void **)&cuttable));
    /* The model must plan, whatever the split: its errors come first. */
    DT_TRY(dt_model_layer_flops(specs, nlayers, input, flops));
    shapes[0] = *input;
    DT_TRY(dt_tp_plan_layers(layers, specs, nlayers, shapes, tp));
    plan_cuts(layers, nlayers, cuttable);
    if (first != NULL)
        DT_TRY(explicit_split(nlayers, stages, first, stage_of));
    else if (how == DT_STAGES_ROUND_ROBIN)
        for (int i = 0; i < nlayers; i++)
            stage_of[i] = i % stages;
    else
        DT_TRY(balance(flops, cuttable, nlayers, stages, stage_of));
    DT_TRY(check_cuts(cuttable, nlayers, stage_of));
fail:
    dt_free(flops);
    dt_free(layers);
    dt_free(shapes);
    dt_free(cuttable);
    return st;
}
