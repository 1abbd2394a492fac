/* attention.c — causal self-attention of one (sequence, head), FlashAttention-style (Dao et
 * al. 2022, "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness",
 * Algorithms 1 and 2); tfm_kernels.h gives the shapes and the contract.
 *
 * No T x T matrix exists: queries and keys go in blocks of DT_ATTN_TILE (BR query rows
 * against BC keys). The forward keeps, per query row, the running maximum m and sum l of
 * the exponentials (the online softmax), rescales the row's output accumulator when m
 * grows, divides by l at the end and saves lse = m + log l. The backward walks key blocks
 * outermost, recomputes P_ij = exp(s_ij - lse_i) for each query block at or below the
 * diagonal, and accumulates dv_j += P^T dy_i, dk_j += dS^T q_i, dq_i += dS k_j with
 * dS = P (dP - D_i), dP = dy_i v_j^T and D_i = dy_i . y_i (FlashAttention's trick: the
 * softmax's backward needs only the row's output, not the row of P).
 *
 * The products of a block pair read qkv in place (leading dimension 3E). P^T dy and dS^T q
 * accumulate straight into dqkv through cblas_sgemm (a transposed operand: it never
 * allocates); the plain C = A B ones go through dt_sgemm_nn (gemm.h says why): s = q (scale
 * k^T) and dp = dy v^T against k^T and v^T transposed once per head into the workspace
 * (OpenBLAS's plain products are faster than its q k^T form, docs/NOTES.md), P v and dS k
 * into the workspace, then added where they belong. Exponentials are vmath.h's, 16 at a time; the
 * row reductions (max, sum) are written out in 16 lanes, since gcc vectorises no float reduction
 * without -ffast-math. Blocks above the diagonal are skipped; the diagonal blocks compute their
 * upper triangle in the product and then zero it.
 *
 * Dropout redraws each element's keep decision from Philox in both passes (tfm_kernels.h
 * gives the key), 4 decisions per call; the running sum l is taken before dropping, so lse
 * is the undropped softmax's and the backward's P (from lse) is the undropped P. */
#include "tensor/tfm_kernels.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "dtrain/core.h"
#include "dtrain/rng.h"
#include "tensor/gemm.h"
#include "tensor/vmath.h"

enum { BR = DT_ATTN_TILE, BC = DT_ATTN_TILE };

/* Workspace parts start on 64-byte boundaries when ws does. */
static int64_t round16(int64_t n)
{
    return (n + 15) / 16 * 16;
}

int64_t dt_attn_ws_count(int64_t T, int64_t D)
{
    /* s (BR x BC), dp (BR x BC), a BR x D product, D_i (T), then scale k^T (D x T) and v^T
     * (D x T) for the backward; the forward uses s, the product and k^T. */
    return 2 * round16(BR * BC) + round16(BR * D) + round16(T) + 2 * round16(D * T);
}

/* ---- dropout -------------------------------------------------------------------------- */

typedef struct drop_key {
    int on;
    float p, scale;
    uint64_t sub;
    uint32_t h0;
} drop_key;

static drop_key drop_key_of(const dt_attn_dropout *d)
{
    drop_key k = {0};
    if (d == NULL || !(d->p > 0.0))
        return k;
    DT_ASSERT(d->p < 1.0);
    uint32_t w[4];
    dt_philox(d->seed, d->ctr[0], d->ctr[1], d->ctr[2], d->ctr[3], w);
    k.on = 1;
    k.p = (float)d->p;
    k.scale = (float)(1.0 / (1.0 - d->p));
    k.sub = (uint64_t)w[0] | (uint64_t)w[1] << 32;
    k.h0 = d->h0;
    return k;
}

int dt_attn_keep(const dt_attn_dropout *d, int64_t h, int64_t i, int64_t j)
{
    const drop_key k = drop_key_of(d);
    if (!k.on)
        return 1;
    uint32_t w[4];
    dt_philox(k.sub, (uint32_t)i, (uint32_t)(j / 4), (uint32_t)h + k.h0, 0, w);
    return dt_u01f(w[j % 4]) >= k.p;
}

/* mult[c] = scale when element (h, i, j0 + c) is kept, else 0, for c < n. */
static void drop_row(const drop_key *k, int64_t h, int64_t i, int64_t j0, int64_t n, float *mult)
{
    for (int64_t c = 0; c < n;) {
        const int64_t j = j0 + c;
        uint32_t w[4];
        dt_philox(k->sub, (uint32_t)i, (uint32_t)(j / 4), (uint32_t)h + k->h0, 0, w);
        for (int64_t q = j % 4; q < 4 && c < n; q++, c++)
            mult[c] = dt_u01f(w[q]) >= k->p ? k->scale : 0.0f;
    }
}

/* ---- row helpers ---------------------------------------------------------------------- */

DT_VEC_INLINE float hsum16(dt_vf s)
{
    return (((s[0] + s[8]) + (s[4] + s[12])) + ((s[2] + s[10]) + (s[6] + s[14]))) +
           (((s[1] + s[9]) + (s[5] + s[13])) + ((s[3] + s[11]) + (s[7] + s[15])));
}

/* max of s[0..n), n >= 1. */
DT_VEC_INLINE float row_max(const float *s, int64_t n)
{
    int64_t c = 0;
    float m = s[0];
    if (n >= DT_VL) {
        dt_vf v = dt_vload(s);
        for (c = DT_VL; c + DT_VL <= n; c += DT_VL) {
            const dt_vf x = dt_vload(s + c);
            v = dt_vselect(x > v, x, v);
        }
        for (int l = 0; l < DT_VL; l++)
            m = v[l] > m ? v[l] : m;
    }
    for (; c < n; c++)
        m = s[c] > m ? s[c] : m;
    return m;
}

/* s[c] = exp(s[c] - sub) for c < n, in place; returns their sum (16 lanes, then pairwise). */
DT_VEC_INLINE float row_exp(float *s, int64_t n, float sub)
{
    dt_vf acc = {0};
    int64_t c = 0;
    for (; c + DT_VL <= n; c += DT_VL) {
        const dt_vf e = dt_vexp(dt_vload(s + c) - sub);
        dt_vstore(s + c, e);
        acc += e;
    }
    if (c < n) { /* -inf in the padding: exp gives 0 */
        float buf[DT_VL];
        for (int l = 0; l < DT_VL; l++)
            buf[l] = c + l < n ? s[c + l] : -INFINITY;
        const dt_vf e = dt_vexp(dt_vload(buf) - sub);
        dt_vstore(buf, e);
        acc += e;
        memcpy(s + c, buf, (size_t)(n - c) * sizeof(float));
    }
    return hsum16(acc);
}

/* Keys j0 .. j0 + nvalid - 1 are causal for query i (j <= i); nvalid in [0, bc]. */
DT_VEC_INLINE int64_t n_valid(int64_t i, int64_t j0, int64_t bc)
{
    const int64_t n = i - j0 + 1;
    return n < 0 ? 0 : n > bc ? bc : n;
}

/* dst (D, T) = alpha src^T for src (T, D) with rows ld apart: k^T and v^T of a head, so
 * that s = q k^T and dp = dy v^T are plain products (OpenBLAS's NN kernels run 64 x 64 x 64
 * in about 3.2 us here, its NT ones in 5.2 us; one transpose per head serves every block). */
DT_VEC_INLINE void transpose(const float *src, int64_t ld, int64_t T, int64_t D, float alpha,
                             float *dst)
{
    for (int64_t j0 = 0; j0 < T; j0 += DT_VL) {
        const int64_t j1 = j0 + DT_VL < T ? j0 + DT_VL : T;
        for (int64_t d = 0; d < D; d++)
            for (int64_t j = j0; j < j1; j++)
                dst[d * T + j] = alpha * src[j * ld + d];
    }
}

static void check_args(int64_t T, int64_t E, int64_t H, int64_t h)
{
    DT_ASSERT(T >= 1 && H >= 1 && E >= H && E % H == 0 && h >= 0 && h < H);
    DT_ASSERT(3 * E <= INT_MAX && T <= INT_MAX);
}

/* ---- forward -------------------------------------------------------------------------- */

DT_VEC_CLONES void dt_attn_forward(const float *restrict qkv, int64_t T, int64_t E, int64_t H,
                                   int64_t h, float scale, const dt_attn_dropout *drop,
                                   float *restrict y, float *restrict lse, float *restrict ws)
{
    check_args(T, E, H, h);
    const int64_t D = E / H, ld = 3 * E;
    const float *q = qkv + h * D, *k = qkv + E + h * D, *v = qkv + 2 * E + h * D;
    float *s = ws, *pv = ws + 2 * round16(BR * BC);
    float *kt = pv + round16(BR * D) + round16(T);
    float *yh = y + h * D, *lh = lse + h * T;
    const drop_key dk = drop_key_of(drop);
    transpose(k, ld, T, D, scale, kt);

    for (int64_t i0 = 0; i0 < T; i0 += BR) {
        const int64_t br = T - i0 < BR ? T - i0 : BR;
        float m[BR], alpha[BR];
        double l[BR];
        for (int64_t r = 0; r < br; r++) {
            m[r] = -INFINITY;
            l[r] = 0.0;
        }
        /* Keys up to the block's last query. */
        for (int64_t j0 = 0; j0 < i0 + br; j0 += BC) {
            const int64_t bc = i0 + br - j0 < BC ? i0 + br - j0 : BC;
            /* s (br, bc) = q_i (scale k^T)_j */
            dt_sgemm_nn(br, bc, D, q + i0 * ld, ld, kt + j0, T, s, BC);
            for (int64_t r = 0; r < br; r++) {
                const int64_t i = i0 + r, nv = n_valid(i, j0, bc);
                float *row = s + r * BC;
                if (nv == 0) { /* no causal key here: nothing changes */
                    memset(row, 0, (size_t)bc * sizeof(float));
                    alpha[r] = 1.0f;
                    continue;
                }
                const float mx = row_max(row, nv);
                const float mnew = mx > m[r] ? mx : m[r];
                alpha[r] = m[r] == -INFINITY ? 0.0f : expf(m[r] - mnew);
                const float sum = row_exp(row, nv, mnew);
                memset(row + nv, 0, (size_t)(bc - nv) * sizeof(float));
                l[r] = l[r] * (double)alpha[r] + (double)sum;
                m[r] = mnew;
                if (dk.on) {
                    float mult[BC];
                    drop_row(&dk, h, i, j0, nv, mult);
                    for (int64_t c = 0; c < nv; c++)
                        row[c] *= mult[c];
                }
            }
            /* pv (br, D) = P v_j; y_i = alpha y_i + pv (the first block writes y_i). */
            dt_sgemm_nn(br, D, bc, s, BC, v + j0 * ld, ld, pv, D);
            for (int64_t r = 0; r < br; r++) {
                float *yr = yh + (i0 + r) * E;
                const float *pr = pv + r * D;
                if (j0 == 0) {
                    memcpy(yr, pr, (size_t)D * sizeof(float));
                } else {
                    const float a = alpha[r];
                    for (int64_t d = 0; d < D; d++)
                        yr[d] = a * yr[d] + pr[d];
                }
            }
        }
        for (int64_t r = 0; r < br; r++) {
            float *yr = yh + (i0 + r) * E;
            const float inv = (float)(1.0 / l[r]);
            for (int64_t d = 0; d < D; d++)
                yr[d] *= inv;
            lh[i0 + r] = (float)((double)m[r] + log(l[r]));
        }
    }
}

/* ---- backward ------------------------------------------------------------------------- */

/* D_i = dy_i . y_i over head h's D columns, for every row. */
DT_VEC_INLINE void row_dots(const float *dy, const float *y, int64_t T, int64_t E, int64_t D,
                            float *out)
{
    for (int64_t i = 0; i < T; i++) {
        const float *a = dy + i * E, *b = y + i * E;
        dt_vf acc = {0};
        int64_t d = 0;
        for (; d + DT_VL <= D; d += DT_VL)
            acc += dt_vload(a + d) * dt_vload(b + d);
        float t = hsum16(acc);
        for (; d < D; d++)
            t += a[d] * b[d];
        out[i] = t;
    }
}

DT_VEC_CLONES void dt_attn_backward(const float *restrict qkv, const float *restrict y,
                                    const float *restrict lse, const float *restrict dy, int64_t T,
                                    int64_t E, int64_t H, int64_t h, float scale,
                                    const dt_attn_dropout *drop, float *restrict dqkv,
                                    float *restrict ws)
{
    check_args(T, E, H, h);
    const int64_t D = E / H, ld = 3 * E;
    const float *q = qkv + h * D, *k = qkv + E + h * D, *v = qkv + 2 * E + h * D;
    const float *dyh = dy + h * D, *lh = lse + h * T;
    float *dq = dqkv + h * D, *dk = dqkv + E + h * D, *dv = dqkv + 2 * E + h * D;
    float *s = ws, *dp = ws + round16(BR * BC), *tmp = ws + 2 * round16(BR * BC);
    float *drow = tmp + round16(BR * D), *kt = drow + round16(T), *vt = kt + round16(D * T);
    const drop_key dkey = drop_key_of(drop);
    transpose(k, ld, T, D, scale, kt);
    transpose(v, ld, T, D, 1.0f, vt);

    for (int64_t i = 0; i < T; i++) {
        memset(dq + i * ld, 0, (size_t)D * sizeof(float));
        memset(dk + i * ld, 0, (size_t)D * sizeof(float));
        memset(dv + i * ld, 0, (size_t)D * sizeof(float));
    }
    row_dots(dyh, y + h * D, T, E, D, drow);

    for (int64_t j0 = 0; j0 < T; j0 += BC) {
        const int64_t bc = T - j0 < BC ? T - j0 : BC;
        /* Query blocks holding a row at or below the diagonal: i >= j0. */
        for (int64_t i0 = j0 / BR * BR; i0 < T; i0 += BR) {
            const int64_t br = T - i0 < BR ? T - i0 : BR;
            /* s (br, bc) = q_i (scale k^T)_j, dp (br, bc) = dy_i (v^T)_j */
            dt_sgemm_nn(br, bc, D, q + i0 * ld, ld, kt + j0, T, s, BC);
            dt_sgemm_nn(br, bc, D, dyh + i0 * E, E, vt + j0, T, dp, BC);
            for (int64_t r = 0; r < br; r++) {
                const int64_t i = i0 + r, nv = n_valid(i, j0, bc);
                float *srow = s + r * BC, *dprow = dp + r * BC;
                /* s <- P (dropped: what multiplied v), dp <- scale dS; zero past the diagonal */
                row_exp(srow, nv, lh[i]);
                const float di = drow[i];
                if (dkey.on) {
                    float mult[BC];
                    drop_row(&dkey, h, i, j0, nv, mult);
                    for (int64_t c = 0; c < nv; c++) {
                        const float p = srow[c];
                        srow[c] = p * mult[c];
                        dprow[c] = scale * (p * (dprow[c] * mult[c] - di));
                    }
                } else {
                    for (int64_t c = 0; c < nv; c++)
                        dprow[c] = scale * (srow[c] * (dprow[c] - di));
                }
                memset(srow + nv, 0, (size_t)(bc - nv) * sizeof(float));
                memset(dprow + nv, 0, (size_t)(bc - nv) * sizeof(float));
            }
            /* dv_j += P^T dy_i, dk_j += dS^T q_i */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)bc, (int)D, (int)br, 1.0f, s,
                        BC, dyh + i0 * E, (int)E, 1.0f, dv + j0 * ld, (int)ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)bc, (int)D, (int)br, 1.0f, dp,
                        BC, q + i0 * ld, (int)ld, 1.0f, dk + j0 * ld, (int)ld);
            /* dq_i += dS k_j */
            dt_sgemm_nn(br, D, bc, dp, BC, k + j0 * ld, ld, tmp, D);
            for (int64_t r = 0; r < br; r++) {
                float *dqr = dq + (i0 + r) * ld;
                const float *tr = tmp + r * D;
                for (int64_t d = 0; d < D; d++)
                    dqr[d] += tr[d];
            }
        }
    }
}
