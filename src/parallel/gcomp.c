/* gcomp.c — compressed gradient exchange over a data-parallel group (gcomp.h says what each
 * mode computes; compress.h has the kernels, core/half.h the 16-bit conversions). */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "parallel/compress.h"
#include "parallel/gcomp.h"

typedef struct gcomp_mat {
    size_t offset; /* of the weight in the flat buffer */
    int64_t rows, cols;
    int r;
    size_t p_at, q_at; /* of its P in pbuf, its Q in qbuf (elements) */
} gcomp_mat;

struct dt_gcomp {
    dt_compress_options o;
    dt_comm *comm;
    int size;
    dt_gcomp_bucket *buckets;
    int nbuckets;
    size_t n;          /* parameters */
    float *e;          /* [n] residual (topk, powersgd with error feedback) */
    uint16_t *half;    /* [n] fp16 / bf16 staging */
    size_t *k;         /* [nbuckets] topk: entries sent per bucket */
    uint8_t *send;     /* topk: [sum k * 8] each bucket's (idx[k], val[k]) */
    uint8_t *recv;     /* topk: [size * sum k * 8] every rank's */
    size_t *send_at;   /* [nbuckets] byte offset of bucket b in send; recv at size * it */
    uint32_t *scratch; /* topk: [largest bucket] */
    gcomp_mat *mats;   /* powersgd */
    int nmats;
    size_t *whole_off, *whole_cnt; /* powersgd: tensors summed whole */
    int nwhole;
    float *pbuf; /* powersgd: every P, then the whole tensors */
    float *qbuf; /* powersgd: every Q (the warm start) */
    size_t p_len, whole_len, q_len;
    size_t wire;
};

int dt_gcomp_per_bucket(const dt_gcomp *g)
{
    return g->o.kind != DT_COMPRESS_POWERSGD;
}

size_t dt_gcomp_wire_bytes(const dt_gcomp *g)
{
    return g->wire;
}

float *dt_gcomp_residual(dt_gcomp *g, size_t *count)
{
    *count = g->e != NULL ? g->n : 0;
    return g->e;
}

void dt_gcomp_forget_nonfinite(dt_gcomp *g)
{
    for (size_t i = 0; g->e != NULL && i < g->n; i++)
        if (!isfinite(g->e[i]))
            g->e[i] = 0.0f;
    for (int j = 0; j < g->nmats; j++)
        (void)dt_psgd_redraw_nonfinite(g->qbuf + g->mats[j].q_at, g->mats[j].cols, g->mats[j].r,
                                       DT_PSGD_Q_SEED, (uint64_t)j);
}

float *dt_gcomp_factors(dt_gcomp *g, size_t *count)
{
    *count = g->q_len;
    return g->q_len > 0 ? g->qbuf : NULL;
}

void dt_gcomp_free(dt_gcomp *g)
{
    if (g == NULL)
        return;
    dt_free(g->buckets);
    dt_free(g->e);
    dt_free(g->half);
    dt_free(g->k);
    dt_free(g->send);
    dt_free(g->recv);
    dt_free(g->send_at);
    dt_free(g->scratch);
    dt_free(g->mats);
    dt_free(g->whole_off);
    dt_free(g->whole_cnt);
    dt_free(g->pbuf);
    dt_free(g->qbuf);
    dt_free(g);
}

static dt_status plan_topk(dt_gcomp *g)
{
    dt_status st = DT_OK;
    const size_t nb = (size_t)g->nbuckets;
    size_t total = 0, largest = 1;
    DT_TRY(dt_alloc(nb * sizeof(size_t), "top-k counts", (void **)&g->k));
    DT_TRY(dt_alloc(nb * sizeof(size_t), "top-k offsets", (void **)&g->send_at));
    for (size_t b = 0; b < nb; b++) {
        const size_t c = g->buckets[b].count;
        if (c >= UINT32_MAX)
            return dt_fail(DT_ERR_UNSUPPORTED,
                           "compress topk: a bucket of %zu gradients; "
                           "lower parallel.bucket_cap_mb below 16 GiB",
                           c);
        g->k[b] = dt_topk_count(c, g->o.ratio);
        g->send_at[b] = total;
        total += g->k[b] * 8;
        largest = c > largest ? c : largest;
    }
    DT_TRY(dt_alloc(total, "top-k send buffer", (void **)&g->send));
    DT_TRY(dt_alloc_large((size_t)g->size * total, "top-k receive buffer", (void **)&g->recv));
    DT_TRY(dt_alloc(largest * sizeof(uint32_t), "top-k scratch", (void **)&g->scratch));
    g->wire = total;
fail:
    return st;
}

/* PowerSGD's plan: which tensors go as factors (2-D and up, viewed as (shape[0], rest),
 * when the factors are smaller) and which whole; P, Q and the whole tensors' buffers. */
static dt_status plan_powersgd(dt_gcomp *g, const dt_model *m)
{
    dt_status st = DT_OK;
    const int nt = dt_model_tensor_count(m);
    DT_TRY(dt_alloc((size_t)nt * sizeof(gcomp_mat), "PowerSGD matrices", (void **)&g->mats));
    DT_TRY(dt_alloc((size_t)nt * sizeof(size_t), "PowerSGD tensors", (void **)&g->whole_off));
    DT_TRY(dt_alloc((size_t)nt * sizeof(size_t), "PowerSGD tensors", (void **)&g->whole_cnt));
    for (int i = 0; i < nt; i++) {
        const dt_param_info *t = dt_model_tensor(m, i);
        int64_t rows, cols;
        int r;
        if (dt_psgd_view(t->ndim, t->shape[0], t->count, g->o.rank, &rows, &cols, &r)) {
            g->mats[g->nmats++] = (gcomp_mat){.offset = t->offset,
                                              .rows = rows,
                                              .cols = cols,
                                              .r = r,
                                              .p_at = g->p_len,
                                              .q_at = g->q_len};
            g->p_len += (size_t)rows * (size_t)r;
            g->q_len += (size_t)cols * (size_t)r;
        } else {
            g->whole_off[g->nwhole] = t->offset;
            g->whole_cnt[g->nwhole++] = t->count;
            g->whole_len += t->count;
        }
    }
    DT_TRY(dt_alloc((g->p_len + g->whole_len) * sizeof(float), "PowerSGD P", (void **)&g->pbuf));
    DT_TRY(
        dt_alloc((g->q_len > 0 ? g->q_len : 1) * sizeof(float), "PowerSGD Q", (void **)&g->qbuf));
    for (int j = 0; j < g->nmats; j++)
        dt_psgd_init_q(g->qbuf + g->mats[j].q_at, g->mats[j].cols, g->mats[j].r, DT_PSGD_Q_SEED,
                       (uint64_t)j);
    g->wire = (g->p_len + g->whole_len + g->q_len) * sizeof(float);
fail:
    return st;
}

dt_status dt_gcomp_create(const dt_compress_options *o, dt_comm *comm, const dt_model *m,
                          const dt_gcomp_bucket *buckets, int nbuckets, dt_gcomp **out)
{
    dt_status st = DT_OK;
    dt_gcomp *g = NULL;
    *out = NULL;
    DT_ASSERT(o->kind > DT_COMPRESS_NONE && o->kind < DT_COMPRESS_COUNT && nbuckets >= 1);
    DT_TRY(dt_alloc(sizeof *g, "gradient compression", (void **)&g));
    g->o = *o;
    g->comm = comm;
    g->size = dt_comm_size(comm);
    g->n = dt_model_param_count(m);
    g->nbuckets = nbuckets;
    DT_TRY(dt_alloc((size_t)nbuckets * sizeof *buckets, "buckets", (void **)&g->buckets));
    memcpy(g->buckets, buckets, (size_t)nbuckets * sizeof *buckets);
    if (o->kind == DT_COMPRESS_FP16 || o->kind == DT_COMPRESS_BF16) {
        DT_TRY(dt_alloc_large(g->n * sizeof(uint16_t), "16-bit gradients", (void **)&g->half));
        g->wire = g->n * sizeof(uint16_t);
    } else if (o->kind == DT_COMPRESS_TOPK) {
        DT_TRY(plan_topk(g));
    } else {
        DT_TRY(plan_powersgd(g, m));
    }
    if (o->error_feedback && (o->kind == DT_COMPRESS_TOPK || o->kind == DT_COMPRESS_POWERSGD))
        DT_TRY(dt_alloc_large(g->n * sizeof(float), "error feedback", (void **)&g->e));
    /* The collectives' staging, sized now so that no step allocates. */
    DT_TRY(dt_comm_reserve(comm, g->n * sizeof(float) * (size_t)(g->size > 1 ? 2 : 1)));
    *out = g;
    return DT_OK;
fail:
    dt_gcomp_free(g);
    return st;
}

dt_status dt_gcomp_start(dt_gcomp *g, float *grads, int b, dt_comm_req **req)
{
    const dt_gcomp_bucket *k = &g->buckets[b];
    float *x = grads + k->offset;
    if (g->o.kind == DT_COMPRESS_FP16 || g->o.kind == DT_COMPRESS_BF16) {
        uint16_t *h = g->half + k->offset;
        const int f16 = g->o.kind == DT_COMPRESS_FP16;
        if (f16)
            dt_f32_to_f16_n(x, h, k->count);
        else
            dt_f32_to_bf16_n(x, h, k->count);
        return dt_comm_iallreduce(g->comm, h, h, k->count, f16 ? DT_COMM_FLOAT16 : DT_COMM_BFLOAT16,
                                  DT_COMM_SUM, req);
    }
    DT_ASSERT(g->o.kind == DT_COMPRESS_TOPK);
    const size_t kb = g->k[b];
    uint8_t *s = g->send + g->send_at[b];
    uint32_t *idx = (uint32_t *)(void *)s;
    float *val = (float *)(void *)(s + kb * sizeof(uint32_t));
    if (g->e != NULL)
        dt_topk_feedback(x, g->e + k->offset, k->count, kb, idx, val, g->scratch);
    else
        dt_topk_select(x, k->count, kb, idx, val, g->scratch);
    return dt_comm_iallgather(g->comm, s, g->recv + (size_t)g->size * g->send_at[b], kb * 8,
                              DT_COMM_UINT8, req);
}

void dt_gcomp_finish(dt_gcomp *g, float *grads, int b)
{
    const dt_gcomp_bucket *k = &g->buckets[b];
    float *x = grads + k->offset;
    if (g->o.kind == DT_COMPRESS_FP16) {
        dt_f16_to_f32_n(g->half + k->offset, x, k->count);
        return;
    }
    if (g->o.kind == DT_COMPRESS_BF16) {
        dt_bf16_to_f32_n(g->half + k->offset, x, k->count);
        return;
    }
    /* Every rank's entries added in rank order onto zeros: the same bits everywhere. */
    const size_t kb = g->k[b];
    const uint8_t *all = g->recv + (size_t)g->size * g->send_at[b];
    memset(x, 0, k->count * sizeof(float));
    for (int r = 0; r < g->size; r++) {
        const uint8_t *s = all + (size_t)r * kb * 8;
        dt_sparse_add(x, (const uint32_t *)(const void *)s,
                      (const float *)(const void *)(s + kb * sizeof(uint32_t)), kb);
    }
}

/* M = G + E for every factored matrix (in e, which then holds M), or M = G without error
 * feedback; P = M Q into pbuf, the whole tensors after the P's. */
static void psgd_factor_p(dt_gcomp *g, float *grads)
{
    for (int j = 0; j < g->nmats; j++) {
        const gcomp_mat *a = &g->mats[j];
        const size_t cnt = (size_t)a->rows * (size_t)a->cols;
        float *m = grads + a->offset;
        if (g->e != NULL) {
            float *e = g->e + a->offset;
            for (size_t i = 0; i < cnt; i++)
                e[i] += m[i];
            m = e;
        }
        float *q = g->qbuf + a->q_at;
        dt_psgd_orthonormalize(q, a->cols, a->r);
        dt_psgd_p(m, a->rows, a->cols, q, a->r, g->pbuf + a->p_at);
    }
    float *w = g->pbuf + g->p_len;
    for (int i = 0; i < g->nwhole; i++) {
        memcpy(w, grads + g->whole_off[i], g->whole_cnt[i] * sizeof(float));
        w += g->whole_cnt[i];
    }
}

dt_status dt_gcomp_run(dt_gcomp *g, float *grads)
{
    dt_status st = DT_OK;
    DT_ASSERT(g->o.kind == DT_COMPRESS_POWERSGD);
    psgd_factor_p(g, grads);
    DT_TRY(dt_comm_allreduce(g->comm, g->pbuf, g->pbuf, g->p_len + g->whole_len, DT_COMM_FLOAT32,
                             DT_COMM_SUM));
    for (int j = 0; j < g->nmats; j++) {
        const gcomp_mat *a = &g->mats[j];
        const float *m = (g->e != NULL ? g->e : grads) + a->offset;
        float *p = g->pbuf + a->p_at;
        dt_psgd_orthonormalize(p, a->rows, a->r);
        dt_psgd_q(m, a->rows, a->cols, p, a->r, g->qbuf + a->q_at);
    }
    if (g->q_len > 0)
        DT_TRY(
            dt_comm_allreduce(g->comm, g->qbuf, g->qbuf, g->q_len, DT_COMM_FLOAT32, DT_COMM_SUM));
    const float inv = 1.0f / (float)g->size;
    for (int j = 0; j < g->nmats; j++) {
        const gcomp_mat *a = &g->mats[j];
        const size_t cnt = (size_t)a->rows * (size_t)a->cols;
        float *out = grads + a->offset;
        dt_psgd_approx(g->pbuf + a->p_at, g->qbuf + a->q_at, a->rows, a->cols, a->r, out);
        if (g->e != NULL) { /* e held M: keep this rank's share of what was not carried */
            float *e = g->e + a->offset;
            for (size_t i = 0; i < cnt; i++)
                e[i] -= out[i] * inv;
        }
    }
    const float *w = g->pbuf + g->p_len;
    for (int i = 0; i < g->nwhole; i++) {
        memcpy(grads + g->whole_off[i], w, g->whole_cnt[i] * sizeof(float));
        w += g->whole_cnt[i];
    }
fail:
    return st;
}
