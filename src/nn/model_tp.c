/* model_tp.c — which layers of a model are split over a tensor-parallel group, and the
 * collectives around them at run time (model.h says the rules; tp.h the interface).
 *
 * A split activation is a block of dimension 0 of each sample's whole tensor: output
 * features [lo, hi) after a column-parallel linear, channels [lo, hi) after a column-
 * parallel conv2d (each channel's H x W positions contiguous), kept by relu, dropout and
 * maxpool2d, and turned into features [lo H W, hi H W) by flatten, which is exactly the
 * block of the whole flattened tensor, so a row-parallel linear can follow a convolution. */
#include <stdio.h>
#include <string.h>

#include "nn/tp.h"
#include "tensor/kernels.h"

/* These functions have nothing to clean up: a failure returns at once. */
#define TRY_RET(expr)                                                                              \
    do {                                                                                           \
        dt_status try_st_ = (expr);                                                                \
        if (try_st_ != DT_OK)                                                                      \
            return try_st_;                                                                        \
    } while (0)

const char *dt_tp_role_name(dt_tp_role role)
{
    static const char *const names[] = {"whole", "column", "row", "shard", "heads"};
    return (int)role >= 0 && role <= DT_TP_HEADS ? names[role] : "?";
}

/* Part `rank` of `size` of n rows: the first n mod size take one extra. */
static void part(int64_t n, int size, int rank, int64_t *lo, int64_t *hi)
{
    const int64_t base = n / size, extra = n % size;
    *lo = rank * base + (rank < extra ? rank : extra);
    *hi = *lo + base + (rank < extra ? 1 : 0);
}

void dt_tp_part(int64_t whole, int64_t unit, int size, int k, int64_t *lo, int64_t *hi)
{
    part(whole / unit, size, k, lo, hi);
    *lo *= unit;
    *hi *= unit;
}

/* The block boundary i holds: dim-0 rows [lo, hi) of `whole`, or none. The split was
 * made in units of `unit` rows (a column layer's channels, each flattened into H x W
 * features: unit H x W), so every rank's rows follow from dt_tp_part. */
typedef struct block {
    int split;
    int64_t lo, hi, whole, unit;
} block;

static int runs_on_block(dt_layer_kind k)
{
    return k == DT_LAYER_RELU || k == DT_LAYER_DROPOUT || k == DT_LAYER_MAXPOOL2D ||
           k == DT_LAYER_FLATTEN;
}

/* Elements of one dim-0 row of s. */
static int64_t row_numel(const dt_shape *s)
{
    return dt_shape_numel(s) / s->d[0];
}

static void set_params(dt_layer *l, const dt_layer *whole)
{
    l->param_count = l->weight_count + l->bias_count;
    l->tp.params = l->param_count;
    l->tp.whole_params = whole->weight_count + whole->bias_count;
}

/* Column-parallel: this rank's output rows (channels) of the layer planned whole. */
static dt_status plan_column(dt_layer *l, const dt_layer *whole, const dt_tp_layout *tp, block *b)
{
    const int64_t d0 = whole->out.d[0];
    int64_t lo, hi;
    part(d0, tp->size, tp->rank, &lo, &hi);
    if (l->spec.kind == DT_LAYER_LINEAR)
        l->spec.out_features = hi - lo;
    else
        l->spec.out_channels = hi - lo;
    TRY_RET(l->ops->plan(l));
    l->tp = (dt_tp_layer_plan){.role = DT_TP_COLUMN, .begin = lo, .end = hi, .whole_dim = d0};
    l->tp_unit = 1;
    l->elem_offset = lo * row_numel(&l->out);
    *b = (block){.split = 1, .lo = lo, .hi = hi, .whole = d0, .unit = 1};
    return DT_OK;
}

/* A layer whose input is a block: row-parallel (linear) or run on the block. */
static dt_status plan_on_block(dt_layer *l, const dt_layer *whole, block *b)
{
    const int64_t in_row = row_numel(&l->in);
    if (l->spec.kind == DT_LAYER_LINEAR) {
        TRY_RET(l->ops->plan(l));
        l->tp = (dt_tp_layer_plan){.role = DT_TP_ROW,
                                   .begin = b->lo * in_row,
                                   .end = b->hi * in_row,
                                   .whole_dim = whole->in.d[0]};
        l->tp_unit = b->unit * in_row;
        l->bias_after = 1;
        l->fan_in_whole = whole->ops->fan_in(whole);
        *b = (block){0};
        return DT_OK;
    }
    TRY_RET(l->ops->plan(l));
    if (l->spec.kind == DT_LAYER_FLATTEN)
        *b = (block){.split = 1,
                     .lo = b->lo * in_row,
                     .hi = b->hi * in_row,
                     .whole = b->whole * in_row,
                     .unit = b->unit * in_row};
    l->tp = (dt_tp_layer_plan){
        .role = DT_TP_SHARD, .begin = b->lo, .end = b->hi, .whole_dim = b->whole};
    l->tp_unit = b->unit;
    l->elem_offset = b->lo * row_numel(&l->out);
    return DT_OK;
}

/* 1 when every layer of the model works on each position alone, starting from token ids
 * (a GPT: embedding, position, dropout, blocks, LayerNorm, the tied head): under sequence
 * parallelism the whole model then runs on each rank's share of the positions, from the
 * embedding's output to the logits, and the loss is taken on the share (Megatron's SP
 * region reaching the embeddings and the head; dt_model_output_share). Otherwise only runs
 * of blocks hold shares, taking their input whole and gathering their output. */
static int per_position_model(const dt_layer_spec *specs, int n)
{
    int blocks = 0;
    if (n < 1 || specs[0].kind != DT_LAYER_EMBEDDING)
        return 0;
    for (int i = 0; i < n; i++) {
        const dt_layer_kind k = specs[i].kind;
        if (k != DT_LAYER_EMBEDDING && k != DT_LAYER_POSITION && k != DT_LAYER_DROPOUT &&
            k != DT_LAYER_LAYERNORM && k != DT_LAYER_BLOCK && k != DT_LAYER_LM_HEAD)
            return 0;
        blocks += k == DT_LAYER_BLOCK;
    }
    return blocks > 0;
}

/* A layer of a per-position model under sequence parallelism, other than a block: planned
 * on the rank's share of the T positions (the embedding from the whole window's ids). */
static dt_status plan_positions(dt_layer *l, int64_t T, const dt_tp_layout *tp)
{
    l->seq = 1;
    l->seq_len = T;
    if (T < tp->size)
        return dt_fail(DT_ERR_INVALID,
                       "model: layer %d: %lld positions cannot be shared by %d tensor-parallel "
                       "ranks under sequence parallelism (tp may not exceed model.block_size)",
                       l->index, (long long)T, tp->size);
    int64_t lo, hi;
    part(T, tp->size, tp->rank, &lo, &hi);
    l->seq_t0 = lo;
    l->seq_n = hi - lo;
    TRY_RET(l->ops->plan(l));
    if (l->spec.kind == DT_LAYER_EMBEDDING)
        l->out.d[0] = l->seq_n;
    l->tp = (dt_tp_layer_plan){.role = DT_TP_WHOLE,
                               .sequence = 1,
                               .seq_in_whole = l->spec.kind == DT_LAYER_EMBEDDING,
                               .begin = 0,
                               .end = l->out.d[0],
                               .whole_dim = l->out.d[0]};
    l->tp_unit = 1;
    /* dropout's keys: element e of the share is element t0 E + e of the whole sample */
    l->elem_offset = lo * row_numel(&l->out);
    return DT_OK;
}

/* What a layer takes from the rest of the model: lm_head the embedding it is tied to (the
 * one embedding layer before it), a block the number of blocks (its initial values). */
static dt_status resolve_model_refs(dt_layer *l, const dt_layer_spec *specs, int n)
{
    l->tie = -1;
    for (int j = 0; j < n; j++)
        l->model_blocks += specs[j].kind == DT_LAYER_BLOCK;
    if (l->spec.kind != DT_LAYER_LM_HEAD)
        return DT_OK;
    for (int j = 0; j < l->index; j++) {
        if (specs[j].kind != DT_LAYER_EMBEDDING)
            continue;
        if (l->tie >= 0)
            return dt_fail(DT_ERR_INVALID,
                           "model: layer %d (lm_head): layers %d and %d are both embeddings; the "
                           "head shares the table of exactly one",
                           l->index, l->tie, j);
        l->tie = j;
    }
    if (l->tie < 0)
        return dt_fail(DT_ERR_INVALID,
                       "model: layer %d (lm_head) shares the token embedding's table, but no "
                       "embedding layer comes before it",
                       l->index);
    l->spec.vocab = specs[l->tie].vocab;
    l->spec.out_features = specs[l->tie].out_features;
    if (specs[l->tie].name[0] != '\0')
        snprintf(l->tie_name, sizeof l->tie_name, "%.47s.weight", specs[l->tie].name);
    else
        snprintf(l->tie_name, sizeof l->tie_name, "%d.weight", l->tie);
    return DT_OK;
}

dt_status dt_tp_plan_layers(dt_layer *layers, const dt_layer_spec *specs, int n, dt_shape *shapes,
                            const dt_tp_layout *tp)
{
    const dt_tp_layout one = {.size = 1, .rank = 0};
    if (tp == NULL)
        tp = &one;
    if (tp->size < 1 || tp->rank < 0 || tp->rank >= tp->size)
        return dt_fail(DT_ERR_INVALID, "model: tensor-parallel rank %d of %d", tp->rank, tp->size);
    block b = {0};
    /* Sequence parallelism over the whole model (per_position_model): T, else 0. */
    const int64_t seq_T =
        tp->size > 1 && tp->sequence_parallel && per_position_model(specs, n) ? shapes[0].d[0] : 0;
    for (int i = 0; i < n; i++) {
        dt_layer *l = &layers[i];
        memset(l, 0, sizeof *l);
        l->ops = dt_layer_ops_for(specs[i].kind);
        if (l->ops == NULL)
            return dt_fail(DT_ERR_INVALID, "model: layer %d has unknown kind %d", i,
                           (int)specs[i].kind);
        l->spec = specs[i];
        l->index = i;
        TRY_RET(resolve_model_refs(l, specs, n));
        if (b.split && !runs_on_block(l->spec.kind) && l->spec.kind != DT_LAYER_LINEAR) {
            /* A layer that needs its whole input: gather the block before it. */
            layers[i - 1].tp.gather = 1;
            shapes[i].d[0] = b.whole;
            b = (block){0};
        }
        l->in = shapes[i];
        l->in_numel = dt_shape_numel(&l->in);
        if (tp->size > 1 && l->spec.kind == DT_LAYER_LINEAR && l->in.ndim == 2)
            return dt_fail(DT_ERR_INVALID,
                           "model: layer %d (linear) acts on every position of a (T, E) input: "
                           "--tp splits a GPT's block layers, not a per-position linear "
                           "(use block layers, or tp 1)",
                           i);
        l->tp_parts = 1;
        /* The layer as if whole: its errors are the unsplit model's, its sizes decide. */
        dt_layer whole = *l;
        if (i > 0 && layers[i - 1].seq) { /* a share of T */
            whole.in.d[0] = layers[i - 1].seq_len;
            whole.in_numel = dt_shape_numel(&whole.in);
        }
        if (b.split) {
            whole.in.d[0] = b.whole;
            whole.in_numel = dt_shape_numel(&whole.in);
        }
        TRY_RET(whole.ops->plan(&whole));
        const int splittable =
            (l->spec.kind == DT_LAYER_LINEAR || l->spec.kind == DT_LAYER_CONV2D) && tp->size > 1 &&
            (int64_t)whole.weight_count >= tp->min_weights && whole.out.d[0] >= tp->size;
        if (l->spec.kind == DT_LAYER_BLOCK && tp->size > 1) {
            /* By heads, inside the layer (block.c): the input and output stay whole. */
            if (l->spec.heads < tp->size)
                return dt_fail(DT_ERR_INVALID,
                               "model: layer %d (block): %lld heads cannot be split over %d "
                               "tensor-parallel ranks (tp may not exceed the heads)",
                               i, (long long)l->spec.heads, tp->size);
            l->tp_parts = tp->size;
            l->tp_index = tp->rank;
            if (tp->sequence_parallel) {
                /* A run of blocks passes each rank's share of the positions along. */
                const int after = i > 0 && layers[i - 1].seq;
                l->seq = 1;
                l->seq_in_whole = !after;
                l->seq_out_whole = !seq_T && (i + 1 == n || specs[i + 1].kind != DT_LAYER_BLOCK);
                l->seq_len = after ? layers[i - 1].seq_len : l->in.d[0];
                if (l->seq_len < tp->size)
                    return dt_fail(DT_ERR_INVALID,
                                   "model: layer %d (block): %lld positions cannot be shared by "
                                   "%d tensor-parallel ranks under sequence parallelism (tp "
                                   "may not exceed model.block_size)",
                                   i, (long long)l->seq_len, tp->size);
            }
            int64_t p0, p1;
            part(l->seq_len, tp->size, tp->rank, &p0, &p1);
            l->seq_t0 = l->seq ? p0 : 0;
            l->seq_n = l->seq ? p1 - p0 : l->in.d[0];
            TRY_RET(l->ops->plan(l));
            int64_t h0, h1;
            dt_tp_part(l->spec.heads, 1, tp->size, tp->rank, &h0, &h1);
            l->tp = (dt_tp_layer_plan){.role = DT_TP_HEADS,
                                       .sequence = l->seq,
                                       .seq_in_whole = l->seq_in_whole,
                                       .seq_out_whole = l->seq_out_whole,
                                       .begin = h0,
                                       .end = h1,
                                       .whole_dim = l->spec.heads};
            l->tp_unit = 1;
        } else if (seq_T) {
            TRY_RET(plan_positions(l, seq_T, tp));
        } else if (b.split) {
            TRY_RET(plan_on_block(l, &whole, &b));
        } else if (splittable) {
            TRY_RET(plan_column(l, &whole, tp, &b));
        } else {
            TRY_RET(l->ops->plan(l));
            l->tp = (dt_tp_layer_plan){
                .role = DT_TP_WHOLE, .begin = 0, .end = l->out.d[0], .whole_dim = l->out.d[0]};
            l->tp_unit = 1;
        }
        l->seq_model = seq_T > 0;
        l->out_numel = dt_shape_numel(&l->out);
        set_params(l, &whole);
        shapes[i + 1] = l->out;
    }
    if (b.split) { /* the model's output is whole */
        layers[n - 1].tp.gather = 1;
        shapes[n].d[0] = b.whole;
    }
    return DT_OK;
}

dt_status dt_model_tp_plan(const dt_layer_spec *specs, int nlayers, const dt_shape *input,
                           const dt_tp_layout *tp, dt_tp_layer_plan *out)
{
    DT_ASSERT(specs != NULL && input != NULL && out != NULL && nlayers >= 1);
    dt_status st = DT_OK;
    dt_layer *layers = NULL;
    dt_shape *shapes = NULL;
    DT_TRY(dt_alloc(sizeof *layers * (size_t)nlayers, "model plan", (void **)&layers));
    DT_TRY(dt_alloc(sizeof *shapes * (size_t)(nlayers + 1), "model plan", (void **)&shapes));
    shapes[0] = *input;
    DT_TRY(dt_tp_plan_layers(layers, specs, nlayers, shapes, tp));
    for (int i = 0; i < nlayers; i++)
        out[i] = layers[i].tp;
fail:
    dt_free(layers);
    dt_free(shapes);
    return st;
}

static dt_status need_group(const dt_tp_run *r)
{
    if (!r->attached)
        return dt_fail(DT_ERR_INVALID,
                       "model: a tensor-parallel model (rank %d of %d) has no "
                       "group to communicate with: a strategy attaches it",
                       r->rank, r->size);
    return DT_OK;
}

size_t dt_tp_padded_part(const dt_layer *l, int size)
{
    const int64_t row = l->out_numel / (l->tp.end - l->tp.begin); /* one dim-0 row's elements */
    const int64_t units = l->tp.whole_dim / l->tp_unit;
    return (size_t)(((units + size - 1) / size) * l->tp_unit * row);
}

/* The gather: every rank's block of every sample (padded to the largest), in rank order,
 * then each block into its place in each sample's whole output. */
static dt_status gather(dt_tp_run *r, const dt_layer *l, const float *own, float *y, int64_t batch)
{
    const int64_t row = l->out_numel / (l->tp.end - l->tp.begin);
    const int64_t whole = row * l->tp.whole_dim;
    const size_t count = (size_t)batch * dt_tp_padded_part(l, r->size);
    TRY_RET(r->group.allgather(r->group.ctx, own, r->scratch, count));
    for (int k = 0; k < r->size; k++) {
        int64_t lo, hi;
        dt_tp_part(l->tp.whole_dim, l->tp_unit, r->size, k, &lo, &hi);
        const int64_t n = (hi - lo) * row;
        const float *src = r->scratch + (size_t)k * count;
        for (int64_t s = 0; s < batch; s++)
            memcpy(y + s * whole + lo * row, src + s * n, (size_t)n * sizeof(float));
    }
    return DT_OK;
}

dt_status dt_tp_after_forward(dt_tp_run *r, dt_layer *l, const float *own, float *y, int64_t batch)
{
    if (l->tp.role == DT_TP_WHOLE || (l->tp.role != DT_TP_ROW && !l->tp.gather))
        return DT_OK;
    TRY_RET(need_group(r));
    if (l->tp.role == DT_TP_ROW) {
        TRY_RET(r->group.allreduce_sum(r->group.ctx, y, (size_t)(batch * l->out_numel)));
        if (l->b != NULL)
            dt_add_bias_rows(y, l->b, batch, l->out_numel);
        return DT_OK;
    }
    return gather(r, l, own, y, batch);
}

const float *dt_tp_block_of_grad(dt_tp_run *r, const dt_layer *l, const float *dy, int64_t batch)
{
    const int64_t n = l->out_numel, row = n / (l->tp.end - l->tp.begin);
    const int64_t whole = row * l->tp.whole_dim, off = l->tp.begin * row;
    for (int64_t s = 0; s < batch; s++)
        memcpy(r->scratch + s * n, dy + s * whole + off, (size_t)n * sizeof(float));
    return r->scratch;
}

dt_status dt_tp_after_backward(dt_tp_run *r, const dt_layer *l, float *dx, int64_t batch)
{
    if (l->tp.role != DT_TP_COLUMN || dx == NULL)
        return DT_OK;
    TRY_RET(need_group(r));
    return r->group.allreduce_sum(r->group.ctx, dx, (size_t)(batch * l->in_numel));
}

size_t dt_param_whole_index(const dt_param_info *t, size_t local)
{
    if (t->split_dim < 0)
        return local;
    if (t->split_groups > 1) { /* [begin, end) of each of the groups of the split dimension */
        const size_t w = (size_t)(t->split_end - t->split_begin);
        const size_t gw = (size_t)t->whole_shape[t->split_dim] / (size_t)t->split_groups;
        if (t->split_dim == 0) {
            size_t inner = 1;
            for (int d = 1; d < t->ndim; d++)
                inner *= (size_t)t->whole_shape[d];
            const size_t row = local / inner, g = row / w;
            return (g * gw + (size_t)t->split_begin + row % w) * inner + local % inner;
        }
        const size_t cols = w * (size_t)t->split_groups, row = local / cols, col = local % cols;
        return row * (size_t)t->whole_shape[1] + (col / w) * gw + (size_t)t->split_begin + col % w;
    }
    if (t->split_dim == 0) {
        size_t inner = 1;
        for (int d = 1; d < t->ndim; d++)
            inner *= (size_t)t->whole_shape[d];
        return (size_t)t->split_begin * inner + local;
    }
    /* columns of a 2-D tensor */
    const size_t cols = (size_t)(t->split_end - t->split_begin);
    const size_t row = local / cols, col = local % cols;
    return row * (size_t)t->whole_shape[1] + (size_t)t->split_begin + col;
}

/* Each rank's part of t: rows (or columns) [lo, hi) of the split dimension, cut as layer l's
 * split was (a row-parallel weight after a flattened channel block: whole channels). */
static size_t part_count(const dt_layer *l, const dt_param_info *t, int rank, int size, int64_t *lo,
                         int64_t *hi)
{
    const int64_t dim = t->whole_shape[t->split_dim];
    if (t->split_unit > 0) { /* the tensor's own split: [lo, hi) of each group */
        const int64_t groups = t->split_groups > 1 ? t->split_groups : 1;
        dt_tp_part(dim / groups, t->split_unit, size, rank, lo, hi);
        return t->whole_count / (size_t)dim * (size_t)(groups * (*hi - *lo));
    }
    dt_tp_part(dim, l->tp_unit, size, rank, lo, hi);
    return t->whole_count / (size_t)dim * (size_t)(*hi - *lo);
}

dt_status dt_tp_gather_tensor(dt_tp_run *r, const dt_layer *l, const dt_param_info *t,
                              const float *part_in, float *whole)
{
    dt_status st = DT_OK;
    float *send = NULL, *recv = NULL;
    if (t->split_dim < 0) {
        memcpy(whole, part_in, t->count * sizeof(float));
        return DT_OK;
    }
    DT_TRY(need_group(r));
    /* Every rank's part padded to the largest (the gather's equal counts), then each into
     * its rows, or its columns of each row. */
    int64_t lo, hi;
    size_t most = 0;
    DT_ASSERT(part_count(l, t, r->rank, r->size, &lo, &hi) == t->count && lo == t->split_begin &&
              hi == t->split_end);
    (void)lo;
    for (int k = 0; k < r->size; k++) {
        const size_t n = part_count(l, t, k, r->size, &lo, &hi);
        most = n > most ? n : most;
    }
    DT_TRY(dt_alloc(most * sizeof(float), "gathered weight", (void **)&send));
    DT_TRY(dt_alloc(most * (size_t)r->size * sizeof(float), "gathered weight", (void **)&recv));
    memcpy(send, part_in, t->count * sizeof(float));
    DT_TRY(r->group.allgather(r->group.ctx, send, recv, most));
    const size_t rows = (size_t)t->whole_shape[0], cols = (size_t)t->whole_count / rows;
    const size_t groups = t->split_groups > 1 ? (size_t)t->split_groups : 1;
    for (int k = 0; k < r->size && groups > 1; k++) {
        /* [lo, hi) of each group: rows of groups of rows, or columns of groups of columns */
        part_count(l, t, k, r->size, &lo, &hi);
        const float *src = recv + (size_t)k * most;
        const size_t w = (size_t)(hi - lo);
        if (t->split_dim == 0) {
            const size_t gw = rows / groups;
            for (size_t g = 0; g < groups; g++, src += w * cols)
                memcpy(whole + (g * gw + (size_t)lo) * cols, src, w * cols * sizeof(float));
            continue;
        }
        const size_t gw = cols / groups;
        for (size_t row = 0; row < rows; row++)
            for (size_t g = 0; g < groups; g++, src += w)
                memcpy(whole + row * cols + g * gw + (size_t)lo, src, w * sizeof(float));
    }
    for (int k = 0; k < r->size && groups == 1; k++) {
        const size_t n = part_count(l, t, k, r->size, &lo, &hi);
        const float *src = recv + (size_t)k * most;
        if (t->split_dim == 0) { /* rows [lo, hi): contiguous in the whole */
            memcpy(whole + (size_t)lo * cols, src, n * sizeof(float));
            continue;
        }
        const size_t w = (size_t)(hi - lo);
        for (size_t row = 0; row < rows; row++, src += w)
            memcpy(whole + row * cols + (size_t)lo, src, w * sizeof(float));
    }
fail:
    dt_free(send);
    dt_free(recv);
    return st;
}
