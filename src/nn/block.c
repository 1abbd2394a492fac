/* block.c — GPT-2's residual block on a (T, E) sample, as Hugging Face's GPT2Block with
 * H heads:
 *
 *     x1  = x  + drop(attn(ln_1(x)) @ c_proj + b)        attn: c_attn, causal attention
 *     out = x1 + drop(gelu(ln_2(x1) @ c_fc + b) @ c_proj + b)
 *
 * LayerNorms with eps 1e-5, GELU's tanh approximation, dropout p on both residual branches
 * (resid_pdrop) and attn_p on the attention probabilities (attn_pdrop).
 *
 * Tensors, in GPT2Block's parameters() order and with its names and shapes (Conv1D's
 * (in, out) layout, kept as is inside, so a weights file holds what is in memory):
 * ln_1.weight, ln_1.bias (E), attn.c_attn.weight (E, 3E), .bias (3E), attn.c_proj.weight
 * (E, E), .bias (E), ln_2.weight, ln_2.bias (E), mlp.c_fc.weight (E, 4E), .bias (4E),
 * mlp.c_proj.weight (4E, E), .bias (E). Initial values are GPT-2's: the projections
 * normal(0, 0.02), the two c_proj weights normal(0, 0.02 / sqrt(2 blocks)), biases 0,
 * LayerNorm gains 1.
 *
 * Memory (docs/ARCHITECTURE.md, "The transformer block"): the forward keeps, per sample,
 * q k v (3TE), the attention's output (TE) and log-sum-exp (HT), x1 (TE), c_fc's output
 * before the GELU (4TE), each LayerNorm's mean and 1/std (4T) and, with dropout, one bit per
 * element of each residual branch: 10 TE floats with the block's input, which the model
 * keeps anyway. The LayerNorms' outputs and the GELU's are recomputed in backward from
 * what is kept (O(TE) each, beside the O(TE^2) products), and the attention keeps no T x T
 * matrix (tfm_kernels.h). Backward works in a row workspace of 9 TE floats per sample.
 *
 * Threads: the products are split between the model's team as linear.c splits them (rows
 * of the output; the weight's gradient in blocks of a grid), the attention by (sample, head), the
 * element-wise parts by sample; the LayerNorms' gain and bias gradients sum on one thread,
 * samples in order. Dropout keys follow dropout.c's scheme, (seed, epoch, the sample's
 * position, layer, element), with the branch in bits 16-23 of the layer word. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "core/pool.h"
#include "dtrain/rng.h"
#include "nn/layer_internal.h"
#include "nn/mask_bits.h"
#include "nn/tp.h"
#include "tensor/gemm.h"
#include "tensor/kernels.h"
#include "tensor/tfm_kernels.h"

#define LN_EPS 1e-5f

/* The saved state's fields (state_by_field), in this order, bytes per sample each. */
enum { F_QKV, F_Y, F_LSE, F_X1, F_H, F_STATS, F_KEYS, F_MASK1, F_MASK2, NFIELDS };

/* Per sample: what draws its dropout. */
typedef struct blk_key {
    uint64_t seed;
    uint32_t epoch, pos;
    uint32_t active; /* 1: the forward drew masks */
    uint32_t pad;
} blk_key;

/* The 12 tensors' offsets in the layer's parameters. */
enum { T_LN1G, T_LN1B, T_QKVW, T_QKVB, T_AOW, T_AOB, T_LN2G, T_LN2B, T_FCW, T_FCB, T_MOW, T_MOB };

/* A block's sizes on this rank: T positions, E the width; H the heads held (all of them, or
 * a tensor-parallel rank's share [h0, h0 + H) of the model's Hw), D a head's columns, A =
 * H D the attention's width held, F the MLP's hidden units held (4E, or [f0, f0 + F)).
 * Under sequence parallelism (dt_layer.seq) the residual stream, the LayerNorms and the
 * dropouts hold only positions [t0, t0 + Tl) of each sample (Tl = T otherwise), and Tp is
 * the largest rank's share, to which the collectives pad. */
typedef struct dims {
    int64_t T, E, H, D, A, F;
    int64_t Hw, h0, f0;
    int64_t Tl, t0, Tp;
    int parts, rank;
} dims;

static dims dims_of(const dt_layer *l)
{
    dims d = {.T = l->seq ? l->seq_len : l->in.d[0], .E = l->in.d[1], .Hw = l->spec.heads};
    d.D = d.Hw > 0 ? d.E / d.Hw : 0;
    d.parts = l->tp_parts > 1 ? l->tp_parts : 1;
    d.rank = l->tp_parts > 1 ? l->tp_index : 0;
    int64_t lo, hi;
    dt_tp_part(d.Hw, 1, d.parts, d.rank, &lo, &hi);
    d.h0 = lo;
    d.H = hi - lo;
    d.A = d.H * d.D;
    dt_tp_part(4 * d.E, 1, d.parts, d.rank, &lo, &hi);
    d.f0 = lo;
    d.F = hi - lo;
    d.Tl = d.T;
    d.Tp = d.T;
    if (l->seq) {
        dt_tp_part(d.T, 1, d.parts, d.rank, &lo, &hi);
        d.t0 = lo;
        d.Tl = hi - lo;
        d.Tp = (d.T + d.parts - 1) / d.parts;
    }
    return d;
}

static int split(const dt_layer *l)
{
    return l->tp_parts > 1;
}

static size_t mask_bytes(const dt_layer *l)
{
    const dims d = dims_of(l);
    return l->spec.p > 0.0 ? ((size_t)(d.Tl * d.E + 7) / 8 + 7u) & ~(size_t)7u : 0;
}

static size_t field_bytes(const dt_layer *l, int f)
{
    const dims d = dims_of(l);
    const size_t te = (size_t)(d.Tl * d.E) * sizeof(float),
                 ta = (size_t)(d.T * d.A) * sizeof(float);
    switch (f) {
    case F_QKV:
        return 3 * ta;
    case F_Y:
        return ta;
    case F_X1:
        return te;
    case F_LSE:
        return (size_t)(d.H * d.T) * sizeof(float);
    case F_H:
        return (size_t)(d.T * d.F) * sizeof(float);
    case F_STATS:
        return (size_t)(4 * d.Tl) * sizeof(float);
    case F_KEYS:
        return sizeof(blk_key);
    default:
        return mask_bytes(l);
    }
}

/* Field f of the call's row r. */
static void *field(const dt_layer *l, int f, int64_t r)
{
    unsigned char *at = l->state;
    for (int g = 0; g < f; g++)
        at += field_bytes(l, g) * (size_t)l->state_cap;
    return at + field_bytes(l, f) * (size_t)(l->state_r0 + r);
}

static float *ffield(const dt_layer *l, int f, int64_t r)
{
    return field(l, f, r);
}

/* The 12 tensors, this rank's parts: the fused q, k, v's columns of the heads held (in each
 * of its three groups) and their bias, the attention's c_proj's rows for those heads, c_fc's
 * columns and bias and the MLP's c_proj's rows of the hidden units held; the LayerNorms and
 * the two output biases whole (the biases are added once, after the sum). */
static void describe(const dt_layer *l, dt_layer_tensor *t)
{
    const dims d = dims_of(l);
    const int64_t E = d.E, A = d.A, F = d.F;
    const double proj_std = 0.02 / sqrt(2.0 * (l->model_blocks > 0 ? l->model_blocks : 1));
    static const char *const names[DT_LAYER_MAX_TENSORS] = {
        "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
        "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
        "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
    /* rows, columns (0 for a vector), fill */
    const int64_t shape[DT_LAYER_MAX_TENSORS][2] = {{E, 0}, {E, 0}, {E, 3 * A}, {3 * A, 0},
                                                    {A, E}, {E, 0}, {E, 0},     {E, 0},
                                                    {E, F}, {F, 0}, {F, E},     {E, 0}};
    /* the split dimension, its groups and unit, per tensor (-1: whole) */
    const int sdim[DT_LAYER_MAX_TENSORS] = {-1, -1, 1, 0, 0, -1, -1, -1, 1, 0, 0, -1};
    for (int k = 0; k < DT_LAYER_MAX_TENSORS; k++) {
        memset(&t[k], 0, sizeof t[k]);
        snprintf(t[k].suffix, sizeof t[k].suffix, "%s", names[k]);
        t[k].ndim = shape[k][1] > 0 ? 2 : 1;
        t[k].shape[0] = shape[k][0];
        t[k].shape[1] = shape[k][1];
        t[k].count = (size_t)(shape[k][0] * (shape[k][1] > 0 ? shape[k][1] : 1));
        if (k == T_LN1G || k == T_LN2G)
            t[k].fill = DT_FILL_ONES;
        else if (t[k].ndim == 1)
            t[k].fill = DT_FILL_ZEROS;
        else
            t[k].std = (k == T_AOW || k == T_MOW) ? proj_std : 0.02;
        /* Under sequence parallelism each rank's LayerNorms see only its positions: their
         * gradients are partial sums, completed over the group once per step. */
        t[k].seq_partial = l->seq && (k == T_LN1G || k == T_LN1B || k == T_LN2G || k == T_LN2B);
        t[k].split_dim = split(l) ? sdim[k] : -1;
        if (t[k].split_dim < 0)
            continue;
        const int heads = k <= T_AOW; /* c_attn and the attention's c_proj: by heads */
        t[k].split_groups = k == T_QKVW || k == T_QKVB ? 3 : 1;
        t[k].split_unit = heads ? d.D : 1;
        t[k].split_begin = heads ? d.h0 * d.D : d.f0;
        t[k].split_end = heads ? (d.h0 + d.H) * d.D : d.f0 + d.F;
        memcpy(t[k].whole_shape, t[k].shape, sizeof t[k].whole_shape);
        t[k].whole_shape[t[k].split_dim] = heads ? (k == T_AOW ? E : 3 * E) : 4 * E;
    }
}

static int block_tensors(const dt_layer *l, dt_layer_tensor *out)
{
    describe(l, out);
    return DT_LAYER_MAX_TENSORS;
}

/* Tensor k's parameters (or, with grads, its gradient): offsets from describe()'s shapes,
 * counted here without it (this runs per sample). */
static float *tensor_at(const dt_layer *l, int k, int grads)
{
    const dims d = dims_of(l);
    const int64_t E = d.E, A = d.A, F = d.F;
    const int64_t count[DT_LAYER_MAX_TENSORS] = {E, E, 3 * E * A, 3 * A, A * E, E,
                                                 E, E, E * F,     F,     F * E, E};
    int64_t at = 0;
    for (int j = 0; j < k; j++)
        at += count[j];
    return (grads ? l->dw : l->w) + at;
}

static dt_status block_plan(dt_layer *l)
{
    if (l->in.ndim != 2)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (block): input must be (positions, width), got %d dims", l->index,
                       l->in.ndim);
    const dims d = dims_of(l);
    if (d.H < 1 || d.E % d.H != 0)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (block): %lld heads do not divide the width E = %lld", l->index,
                       (long long)d.H, (long long)d.E);
    if (!(l->spec.p >= 0.0 && l->spec.p < 1.0) || !(l->spec.attn_p >= 0.0 && l->spec.attn_p < 1.0))
        return dt_fail(DT_ERR_INVALID, "layer %d (block): p and attn_p must be in [0, 1)",
                       l->index);
    if (l->index >= (1 << 16))
        return dt_fail(DT_ERR_INVALID, "layer %d (block): dropout keys take layers below 65536",
                       l->index);
    /* Under sequence parallelism the planner (model_tp.c) gives the block its share of the
     * positions, or all of them where the run of blocks begins (seq_in_whole) and ends
     * (seq_out_whole: the output is gathered whole). */
    DT_ASSERT(!l->seq || l->in.d[0] == (l->seq_in_whole ? d.T : d.Tl));
    l->out = l->in;
    if (l->seq)
        l->out.d[0] = l->seq_out_whole ? d.T : d.Tl;
    l->weight_count = (size_t)(3 * d.E * d.A + 3 * d.A + d.A * d.E + 2 * d.E * d.F + d.F + 6 * d.E);
    l->bias_count = 0;
    l->state_bytes = 0;
    for (int f = 0; f < NFIELDS; f++)
        l->state_bytes += field_bytes(l, f);
    l->seq_state_bytes = field_bytes(l, F_X1) + field_bytes(l, F_STATS) + field_bytes(l, F_MASK1) +
                         field_bytes(l, F_MASK2);
    /* per member: the attention's workspace, then its LayerNorm gradient partials (2E) */
    l->ws_bytes = sizeof(float) * (size_t)(dt_attn_ws_count(d.T, d.D) + 2 * d.E);
    /* 9 TE floats per sample; under sequence parallelism, after them, one rank's padded share
     * (Tp E, what a rank sends to an all-gather or keeps of a reduce-scatter) and the group's
     * (parts x Tp E, what an all-gather receives or a reduce-scatter sends). */
    l->rows_ws_bytes = sizeof(float) * (size_t)(9 * d.T * d.E);
    if (l->seq)
        l->rows_ws_bytes += sizeof(float) * (size_t)((d.parts + 1) * d.Tp * d.E);
    return DT_OK;
}

/* ---- products over the call's rows, split between the team (linear.c's splits) ---- */

typedef struct gemm_job {
    int64_t R, K, N; /* rows; W (K, N) */
    const float *a, *w, *bias, *dy;
    float *c, *dw, *db;
} gemm_job;

static dt_pool *team(const dt_layer *l, int64_t work)
{
    return work >= 64 * DT_PAR_MIN ? l->pool : NULL;
}

/* c (R, N) = bias + a (R, K) @ w (K, N): c starts as the bias and the product is added to
 * it (torch.addmm's order, and no pass of OpenBLAS's to zero c first). */
static void xw_part(void *ctx, int t, int nt)
{
    const gemm_job *j = ctx;
    int64_t lo, hi;
    dt_pool_share(j->R, t, nt, &lo, &hi);
    if (j->bias == NULL) { /* a row-parallel part: its bias comes after the sum */
        dt_sgemm_nn(hi - lo, j->N, j->K, j->a + lo * j->K, j->K, j->w, j->N, j->c + lo * j->N,
                    j->N);
        return;
    }
    for (int64_t r = lo; r < hi; r++)
        memcpy(j->c + r * j->N, j->bias, sizeof(float) * (size_t)j->N);
    if (hi > lo)
        dt_sgemm_nn_add(hi - lo, j->N, j->K, j->a + lo * j->K, j->K, j->w, j->N, j->c + lo * j->N,
                        j->N);
}

/* dw (K, N) += a (R, K)^T @ dy (R, N), each member its block of dW on the grid that packs
 * least (dt_pool_grid_pick); db (N) += column sums of dy (when db is given), each member its
 * share of the columns */
static void dw_part(void *ctx, int t, int nt)
{
    const gemm_job *j = ctx;
    int pk, pn;
    int64_t lo, hi, clo, chi;
    dt_pool_grid_pick(j->K, j->N, nt, &pk, &pn);
    dt_pool_grid_share(j->K, j->N, pk, pn, t, &lo, &hi, &clo, &chi);
    if (hi > lo && chi > clo)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(hi - lo), (int)(chi - clo),
                    (int)j->R, 1.0f, j->a + lo, (int)j->K, j->dy + clo, (int)j->N, 1.0f,
                    j->dw + lo * j->N + clo, (int)j->N);
    if (j->db != NULL) {
        dt_pool_share(j->N, t, nt, &lo, &hi);
        dt_sum_rows_add_cols(j->dy, j->R, j->N, lo, hi, j->db);
    }
}

/* c (R, K) = dy (R, N) @ w (K, N)^T */
static void dx_part(void *ctx, int t, int nt)
{
    const gemm_job *j = ctx;
    int64_t lo, hi;
    dt_pool_share(j->R, t, nt, &lo, &hi);
    if (hi > lo)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(hi - lo), (int)j->K, (int)j->N,
                    1.0f, j->dy + lo * j->N, (int)j->N, j->w, (int)j->N, 0.0f, j->c + lo * j->K,
                    (int)j->K);
}

static void xw(const dt_layer *l, int64_t R, int64_t K, int64_t N, const float *a, int wk, float *c)
{
    gemm_job j = {.R = R,
                  .K = K,
                  .N = N,
                  .a = a,
                  .w = tensor_at(l, wk, 0),
                  .bias = tensor_at(l, wk + 1, 0),
                  .c = c};
    dt_pool_run(team(l, R * K * N), xw_part, &j);
}

static void dw(const dt_layer *l, int64_t R, int64_t K, int64_t N, const float *a, const float *dy,
               int wk)
{
    gemm_job j = {.R = R,
                  .K = K,
                  .N = N,
                  .a = a,
                  .dy = dy,
                  .dw = tensor_at(l, wk, 1),
                  .db = tensor_at(l, wk + 1, 1)};
    dt_pool_run(team(l, R * K * N), dw_part, &j);
}

/* Pieces of a weight gradient's product while an input gradient's sum is in flight. */
#define DW_PIECES 4

/* dw() with the group's collective in flight: the product in DW_PIECES pieces of the rows it
 * sums over (the batch's positions), each added to dW, the group's progress (and the backward
 * hooks', for data parallelism's buckets) made between them. Cut along the sum, each piece
 * packs only its own rows of both operands, so the pieces pack what one product would; cut
 * along dW's rows, each piece packed the whole of dy again, and the overlap cost 3.5-4.5% of
 * the tp 2 step on shared memory (docs/NOTES.md). Its bits are not dw()'s: each weight's sum
 * is added up in DW_PIECES parts (the same within rounding). */
static dt_status dw_overlapped(const dt_layer *l, int64_t R, int64_t K, int64_t N, const float *a,
                               const float *dy, int wk, const dt_backward_hooks *hooks)
{
    const dt_tp_run *run = l->tp_run;
    if (!split(l) || run == NULL || run->group.progress == NULL) {
        dw(l, R, K, N, a, dy, wk);
        return DT_OK;
    }
    dt_status st = DT_OK;
    for (int p = 0; p < DW_PIECES; p++) {
        int64_t lo, hi;
        dt_pool_share(R, p, DW_PIECES, &lo, &hi);
        gemm_job j = {.R = hi - lo,
                      .K = K,
                      .N = N,
                      .a = a + lo * K,
                      .dy = dy + lo * N,
                      .dw = tensor_at(l, wk, 1),
                      .db = tensor_at(l, wk + 1, 1)};
        if (hi > lo)
            dt_pool_run(team(l, (hi - lo) * K * N), dw_part, &j);
        /* a failure is the wait's to report: the collective is still in flight */
        const dt_status ps = run->group.progress(run->group.ctx);
        const dt_status hs = dt_hooks_progress(hooks);
        if (st == DT_OK)
            st = ps != DT_OK ? ps : hs;
    }
    return st;
}

static void dx(const dt_layer *l, int64_t R, int64_t K, int64_t N, const float *dy, int wk,
               float *c)
{
    gemm_job j = {.R = R, .K = K, .N = N, .dy = dy, .w = tensor_at(l, wk, 0), .c = c};
    dt_pool_run(team(l, R * K * N), dx_part, &j);
}

/* ---- the element-wise and per-sample parts ---- */

/* Rows of the residual stream, sample by sample: sample r's first row at at + r * stride.
 * Without sequence parallelism every such buffer is (batch, T, E); with it a share of the
 * positions of a (batch, Tl, E) buffer, of a padded (batch, Tp, E) one, or of a whole
 * (batch, T, E) one from row t0. */
typedef struct rowsv {
    const float *at;
    int64_t stride;
} rowsv;

static rowsv rv(const float *at, int64_t stride)
{
    return (rowsv){at, stride};
}

static float *rw(rowsv v, int64_t r)
{
    return (float *)v.at + r * v.stride;
}

typedef struct row_job {
    const dt_layer *l;
    int64_t batch;
    int what;
    rowsv a; /* input */
    rowsv b; /* output */
} row_job;

enum {
    DO_LN1,
    DO_LN2,
    DO_RESID1,
    DO_RESID2,
    DO_GELU,
    DO_GELU_BOTH,
    DO_TIMES,
    DO_UNDROP1,
    DO_UNDROP2,
    DO_ADD,
    DO_MASK2
};

static float drop_scale(const dt_layer *l)
{
    return (float)(1.0 / (1.0 - l->spec.p));
}

/* Sample r's branch o (Tl E) becomes x + drop(o), the mask's bits saved (branch 1 or 2);
 * with x and o NULL, the bits alone. Each element draws the number of its index in the
 * whole (T, E) sample, so a rank holding positions [t0, t0 + Tl) draws what one process
 * draws there. */
static void resid_add(const dt_layer *l, int64_t r, int branch, const float *x, float *o)
{
    const dims d = dims_of(l);
    const int64_t n = d.Tl * d.E, base = d.t0 * d.E;
    blk_key k;
    memcpy(&k, field(l, F_KEYS, r), sizeof k);
    if (!k.active || l->spec.p == 0.0) {
        if (o != NULL)
            for (int64_t e = 0; e < n; e++)
                o[e] = x[e] + o[e];
        return;
    }
    uint8_t *bits = field(l, branch == 1 ? F_MASK1 : F_MASK2, r);
    memset(bits, 0, mask_bytes(l));
    const float p = (float)l->spec.p, scale = drop_scale(l);
    const uint32_t c2 =
        ((uint32_t)DT_RNG_STREAM_DROPOUT << 24) | ((uint32_t)branch << 16) | (uint32_t)l->index;
    for (int64_t e = 0; e < n;) {
        const int64_t g = base + e;
        uint32_t w[4];
        dt_philox(k.seed, k.epoch, k.pos, c2, (uint32_t)(g / 4), w);
        for (int q = (int)(g % 4); q < 4 && e < n; q++, e++) {
            const int keep = dt_u01f(w[q]) >= p;
            bits[e / 8] |= (uint8_t)(keep << (e % 8));
            if (o != NULL)
                o[e] = x[e] + o[e] * (keep ? scale : 0.0f);
        }
    }
}

/* out (Tl E) = dy times branch's saved mask and scale (the identity without dropout). */
static void undrop(const dt_layer *l, int64_t r, int branch, const float *dy, float *out)
{
    const dims d = dims_of(l);
    const int64_t n = d.Tl * d.E;
    blk_key k;
    memcpy(&k, field(l, F_KEYS, r), sizeof k);
    if (!k.active || l->spec.p == 0.0) {
        memcpy(out, dy, sizeof(float) * (size_t)n);
        return;
    }
    dt_mask_scale(field(l, branch == 1 ? F_MASK1 : F_MASK2, r), dy, n, drop_scale(l), out);
}

static void rows_part(void *ctx, int t, int nt)
{
    const row_job *j = ctx;
    const dt_layer *l = j->l;
    const dims d = dims_of(l);
    const int64_t n = d.Tl * d.E, nf = d.T * d.F;
    int64_t lo, hi;
    dt_pool_share(j->batch, t, nt, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        float *st = ffield(l, F_STATS, r), *a = rw(j->a, r), *b = rw(j->b, r);
        switch (j->what) {
        case DO_LN1:
        case DO_LN2: {
            const int two = j->what == DO_LN2;
            dt_layernorm_forward(a, tensor_at(l, two ? T_LN2G : T_LN1G, 0),
                                 tensor_at(l, two ? T_LN2B : T_LN1B, 0), d.Tl, d.E, LN_EPS, b,
                                 st + (two ? 2 : 0) * d.Tl, st + (two ? 3 : 1) * d.Tl);
            break;
        }
        case DO_RESID1:
        case DO_RESID2:
            resid_add(l, r, j->what == DO_RESID1 ? 1 : 2, a, b);
            break;
        case DO_GELU: /* (T, F) per sample: the hidden units held, every position */
            dt_gelu_tanh_forward(j->a.at + r * nf, nf, (float *)j->b.at + r * nf);
            break;
        case DO_GELU_BOTH: /* b = gelu(a), and a becomes gelu'(a) */
            dt_gelu_tanh_both(j->a.at + r * nf, nf, (float *)j->b.at + r * nf,
                              (float *)j->a.at + r * nf);
            break;
        case DO_TIMES: /* b *= a */
            for (int64_t e = r * nf; e < (r + 1) * nf; e++)
                ((float *)j->b.at)[e] *= j->a.at[e];
            break;
        case DO_UNDROP1:
        case DO_UNDROP2:
            undrop(l, r, j->what == DO_UNDROP1 ? 1 : 2, a, b);
            break;
        case DO_ADD: /* b += a, the residual stream's rows */
            for (int64_t e = 0; e < n; e++)
                b[e] += a[e];
            break;
        case DO_MASK2: /* the second branch's dropout bits alone */
            resid_add(l, r, 2, NULL, NULL);
            break;
        default:
            DT_ASSERT(0);
        }
    }
}

static void rows(const dt_layer *l, int64_t batch, int what, rowsv a, rowsv b)
{
    const dims d = dims_of(l);
    row_job j = {.l = l, .batch = batch, .what = what, .a = a, .b = b};
    dt_pool_run(batch > 1 && batch * d.T * d.E >= DT_PAR_MIN ? l->pool : NULL, rows_part, &j);
}

/* (batch, T, F) per-position buffers, as rows_part's GELU cases read them. */
static void hidden(const dt_layer *l, int64_t batch, int what, const float *a, float *b)
{
    rows(l, batch, what, rv(a, 0), rv(b, 0));
}

/* ---- attention by (sample, head) ---- */

typedef struct attn_job {
    const dt_layer *l;
    int64_t batch;
    const float *dy; /* backward: d(attention output) */
    float *dqkv;     /* backward: written */
    int backward;
} attn_job;

static dt_attn_dropout attn_drop(const dt_layer *l, int64_t r)
{
    blk_key k;
    memcpy(&k, field(l, F_KEYS, r), sizeof k);
    dt_attn_dropout d = {.p = k.active ? l->spec.attn_p : 0.0, .seed = k.seed};
    d.ctr[0] = k.epoch;
    d.ctr[1] = k.pos;
    d.ctr[2] = ((uint32_t)DT_RNG_STREAM_DROPOUT << 24) | (uint32_t)l->index;
    d.ctr[3] = 1;                   /* causal_attention.c's layers use 0 */
    d.h0 = (uint32_t)dims_of(l).h0; /* a tensor-parallel rank's heads draw the model's masks */
    return d;
}

static void attn_part(void *ctx, int t, int nt)
{
    const attn_job *j = ctx;
    const dt_layer *l = j->l;
    const dims d = dims_of(l);
    const float scale = (float)(1.0 / sqrt((double)d.D));
    float *ws = l->ws + (size_t)t * l->ws_stride;
    for (int64_t pair = t; pair < j->batch * d.H; pair += nt) {
        const int64_t r = pair / d.H, h = pair % d.H;
        const dt_attn_dropout drop = attn_drop(l, r);
        const float *qkv = ffield(l, F_QKV, r);
        float *y = ffield(l, F_Y, r), *lse = ffield(l, F_LSE, r);
        if (!j->backward)
            dt_attn_forward(qkv, d.T, d.A, d.H, h, scale, &drop, y, lse, ws);
        else
            dt_attn_backward(qkv, y, lse, j->dy + r * d.T * d.A, d.T, d.A, d.H, h, scale, &drop,
                             j->dqkv + r * d.T * 3 * d.A, ws);
    }
}

static void attention(const dt_layer *l, int64_t batch, const float *dy, float *dqkv)
{
    const dims d = dims_of(l);
    attn_job j = {.l = l, .batch = batch, .dy = dy, .dqkv = dqkv, .backward = dy != NULL};
    const int big = batch * d.H > 1 && batch * d.T * d.T * d.A >= 4 * DT_PAR_MIN;
    dt_pool_run(big ? l->pool : NULL, attn_part, &j);
}

/* ---- the tensor-parallel group's collectives ---- */

static dt_status need_group(const dt_layer *l)
{
    const dt_tp_run *r = l->tp_run;
    if (r == NULL || !r->attached)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (block): split over %d tensor-parallel ranks, but the model "
                       "has no group attached",
                       l->index, l->tp_parts);
    return DT_OK;
}

/* Under tensor parallelism (DT_TP_HEADS), buf (R, E) = the sum of every rank's buf: a
 * row-parallel projection's partial outputs, or a column-parallel one's partial input
 * gradients. The same bits on every rank (the group's reduction is deterministic). */
static dt_status sum_over_group(const dt_layer *l, float *buf, int64_t R)
{
    const dt_status st = need_group(l);
    const dt_tp_run *r = l->tp_run;
    return st != DT_OK ? st : r->group.allreduce_sum(r->group.ctx, buf, (size_t)(R * l->in.d[1]));
}

/* Sequence parallelism's two buffers, after the 9 TE floats of the row workspace: `own`,
 * (batch, Tp, E), a rank's padded share of the positions; `all`, (parts, batch, Tp, E),
 * every rank's. */
static float *sp_own(const dt_layer *l, int64_t batch)
{
    const dims d = dims_of(l);
    return l->rows_ws + 9 * batch * d.T * d.E;
}

static float *sp_all(const dt_layer *l, int64_t batch)
{
    const dims d = dims_of(l);
    return sp_own(l, batch) + batch * d.Tp * d.E;
}

/* whole (batch, T, E) = every rank's share, gathered from each rank's sp_own (the padding
 * rows after its Tl are sent and dropped). */
static dt_status seq_gather(const dt_layer *l, int64_t batch, float *whole)
{
    dt_status st = need_group(l);
    const dims d = dims_of(l);
    const dt_tp_run *run = l->tp_run;
    const int64_t E = d.E, part = batch * d.Tp * E;
    const float *own = sp_own(l, batch);
    float *all = sp_all(l, batch);
    if (st != DT_OK || (st = run->group.allgather(run->group.ctx, own, all, (size_t)part)) != DT_OK)
        return st;
    for (int k = 0; k < d.parts; k++) {
        int64_t lo, hi;
        dt_tp_part(d.T, 1, d.parts, k, &lo, &hi);
        for (int64_t r = 0; r < batch; r++)
            memcpy(whole + (r * d.T + lo) * E, all + k * part + r * d.Tp * E,
                   sizeof(float) * (size_t)((hi - lo) * E));
    }
    return DT_OK;
}

/* Every rank's share of the positions of the whole (batch, T, E) `whole`, laid out rank by
 * rank (padded to Tp, the padding zero) in sp_all: what a reduce-scatter sends. Returns the
 * floats of one rank's block. */
static int64_t seq_pack(const dt_layer *l, int64_t batch, const float *whole)
{
    const dims d = dims_of(l);
    const int64_t E = d.E, part = batch * d.Tp * E;
    float *all = sp_all(l, batch);
    for (int k = 0; k < d.parts; k++) {
        int64_t lo, hi;
        dt_tp_part(d.T, 1, d.parts, k, &lo, &hi);
        for (int64_t r = 0; r < batch; r++) {
            float *to = all + k * part + r * d.Tp * E;
            memcpy(to, whole + (r * d.T + lo) * E, sizeof(float) * (size_t)((hi - lo) * E));
            memset(to + (hi - lo) * E, 0, sizeof(float) * (size_t)((d.Tp - (hi - lo)) * E));
        }
    }
    return part;
}

/* This rank's reduced block of sp_all into its rows `out`. */
static void seq_unpack(const dt_layer *l, int64_t batch, rowsv out)
{
    const dims d = dims_of(l);
    const int64_t part = batch * d.Tp * d.E;
    const float *mine = sp_all(l, batch) + d.rank * part;
    for (int64_t r = 0; r < batch; r++)
        memcpy(rw(out, r), mine + r * d.Tp * d.E, sizeof(float) * (size_t)(d.Tl * d.E));
}

/* out (this rank's positions of each sample, rows of `out`) = the sum over the group of
 * every rank's whole (batch, T, E) partial `whole`, each rank receiving its positions
 * only: a reduce-scatter of the shares laid out rank by rank in sp_all. */
static dt_status seq_scatter(const dt_layer *l, int64_t batch, const float *whole, rowsv out)
{
    dt_status st = need_group(l);
    if (st != DT_OK)
        return st;
    const dt_tp_run *run = l->tp_run;
    const int64_t part = seq_pack(l, batch, whole);
    if ((st = run->group.reduce_scatter_sum(run->group.ctx, sp_all(l, batch), (size_t)part)) !=
        DT_OK)
        return st;
    seq_unpack(l, batch, out);
    return DT_OK;
}

/* ---- forward and backward ---- */

/* An output projection: c (R, E) = a (R, K) @ W + b; split, each rank's rows of W give a
 * partial sum, summed over the group before the bias is added once. Under sequence
 * parallelism the partial (R, E) goes to `partial` and each rank receives the sum of its
 * positions only, into out, the bias added to those rows. */
static dt_status project_out(const dt_layer *l, int64_t batch, int64_t K, const float *a, int wk,
                             float *partial, rowsv out)
{
    const dims d = dims_of(l);
    const int64_t E = d.E, R = batch * d.T;
    if (!split(l)) {
        xw(l, R, K, E, a, wk, rw(out, 0));
        return DT_OK;
    }
    float *c = l->seq ? partial : rw(out, 0);
    gemm_job j = {.R = R, .K = K, .N = E, .a = a, .w = tensor_at(l, wk, 0), .c = c};
    dt_pool_run(team(l, R * K * E), xw_part, &j);
    const dt_status st = l->seq ? seq_scatter(l, batch, c, out) : sum_over_group(l, c, R);
    if (st != DT_OK)
        return st;
    if (!l->seq) {
        dt_add_bias_rows(c, tensor_at(l, wk + 1, 0), R, E);
        return DT_OK;
    }
    for (int64_t r = 0; r < batch; r++)
        dt_add_bias_rows(rw(out, r), tensor_at(l, wk + 1, 0), d.Tl, E);
    return DT_OK;
}

/* A LayerNorm's output over every position, into whole (batch, T, E), from this rank's rows
 * `x`: written there directly, or under sequence parallelism into sp_own and gathered. */
static dt_status layernorm_whole(const dt_layer *l, int64_t batch, int what, rowsv x, float *whole)
{
    const dims d = dims_of(l);
    if (!l->seq) {
        rows(l, batch, what, x, rv(whole, d.T * d.E));
        return DT_OK;
    }
    rows(l, batch, what, x, rv(sp_own(l, batch), d.Tp * d.E));
    return seq_gather(l, batch, whole);
}

/* Under sequence parallelism: this rank's rows v of each sample (Tl of them) copied into
 * sp_own, and every rank's gathered into whole (batch, T, E). */
static dt_status rows_gather(const dt_layer *l, int64_t batch, rowsv v, float *whole)
{
    const dims d = dims_of(l);
    float *own = sp_own(l, batch);
    if (own != v.at)
        for (int64_t r = 0; r < batch; r++)
            memcpy(own + r * d.Tp * d.E, rw(v, r), sizeof(float) * (size_t)(d.Tl * d.E));
    return seq_gather(l, batch, whole);
}

/* The block's input and output rows as this rank holds them: a share of the positions
 * unless the run of sequence-parallel blocks begins (input) or ends (output) here. */
static rowsv in_rows(const dt_layer *l, const float *x)
{
    const dims d = dims_of(l);
    if (l->seq && l->seq_in_whole)
        return rv(x + d.t0 * d.E, d.T * d.E);
    return rv(x, d.Tl * d.E);
}

/* The forward into the saved state and `out`. for_backward (the recompute of
 * DT_RECOMPUTE_BLOCK): stop once the state backward reads is complete, after c_fc's
 * product into h: the GELU's output, c_proj's product (a third of the block's forward
 * products, and under tp its sum over the group) and the residual add make only the
 * block's output, which backward does not read; of them only the second dropout's mask is
 * kept, and it is drawn alone. (PyTorch's non-reentrant checkpoint stops its recompute
 * the same way, once the last saved tensor is made.) */
static dt_status forward_inside(dt_layer *l, const float *x, float *out, int64_t batch,
                                const dt_forward_ctx *ctx, int for_backward)
{
    const dims d = dims_of(l);
    const int64_t R = batch * d.T, E = d.E, TlE = d.Tl * E;
    const int active = ctx != NULL && ctx->train && (l->spec.p > 0.0 || l->spec.attn_p > 0.0);
    for (int64_t r = 0; r < batch; r++) {
        blk_key k = {.active = (uint32_t)active};
        if (active) {
            DT_ASSERT(ctx->positions != NULL);
            k.seed = ctx->seed;
            k.epoch = (uint32_t)ctx->epoch;
            k.pos = (uint32_t)ctx->positions[r];
        }
        memcpy(field(l, F_KEYS, r), &k, sizeof k);
    }
    float *w1 = l->rows_ws, *w4 = l->rows_ws + R * E;
    float *qkv = ffield(l, F_QKV, 0), *h = ffield(l, F_H, 0);
    const rowsv xs = in_rows(l, x), x1 = rv(ffield(l, F_X1, 0), TlE);
    /* The block's output rows: out itself, or (the last sequence-parallel block) this
     * rank's share in sp_own, gathered whole into out at the end. */
    const int gather_out = l->seq && l->seq_out_whole;
    const rowsv o = gather_out ? rv(sp_own(l, batch), d.Tp * E) : rv(out, TlE);
    dt_status st;
    /* l->fwd_hooks: between the pieces a ZeRO-3 prefetch moves (window.h). */
    if ((st = layernorm_whole(l, batch, DO_LN1, xs, w1)) != DT_OK)
        return st;
    xw(l, R, E, 3 * d.A, w1, T_QKVW, qkv);
    if ((st = dt_hooks_progress(l->fwd_hooks)) != DT_OK)
        return st;
    attention(l, batch, NULL, NULL);
    if ((st = dt_hooks_progress(l->fwd_hooks)) != DT_OK)
        return st;
    if ((st = project_out(l, batch, d.A, ffield(l, F_Y, 0), T_AOW, w4, x1)) != DT_OK)
        return st;
    rows(l, batch, DO_RESID1, xs, x1);
    if ((st = layernorm_whole(l, batch, DO_LN2, x1, w1)) != DT_OK)
        return st;
    xw(l, R, E, d.F, w1, T_FCW, h);
    if ((st = dt_hooks_progress(l->fwd_hooks)) != DT_OK)
        return st;
    if (for_backward) {
        if (active)
            rows(l, batch, DO_MASK2, xs, o);
        return DT_OK;
    }
    hidden(l, batch, DO_GELU, h, w4);
    if ((st = project_out(l, batch, d.F, w4, T_MOW, w1, o)) != DT_OK)
        return st;
    rows(l, batch, DO_RESID2, x1, o);
    return gather_out ? seq_gather(l, batch, out) : DT_OK;
}

/* One LayerNorm's backward over this rank's rows: dxn written from dyn, the input xin and
 * the saved stats. Each member of the team takes its share of the samples, in order, and
 * sums the gain's and bias's gradients into a partial of its own (after its attention
 * workspace); the partials are then added to the gradients in member order, so the bits
 * depend on the number of threads as the products' do, and on nothing else. */
typedef struct ln_job {
    const dt_layer *l;
    int64_t batch;
    int two;
    rowsv dyn, xin, dxn;
} ln_job;

static float *ln_partial(const dt_layer *l, int t)
{
    const dims d = dims_of(l);
    return l->ws + (size_t)t * l->ws_stride + dt_attn_ws_count(d.T, d.D);
}

static void ln_part(void *ctx, int t, int nt)
{
    const ln_job *j = ctx;
    const dt_layer *l = j->l;
    const dims d = dims_of(l);
    float *dg = ln_partial(l, t), *db = dg + d.E;
    memset(dg, 0, sizeof(float) * (size_t)(2 * d.E));
    int64_t lo, hi;
    dt_pool_share(j->batch, t, nt, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const float *st = ffield(l, F_STATS, r);
        dt_layernorm_backward(rw(j->dyn, r), rw(j->xin, r), st + (j->two ? 2 : 0) * d.Tl,
                              st + (j->two ? 3 : 1) * d.Tl,
                              tensor_at(l, j->two ? T_LN2G : T_LN1G, 0), d.Tl, d.E, rw(j->dxn, r),
                              dg, db);
    }
}

static void ln_backward(const dt_layer *l, int64_t batch, int two, rowsv dyn, rowsv xin, rowsv dxn)
{
    const dims d = dims_of(l);
    ln_job j = {.l = l, .batch = batch, .two = two, .dyn = dyn, .xin = xin, .dxn = dxn};
    dt_pool *team = batch > 1 && batch * d.T * d.E >= DT_PAR_MIN ? l->pool : NULL;
    dt_pool_run(team, ln_part, &j);
    float *dg = tensor_at(l, two ? T_LN2G : T_LN1G, 1),
          *db = tensor_at(l, two ? T_LN2B : T_LN1B, 1);
    for (int t = 0; t < dt_pool_size(team); t++) {
        const float *pg = ln_partial(l, t), *pb = pg + d.E;
        for (int64_t e = 0; e < d.E; e++) {
            dg[e] += pg[e];
            db[e] += pb[e];
        }
    }
}

/* After a column-parallel product's input gradient (R, E), partial on each rank: its sum
 * over the group (in place), or under sequence parallelism its reduce-scatter into this
 * rank's rows, started without blocking where the group can (*req), so that the weight
 * gradient's product runs while it travels (dw_overlapped), and finished by
 * finish_input_grad. */
static dt_status start_input_grad(const dt_layer *l, int64_t batch, float *partial, void **req)
{
    const dims d = dims_of(l);
    *req = NULL;
    if (!split(l))
        return DT_OK;
    dt_status st = need_group(l);
    const dt_tp_run *run = l->tp_run;
    if (st != DT_OK || run->group.start_sum == NULL)
        return st; /* the blocking form, in finish_input_grad */
    if (!l->seq)
        return run->group.start_sum(run->group.ctx, partial, (size_t)(batch * d.T * d.E), 0, req);
    const int64_t part = seq_pack(l, batch, partial);
    return run->group.start_sum(run->group.ctx, sp_all(l, batch), (size_t)part, 1, req);
}

/* The sum started by start_input_grad, complete: *sum says which rows hold it (partial's, or
 * under sequence parallelism `own`, this rank's positions). */
static dt_status finish_input_grad(const dt_layer *l, int64_t batch, float *partial, rowsv own,
                                   void **req, rowsv *sum)
{
    const dims d = dims_of(l);
    *sum = rv(partial, d.T * d.E);
    if (!split(l))
        return DT_OK;
    if (l->seq)
        *sum = own;
    const dt_tp_run *run = l->tp_run;
    if (*req == NULL) /* no non-blocking forms: the blocking ones now */
        return l->seq ? seq_scatter(l, batch, partial, own)
                      : sum_over_group(l, partial, batch * d.T);
    const dt_status st = run->group.wait(run->group.ctx, req);
    if (st == DT_OK && l->seq)
        seq_unpack(l, batch, own);
    return st;
}

/* A residual branch's gradient, whole (batch, T, E): dy's rows through the branch's dropout
 * (`what`), gathered over the positions under sequence parallelism (through `own`). */
static dt_status branch_grad(const dt_layer *l, int64_t batch, int what, rowsv dy, rowsv own,
                             float *whole)
{
    const dims d = dims_of(l);
    if (!l->seq) {
        rows(l, batch, what, dy, rv(whole, d.T * d.E));
        return DT_OK;
    }
    rows(l, batch, what, dy, own);
    return seq_gather(l, batch, whole);
}

/* A column-parallel projection's backward with the LayerNorm before it (c_fc after ln_2,
 * c_attn after ln_1: `what`): the LayerNorm's output recomputed whole into ln from this
 * rank's rows xin; the input gradient of dyc (R, N) first, into dxp, whose sum over the group
 * (each rank's columns give part of it) travels while the weight gradient's product runs;
 * then the LayerNorm's backward into dxn. */
static dt_status column_backward(const dt_layer *l, int64_t batch, int what, rowsv xin, float *ln,
                                 int64_t N, const float *dyc, int wk, float *dxp, rowsv own,
                                 rowsv dxn, const dt_backward_hooks *hooks)
{
    const dims d = dims_of(l);
    const int64_t R = batch * d.T, E = d.E;
    void *req = NULL;
    rowsv g;
    dt_status st = layernorm_whole(l, batch, what, xin, ln);
    if (st != DT_OK)
        return st;
    dx(l, R, E, N, dyc, wk, dxp);
    if ((st = start_input_grad(l, batch, dxp, &req)) != DT_OK)
        return st;
    const dt_status pst = dw_overlapped(l, R, E, N, ln, dyc, wk, hooks);
    if ((st = finish_input_grad(l, batch, dxp, own, &req, &g)) != DT_OK || (st = pst) != DT_OK)
        return st;
    ln_backward(l, batch, what == DO_LN2, g, xin, dxn);
    return DT_OK;
}

static void block_forward(dt_layer *l, const float *x, float *out, int64_t batch,
                          const dt_forward_ctx *ctx)
{
    l->fwd_status = forward_inside(l, x, out, batch, ctx, 0); /* the model reports it */
}

static dt_status block_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                                float *dxo, int64_t batch, const dt_backward_hooks *hooks)
{
    (void)y;
    dt_status st;
    const dims d = dims_of(l);
    const int64_t R = batch * d.T, E = d.E, TlE = d.Tl * E;
    float *w1 = l->rows_ws, *w2 = w1 + R * E, *w3 = w2 + R * E, *w4 = w3 + 3 * R * E;
    if (l->inner_recompute) {
        /* DT_RECOMPUTE_BLOCK: the state is working memory that the other blocks' forwards
         * have since used: the forward again, from the kept input and the rows' context (the
         * same masks from the same keys), as far as the state backward reads goes
         * (forward_inside's for_backward). */
        DT_ASSERT(l->recompute_ctx != NULL);
        if ((st = forward_inside(l, x, w4, batch, l->recompute_ctx, 1)) != DT_OK ||
            (st = dt_hooks_progress(hooks)) != DT_OK)
            return st;
    }
    const float *h = ffield(l, F_H, 0), *ya = ffield(l, F_Y, 0);
    const rowsv xs = in_rows(l, x), x1 = rv(ffield(l, F_X1, 0), TlE);
    /* dy's rows as this rank holds them: its share of a whole dy under the last
     * sequence-parallel block. */
    const rowsv dys = l->seq && l->seq_out_whole ? rv(dy + d.t0 * E, d.T * E) : rv(dy, TlE);
    /* Under sequence parallelism, this rank's rows of d x1 and of the block's input
     * gradient (w2's and w1's room, read as (batch, Tl, E)), and its padded share. */
    const rowsv own = rv(sp_own(l, batch), d.Tp * E);
    const rowsv dx1 = rv(w2, l->seq ? TlE : d.T * E), dxl = rv(w1, l->seq ? TlE : d.T * E);
    /* The MLP branch: dy through the second dropout (gathered over the positions under
     * sequence parallelism), c_proj, the GELU and c_fc. The GELU's output, which c_proj's
     * weight gradient needs, and its derivative come from one pass over the saved h, the
     * derivative written over h (read by nothing after this backward). */
    if ((st = branch_grad(l, batch, DO_UNDROP2, dys, own, w1)) != DT_OK)
        return st;
    hidden(l, batch, DO_GELU_BOTH, h, w4);
    dw(l, R, d.F, E, w4, w1, T_MOW);
    dx(l, R, d.F, E, w1, T_MOW, w4);
    hidden(l, batch, DO_TIMES, h, w4);
    if ((st = dt_hooks_progress(hooks)) != DT_OK)
        return st;
    /* c_fc and ln_2 (each rank's hidden units give part of d ln_2's output) */
    if ((st = column_backward(l, batch, DO_LN2, x1, w2, d.F, w4, T_FCW, w1, own, dx1, hooks)) !=
        DT_OK)
        return st;
    rows(l, batch, DO_ADD, dys, dx1); /* d x1: the residual's and the branch's */
    if ((st = dt_hooks_progress(hooks)) != DT_OK)
        return st;
    /* The attention branch. */
    if ((st = branch_grad(l, batch, DO_UNDROP1, dx1, own, w1)) != DT_OK)
        return st;
    dw(l, R, d.A, E, ya, w1, T_AOW);
    dx(l, R, d.A, E, w1, T_AOW, w4);
    attention(l, batch, w4, w3);
    if ((st = dt_hooks_progress(hooks)) != DT_OK)
        return st;
    /* c_attn and ln_1 (each rank's heads give part of d ln_1's output), its input gradient
     * into w4, which the attention's backward has consumed */
    if ((st = column_backward(l, batch, DO_LN1, xs, w1, 3 * d.A, w3, T_QKVW, w4, own, dxl,
                              hooks)) != DT_OK)
        return st;
    if (dxo == NULL)
        return DT_OK;
    /* the input's: the residual's and the branch's */
    if (l->seq && l->seq_in_whole) { /* the run of blocks begins here: the input was whole */
        rows(l, batch, DO_ADD, dx1, dxl);
        return rows_gather(l, batch, dxl, dxo);
    }
    for (int64_t e = 0; e < batch * TlE; e++)
        dxo[e] = w2[e] + w1[e];
    return DT_OK;
}

const dt_layer_ops dt_block_ops = {
    .kind = DT_LAYER_BLOCK,
    .bwd_reads_x = 1,
    .state_by_field = 1,
    .recomputes_inside = 1,
    .plan = block_plan,
    .forward = block_forward,
    .backward = block_backward,
    .tensors = block_tensors,
};
