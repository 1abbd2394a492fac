/* ps_psgd.c — PowerSGD for ps pushes: each worker's own power step, its factors cut to the
 * servers' shards (ps_psgd.h says what is computed and sent). */
#include <string.h>

#include "parallel/compress.h"
#include "parallel/ps_psgd.h"

typedef struct psgd_mat {
    size_t offset; /* of the weight in the flat buffer */
    int64_t rows, cols;
    int r;
    size_t p_at, q_at; /* of its P in p->p, its Q in p->q (elements) */
} psgd_mat;

/* A piece of a server's shard: where a tensor and the shard overlap. A piece of a factored
 * matrix goes as factors, or dense when its rows' factors would not be smaller than its
 * elements (a few elements of a matrix that a shard boundary cuts): no push is larger than
 * the float32 one. */
typedef struct psgd_piece {
    int mat;         /* the factored matrix it is part of, or -1 */
    int dense;       /* sent as its values: M's, the residual keeping nothing there */
    size_t lo, cnt;  /* its elements in the flat buffer */
    int64_t r0, r1;  /* the matrix's rows that hold them */
    size_t stash_at; /* dense part of a matrix: where its M waits in stash */
} psgd_piece;

struct dt_ps_psgd {
    psgd_mat *mats;
    int nmats, nt;
    psgd_piece *pieces; /* [servers][nt]: server s's from s * nt */
    int *npieces;       /* [servers] */
    size_t *bytes;      /* [servers]: payload bytes */
    float *p, *q;       /* worker: every matrix's P (rows, r) and Q (cols, r) */
    float *scratch;     /* worker: one matrix's A; server: one piece's rows of A */
    float *stash;       /* worker with a residual: M of the dense pieces of matrices */
    size_t p_len, q_len, stash_len;
    int servers;
};

void dt_ps_psgd_free(dt_ps_psgd *p)
{
    if (p == NULL)
        return;
    dt_free(p->mats);
    dt_free(p->pieces);
    dt_free(p->npieces);
    dt_free(p->bytes);
    dt_free(p->p);
    dt_free(p->q);
    dt_free(p->scratch);
    dt_free(p->stash);
    dt_free(p);
}

/* Which tensors are factored: those ddp's PowerSGD factors (gcomp.c), in the same order,
 * so that Q's layout is ddp's. Returns the largest matrix's element count. */
static size_t plan_mats(dt_ps_psgd *p, const dt_model *m, int rank)
{
    size_t largest = 0;
    for (int i = 0; i < p->nt; i++) {
        const dt_param_info *t = dt_model_tensor(m, i);
        int64_t rows, cols;
        int r;
        if (!dt_psgd_view(t->ndim, t->shape[0], t->count, rank, &rows, &cols, &r))
            continue;
        p->mats[p->nmats++] = (psgd_mat){.offset = t->offset,
                                         .rows = rows,
                                         .cols = cols,
                                         .r = r,
                                         .p_at = p->p_len,
                                         .q_at = p->q_len};
        p->p_len += (size_t)rows * (size_t)r;
        p->q_len += (size_t)cols * (size_t)r;
        largest = t->count > largest ? t->count : largest;
    }
    return largest;
}

/* Server s's pieces and payload bytes; returns the most elements one piece's rows hold. */
static size_t plan_server(dt_ps_psgd *p, const dt_model *m, int s, size_t off, size_t cnt)
{
    size_t most = 0;
    int j = 0; /* the next factored matrix, in tensor order */
    psgd_piece *out = p->pieces + (size_t)s * (size_t)p->nt;
    for (int i = 0; i < p->nt; i++) {
        const dt_param_info *t = dt_model_tensor(m, i);
        const int factored = j < p->nmats && p->mats[j].offset == t->offset;
        const size_t lo = t->offset > off ? t->offset : off,
                     hi = t->offset + t->count < off + cnt ? t->offset + t->count : off + cnt;
        if (lo < hi) {
            psgd_piece *x = &out[p->npieces[s]++];
            *x = (psgd_piece){
                .mat = factored ? j : -1, .dense = !factored, .lo = lo, .cnt = hi - lo};
            if (factored) {
                const psgd_mat *a = &p->mats[j];
                const size_t c = (size_t)a->cols;
                x->r0 = (int64_t)((lo - a->offset) / c);
                x->r1 = (int64_t)((hi - a->offset + c - 1) / c);
                const size_t rows = (size_t)(x->r1 - x->r0);
                x->dense = (rows + c) * (size_t)a->r >= x->cnt;
                if (!x->dense) {
                    p->bytes[s] += (rows + c) * (size_t)a->r * sizeof(float);
                    most = rows * c > most ? rows * c : most;
                } else {
                    x->stash_at = p->stash_len;
                    p->stash_len += x->cnt;
                }
            }
            if (x->dense)
                p->bytes[s] += x->cnt * sizeof(float);
        }
        j += factored;
    }
    return most;
}

dt_status dt_ps_psgd_create(const dt_compress_options *o, const dt_model *m, int servers,
                            const size_t *shard_off, const size_t *shard_cnt, int worker,
                            int with_residual, dt_ps_psgd **out)
{
    dt_status st = DT_OK;
    dt_ps_psgd *p = NULL;
    *out = NULL;
    DT_ASSERT(o->kind == DT_COMPRESS_POWERSGD && servers >= 1);
    DT_TRY(dt_alloc(sizeof *p, "PowerSGD pushes", (void **)&p));
    p->nt = dt_model_tensor_count(m);
    p->servers = servers;
    const size_t nt = (size_t)(p->nt > 0 ? p->nt : 1), k = (size_t)servers;
    DT_TRY(dt_alloc(nt * sizeof *p->mats, "PowerSGD matrices", (void **)&p->mats));
    DT_TRY(dt_alloc(k * nt * sizeof *p->pieces, "PowerSGD pieces", (void **)&p->pieces));
    DT_TRY(dt_alloc(k * sizeof *p->npieces, "PowerSGD pieces", (void **)&p->npieces));
    DT_TRY(dt_alloc(k * sizeof *p->bytes, "PowerSGD pieces", (void **)&p->bytes));
    const size_t largest = plan_mats(p, m, o->rank);
    size_t most = 0;
    for (int s = 0; s < servers; s++) {
        const size_t x = plan_server(p, m, s, shard_off[s], shard_cnt[s]);
        most = x > most ? x : most;
    }
    if (worker) {
        DT_TRY(
            dt_alloc((p->p_len > 0 ? p->p_len : 1) * sizeof(float), "PowerSGD P", (void **)&p->p));
        DT_TRY(
            dt_alloc((p->q_len > 0 ? p->q_len : 1) * sizeof(float), "PowerSGD Q", (void **)&p->q));
        for (int j = 0; j < p->nmats; j++)
            dt_psgd_init_q(p->q + p->mats[j].q_at, p->mats[j].cols, p->mats[j].r, DT_PSGD_Q_SEED,
                           (uint64_t)j);
    }
    const size_t room = worker ? (with_residual ? largest : 0) : most;
    if (room > 0)
        DT_TRY(dt_alloc_large(room * sizeof(float), "PowerSGD scratch", (void **)&p->scratch));
    if (worker && with_residual && p->stash_len > 0)
        DT_TRY(dt_alloc(p->stash_len * sizeof(float), "PowerSGD pieces", (void **)&p->stash));
    *out = p;
    return DT_OK;
fail:
    dt_ps_psgd_free(p);
    return st;
}

size_t dt_ps_psgd_bytes(const dt_ps_psgd *p, int s)
{
    return p->bytes[s];
}

/* Matrix j's pieces that go dense: their M (m, the matrix) into the stash, to be sent as it
 * is (take), or the residual emptied there, nothing of it left behind (not take). */
static void stash_dense(dt_ps_psgd *p, int j, const float *m, float *e, int take)
{
    const size_t off = p->mats[j].offset;
    for (int s = 0; s < p->servers; s++) {
        const psgd_piece *x = p->pieces + (size_t)s * (size_t)p->nt;
        for (int i = 0; i < p->npieces[s]; i++, x++) {
            if (x->mat != j || !x->dense)
                continue;
            if (take)
                memcpy(p->stash + x->stash_at, m + (x->lo - off), x->cnt * sizeof(float));
            else
                memset(e + x->lo, 0, x->cnt * sizeof(float));
        }
    }
}

void dt_ps_psgd_factor(dt_ps_psgd *p, const float *g, float *e)
{
    for (int j = 0; j < p->nmats; j++) {
        const psgd_mat *a = &p->mats[j];
        const size_t cnt = (size_t)a->rows * (size_t)a->cols;
        const float *m = g + a->offset;
        if (e != NULL) {
            float *x = e + a->offset;
            for (size_t i = 0; i < cnt; i++)
                x[i] += m[i];
            m = x;
        }
        float *q = p->q + a->q_at, *pm = p->p + a->p_at;
        dt_psgd_orthonormalize(q, a->cols, a->r);
        dt_psgd_p(m, a->rows, a->cols, q, a->r, pm);
        dt_psgd_orthonormalize(pm, a->rows, a->r);
        dt_psgd_q(m, a->rows, a->cols, pm, a->r, q);
        if (p->stash != NULL)
            stash_dense(p, j, m, e, 1);
        if (e != NULL) { /* E := M - P Q^T: what this push leaves for the next */
            float *x = e + a->offset;
            dt_psgd_approx(pm, q, a->rows, a->cols, a->r, p->scratch);
            for (size_t i = 0; i < cnt; i++)
                x[i] -= p->scratch[i];
            stash_dense(p, j, m, e, 0);
        }
    }
}

void dt_ps_psgd_write(const dt_ps_psgd *p, int s, const float *g, uint8_t *out)
{
    const psgd_piece *x = p->pieces + (size_t)s * (size_t)p->nt;
    for (int i = 0; i < p->npieces[s]; i++, x++) {
        if (x->dense) { /* a matrix's M from the stash (the residual added), or g */
            const float *v = x->mat >= 0 && p->stash != NULL ? p->stash + x->stash_at : g + x->lo;
            memcpy(out, v, x->cnt * sizeof(float));
            out += x->cnt * sizeof(float);
            continue;
        }
        const psgd_mat *a = &p->mats[x->mat];
        const size_t pn = (size_t)(x->r1 - x->r0) * (size_t)a->r,
                     qn = (size_t)a->cols * (size_t)a->r;
        memcpy(out, p->p + a->p_at + (size_t)x->r0 * (size_t)a->r, pn * sizeof(float));
        out += pn * sizeof(float);
        memcpy(out, p->q + a->q_at, qn * sizeof(float));
        out += qn * sizeof(float);
    }
}

void dt_ps_psgd_read(dt_ps_psgd *p, int s, size_t off, const uint8_t *in, float *dense)
{
    const psgd_piece *x = p->pieces + (size_t)s * (size_t)p->nt;
    for (int i = 0; i < p->npieces[s]; i++, x++) {
        float *to = dense + (x->lo - off);
        if (x->dense) {
            memcpy(to, in, x->cnt * sizeof(float));
            in += x->cnt * sizeof(float);
            continue;
        }
        const psgd_mat *a = &p->mats[x->mat];
        const int64_t rows = x->r1 - x->r0;
        const size_t pn = (size_t)rows * (size_t)a->r, qn = (size_t)a->cols * (size_t)a->r;
        const float *pf = (const float *)(const void *)in,
                    *qf = (const float *)(const void *)(in + pn * sizeof(float));
        dt_psgd_approx(pf, qf, rows, a->cols, a->r, p->scratch);
        const size_t first = x->lo - a->offset - (size_t)x->r0 * (size_t)a->cols;
        memcpy(to, p->scratch + first, x->cnt * sizeof(float));
        in += (pn + qn) * sizeof(float);
    }
}

float *dt_ps_psgd_factors(dt_ps_psgd *p, size_t *count)
{
    *count = p->q_len;
    return p->q_len > 0 ? p->q : NULL;
}

void dt_ps_psgd_forget_nonfinite(dt_ps_psgd *p)
{
    for (int j = 0; p->q != NULL && j < p->nmats; j++)
        (void)dt_psgd_redraw_nonfinite(p->q + p->mats[j].q_at, p->mats[j].cols, p->mats[j].r,
                                       DT_PSGD_Q_SEED, (uint64_t)j);
}
