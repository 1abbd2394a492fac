/* trainer_weights.c — the whole model from a trainer, whatever its layout (train.h): its
 * description, its parameters gathered whole, and its weight files written and read.
 *
 * No rank holds the whole model for a weight file (docs/ARCHITECTURE.md, "checkpoints"). The
 * whole model's tensor table is a description (dt_model_describe: names, shapes and offsets,
 * no buffer). A save takes the tensors in the file's order, each from the pipeline stage
 * that holds it (a tied table from the embedding's stage; the head's copy is not written),
 * gathered over that stage's tensor-parallel group and sent to the main rank, which writes
 * it as it arrives through the streaming writer of checkpoint parts (dt_st_stream). A load
 * reads the file's header, checks it against the whole model, and each rank reads its own
 * tensors. Beyond its own parameters a rank holds one tensor at a time (the largest, whole)
 * and tables of the order of the tensors. dt_trainer_whole_params, the whole buffer on every
 * rank, is for callers that want it (tests comparing layouts); nothing here uses it. */
#include <string.h>

#include "ckpt/st_meta.h"
#include "dtrain/safetensors.h"
#include "dtrain/train.h"
#include "parallel/strategy.h"
#include "train/trainer_internal.h"
#include "train/weights_internal.h"

dt_status dt_trainer_whole_model(dt_trainer *t, const dt_model **out)
{
    *out = t->model;
    if (dt_strategy_get_info(t->strategy)->pp_size == 1)
        return DT_OK;
    /* A stage holds its own layers only: the whole model is described, not built. */
    if (t->whole_model == NULL) {
        dt_status st = dt_model_describe(t->cfg.layers, t->cfg.nlayers, &t->train.sample_shape,
                                         &t->whole_model);
        if (st != DT_OK)
            return st;
    }
    *out = t->whole_model;
    return DT_OK;
}

/* The stage's tensors whole (gathered over the tensor-parallel group), each at its
 * whole_offset in the stage: the stage's parameters when nothing is split. */
static dt_status stage_whole_params(dt_trainer *t, const float **out)
{
    dt_status st = DT_OK;
    *out = dt_model_params(t->model);
    if (dt_strategy_param_slice(t->strategy) != NULL) { /* ZeRO-3: gathered from the slices */
        const size_t n = dt_model_param_count(t->model);
        if (t->stage_whole == NULL)
            DT_TRY(dt_alloc(dt_model_whole_param_count(t->model) * sizeof(float),
                            "whole parameters", (void **)&t->stage_whole));
        if (dt_model_tp_size(t->model) == 1) {
            DT_TRY(dt_strategy_read_params(t->strategy, 0, n, t->stage_whole));
        } else { /* this rank's part, then the tensor-parallel group's parts whole */
            if (t->stage_part == NULL)
                DT_TRY(dt_alloc(n * sizeof(float), "parameters", (void **)&t->stage_part));
            DT_TRY(dt_strategy_read_params(t->strategy, 0, n, t->stage_part));
            DT_TRY(dt_model_gather_buffer(t->model, t->stage_part, t->stage_whole));
        }
        *out = t->stage_whole;
        return DT_OK;
    }
    if (dt_model_tp_size(t->model) == 1)
        return DT_OK;
    if (t->stage_whole == NULL)
        DT_TRY(dt_alloc(dt_model_whole_param_count(t->model) * sizeof(float), "whole parameters",
                        (void **)&t->stage_whole));
    DT_TRY(dt_model_gather_params(t->model, t->stage_whole));
    *out = t->stage_whole;
fail:
    return st;
}

dt_status dt_trainer_whole_params(dt_trainer *t, const float **out)
{
    dt_status st = DT_OK;
    const dt_model *wm = NULL;
    const float *stage = NULL;
    *out = NULL;
    DT_TRY(dt_strategy_sync_params(t->strategy)); /* a parameter server's shards */
    DT_TRY(stage_whole_params(t, &stage));
    if (dt_strategy_get_info(t->strategy)->pp_size == 1) {
        *out = stage;
        return DT_OK;
    }
    /* Each stage puts its tensors at their places in the whole model's buffer, zeros
     * elsewhere; the pipeline combines the stages' buffers exactly. */
    DT_TRY(dt_trainer_whole_model(t, &wm));
    const size_t n = dt_model_param_count(wm);
    if (t->whole == NULL)
        DT_TRY(dt_alloc(n * sizeof(float), "whole parameters", (void **)&t->whole));
    memset(t->whole, 0, n * sizeof(float));
    for (int i = 0; i < dt_model_tensor_count(t->model); i++) {
        const dt_param_info *p = dt_model_tensor(t->model, i);
        if (p->tie == DT_TIE_COPY) /* the embedding's stage puts the table, once */
            continue;
        const dt_param_info *w = dt_model_find_tensor(wm, p->name);
        DT_ASSERT(w != NULL && w->count == p->whole_count);
        memcpy(t->whole + w->offset, stage + p->whole_offset, p->whole_count * sizeof(float));
    }
    DT_TRY(dt_strategy_combine_stages(t->strategy, t->whole, n));
    *out = t->whole;
fail:
    return st;
}

/* ---- a weight file written a tensor at a time ---- */

/* The main rank's file, open with its header: the whole model's tensors in its order (the
 * bytes dt_weights_write gives them). The table (*table, freed by the caller) is the
 * stream's until it ends. */
static dt_status open_file(const dt_model *wm, const char *path, double input_mean,
                           double input_std, dt_st_tensor **table, dt_st_stream **w)
{
    dt_status st = DT_OK;
    const int n = dt_model_tensor_count(wm);
    DT_TRY(dt_alloc(sizeof **table * (size_t)(n > 0 ? n : 1), "weights table", (void **)table));
    for (int i = 0; i < n; i++) {
        const dt_param_info *p = dt_model_tensor(wm, i);
        dt_st_tensor *x = &(*table)[i];
        *x = (dt_st_tensor){.name = p->name,
                            .dtype = DT_ST_F32,
                            .ndim = p->ndim,
                            .nbytes = p->whole_count * sizeof(float)};
        memcpy(x->shape, p->whole_shape, sizeof(int64_t) * (size_t)p->ndim);
    }
    dt_st_weights_meta meta;
    const dt_st_input in = dt_weights_input(wm, input_mean, input_std);
    dt_st_weights_meta_fill(&meta, &in);
    DT_TRY(dt_st_stream_begin(path, *table, n, meta.pairs, meta.npairs, w));
fail:
    return st;
}

/* This rank's tensor `name` whole: in place, or gathered over the tensor-parallel group into
 * room (collective over it for a split tensor); under ZeRO-3 its part first gathered into
 * `part` from the slices that hold it (collective over the data-parallel group). */
static dt_status own_tensor(dt_trainer *t, const char *name, float *room, float *part,
                            const float **out)
{
    dt_model *m = t->model;
    for (int i = 0; i < dt_model_tensor_count(m); i++) {
        const dt_param_info *p = dt_model_tensor(m, i);
        if (strcmp(p->name, name) != 0)
            continue;
        const float *local = dt_model_params(m) + p->offset;
        if (dt_strategy_param_slice(t->strategy) != NULL) { /* ZeRO-3: from the slices */
            dt_status st = dt_strategy_read_params(t->strategy, p->offset, p->count, part);
            if (st != DT_OK)
                return st;
            local = part;
        }
        *out = local;
        if (p->split_dim < 0)
            return DT_OK;
        *out = room;
        return dt_model_gather_tensor(m, i, local, room);
    }
    return dt_fail(DT_ERR_INVALID, "weights: this stage holds no tensor '%s'", name);
}

dt_status dt_trainer_save_weights(dt_trainer *t, const char *path, double input_mean,
                                  double input_std)
{
    dt_status st = DT_OK, mine = DT_OK;
    const dt_strategy_info *si = dt_strategy_get_info(t->strategy);
    const dt_model *wm = NULL;
    dt_st_tensor *table = NULL;
    dt_st_stream *w = NULL;
    float *room = NULL, *part = NULL;
    DT_TRY(dt_strategy_sync_params(t->strategy)); /* a parameter server's shards */
    DT_TRY(dt_trainer_whole_model(t, &wm));
    const int n = dt_model_tensor_count(wm);
    /* The room one tensor takes while it passes: gathered on its stage's tp group, received
     * on the main rank. */
    const int sharded = dt_strategy_param_slice(t->strategy) != NULL; /* ZeRO-3 */
    const int gathers = (si->replica == 0 && dt_model_tp_size(t->model) > 1) || sharded;
    if (gathers || (si->main && si->pp_size > 1)) {
        size_t most = 1;
        for (int k = 0; k < n; k++)
            most = dt_model_tensor(wm, k)->whole_count > most ? dt_model_tensor(wm, k)->whole_count
                                                              : most;
        mine = dt_alloc(most * sizeof(float), "weights tensor", (void **)&room);
        /* ZeRO-3: a rank's part of a tensor, gathered from the slices before its tp gather */
        if (mine == DT_OK && sharded)
            mine = dt_alloc(most * sizeof(float), "weights tensor part", (void **)&part);
    }
    /* The file is opened before any tensor moves, and every rank hears whether it could. */
    if (mine == DT_OK && si->main)
        mine = open_file(wm, path, input_mean, input_std, &table, &w);
    if (mine != DT_OK && si->main)
        dt_error_prefix("weights: %s: ", path);
    DT_TRY(dt_trainer_agree(t, mine));
    /* The file's order, every rank alike: each tensor from the first replica's ranks of the
     * stage that holds it. A write that fails is remembered and the rest still passes, so
     * that no rank is left waiting for the main one. */
    for (int k = 0; k < n; k++) {
        const dt_param_info *p = dt_model_tensor(wm, k);
        const int stage = t->stage_of[p->layer];
        const float *data = NULL;
        if ((si->replica == 0 || sharded) && si->pp_rank == stage)
            DT_TRY(own_tensor(t, p->name, room, part, &data));
        if (stage != 0) {
            DT_TRY(dt_strategy_stage_to_main(t->strategy, stage, data, room, p->whole_count));
            if (si->main)
                data = room;
        }
        if (si->main && mine == DT_OK)
            mine = dt_st_stream_put(w, data, p->whole_count * sizeof(float));
    }
    if (si->main) {
        if (mine == DT_OK)
            mine = dt_st_stream_end(w, NULL, NULL);
        else
            dt_st_stream_abort(w);
        w = NULL; /* ended or aborted: freed */
        if (mine != DT_OK)
            dt_error_prefix("weights: %s: ", path);
    }
    DT_TRY(dt_trainer_agree(t, mine));
fail:
    dt_st_stream_abort(w);
    dt_free(table);
    dt_free(room);
    dt_free(part);
    return st;
}

/* ---- a weight file read a stage at a time ---- */

dt_status dt_trainer_load_weights(dt_trainer *t, const char *path)
{
    dt_st_file *f = NULL;
    const dt_model *wm = NULL;
    /* Checked everywhere before any rank copies: a file refused on one rank (a NaN in
     * another stage's tensor) changes no rank's parameters. */
    dt_status mine = dt_trainer_whole_model(t, &wm);
    if (mine == DT_OK)
        mine = dt_st_open_stream(path, &f);
    if (mine == DT_OK)
        mine = dt_weights_check_part(t->model, wm, f);
    dt_status st = dt_trainer_agree(t, mine);
    size_t lo = 0, n = 0;
    int sharded = 0;
    dt_strategy_optim_range(t->strategy, &lo, &n, &sharded);
    float *slice = dt_strategy_param_slice(t->strategy); /* ZeRO-3: this rank's alone */
    if (st == DT_OK)
        st = dt_trainer_agree(t, slice != NULL ? dt_weights_copy_range(t->model, f, lo, n, slice)
                                               : dt_weights_copy_part(t->model, f));
    dt_st_close(f);
    return st;
}
