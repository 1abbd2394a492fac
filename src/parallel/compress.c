/* compress.c — top-k selection with error feedback and PowerSGD's kernels (compress.h has
 * the shapes, the bounds and how a strategy calls them).
 *
 * Top-k is a radix select on magnitude keys: the bits of |x| read as an unsigned integer
 * order non-negative floats as their values (IEEE 754 binary32), and every NaN's bits lie
 * above +inf's, so NaN ranks highest with no special case. Three digits of the 31-bit key
 * (11, 11 and 9 bits) find the k-th largest key T and how many keys equal to T to take;
 * a last pass in index order takes every key above T and the first of those equal to it,
 * which is the lower-index rule for ties and leaves the indices ascending with no sort.
 * Why not quickselect: radix select is O(n) in the worst case with no pivot rule an input
 * can defeat, reads x front to back (a quickselect on indices would gather x at random
 * through scratch), and needs no comparison of (magnitude, index) pairs.
 *
 * PowerSGD's products are cblas_sgemm calls, except P = M Q, which has no transposed operand
 * and goes through dt_sgemm_nn (tensor/gemm.h: OpenBLAS's AVX-512 kernels malloc on every
 * such call with r < 16 columns; ours computes them). OpenBLAS single-threaded is
 * deterministic, and dtrain runs it single-threaded (docs/ARCHITECTURE.md, "Threads").
 * Gram-Schmidt is this file's own loop, sums in double in a fixed order, so every rank that
 * orthonormalizes the same all-reduced P gets the same bits. */
#include "parallel/compress.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "dtrain/core.h"
#include "dtrain/model.h"
#include "dtrain/strategy.h"
#include "dtrain/rng.h"
#include "tensor/gemm.h"

/* The radix digits of a 31-bit magnitude key: bits 30..20, 19..9 and 8..0. */
enum { TOPK_SHIFT1 = 20, TOPK_SHIFT2 = 9, TOPK_BUCKETS = 2048, TOPK_BUCKETS3 = 512 };

/* The tag of PowerSGD's random numbers in the counter's top byte, beside dt_rng_stream's
 * tags (1..5 in include/dtrain/rng.h, which notes this 6), so that Q's numbers are not another
 * use's. */
enum { PSGD_RNG_TAG = 6 };

static inline uint32_t mag_key(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits & 0x7fffffffu;
}

size_t dt_topk_count(size_t n, double ratio)
{
    DT_ASSERT(n >= 1 && ratio > 0.0 && ratio <= 1.0);
    const double t = ratio * (double)n;
    const double k = ceil(t - t * 1e-12);
    if (k < 1.0)
        return 1;
    if (k >= (double)n)
        return n;
    return (size_t)k;
}

/* The bucket of hist (nb) that holds the need-th largest key, counting down from the top
 * bucket; *need becomes that key's rank inside its bucket. */
static uint32_t pick_bucket(const uint32_t *hist, uint32_t nb, size_t *need)
{
    uint32_t b = nb - 1;
    while (hist[b] < *need) {
        *need -= hist[b];
        DT_ASSERT(b > 0);
        b--;
    }
    return b;
}

/* The k-th largest key of x (n), given hist (TOPK_BUCKETS) holding the counts of x's first
 * digits (it is overwritten); *ties says how many keys equal to it belong to the top k.
 * The indices of x whose first digit is the k-th key's go to scratch, so that the third
 * digit reads only those. */
static uint32_t topk_threshold(const float *x, size_t n, size_t k, uint32_t *hist,
                               uint32_t *scratch, size_t *ties)
{
    size_t need = k;
    const uint32_t b1 = pick_bucket(hist, TOPK_BUCKETS, &need);
    memset(hist, 0, TOPK_BUCKETS * sizeof *hist);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t key = mag_key(x[i]);
        if (key >> TOPK_SHIFT1 == b1) {
            scratch[m++] = (uint32_t)i;
            hist[(key >> TOPK_SHIFT2) & (TOPK_BUCKETS - 1)]++;
        }
    }
    const uint32_t b2 = pick_bucket(hist, TOPK_BUCKETS, &need);
    const uint32_t high = b1 << TOPK_SHIFT1 | b2 << TOPK_SHIFT2;
    memset(hist, 0, TOPK_BUCKETS3 * sizeof *hist);
    for (size_t j = 0; j < m; j++) {
        const uint32_t key = mag_key(x[scratch[j]]);
        if (key >> TOPK_SHIFT2 == high >> TOPK_SHIFT2)
            hist[key & (TOPK_BUCKETS3 - 1)]++;
    }
    const uint32_t b3 = pick_bucket(hist, TOPK_BUCKETS3, &need);
    *ties = need;
    return high | b3;
}

/* Takes, in index order, every entry whose key is above t and the first `ties` equal to
 * it: exactly k of them. */
static void topk_collect(const float *x, size_t n, size_t k, uint32_t t, size_t ties, uint32_t *idx,
                         float *val)
{
    size_t j = 0;
    for (size_t i = 0; i < n && j < k; i++) {
        const uint32_t key = mag_key(x[i]);
        if (key > t || (key == t && ties > 0)) {
            ties -= key == t;
            idx[j] = (uint32_t)i;
            val[j] = x[i];
            j++;
        }
    }
    DT_ASSERT(j == k);
}

static void topk_check(size_t n, size_t k)
{
    DT_ASSERT(k >= 1 && k <= n && n <= (size_t)UINT32_MAX);
}

void dt_topk_select(const float *x, size_t n, size_t k, uint32_t *idx, float *val,
                    uint32_t *scratch)
{
    topk_check(n, k);
    uint32_t hist[TOPK_BUCKETS] = {0};
    for (size_t i = 0; i < n; i++)
        hist[mag_key(x[i]) >> TOPK_SHIFT1]++;
    size_t ties;
    const uint32_t t = topk_threshold(x, n, k, hist, scratch, &ties);
    topk_collect(x, n, k, t, ties, idx, val);
}

void dt_topk_feedback(const float *g, float *e, size_t n, size_t k, uint32_t *idx, float *val,
                      uint32_t *scratch)
{
    topk_check(n, k);
    /* The accumulation and the first digit's counts in one pass. */
    uint32_t hist[TOPK_BUCKETS] = {0};
    for (size_t i = 0; i < n; i++) {
        e[i] = g[i] + e[i];
        hist[mag_key(e[i]) >> TOPK_SHIFT1]++;
    }
    size_t ties;
    const uint32_t t = topk_threshold(e, n, k, hist, scratch, &ties);
    topk_collect(e, n, k, t, ties, idx, val);
    for (size_t j = 0; j < k; j++)
        e[idx[j]] = 0.0f;
}

void dt_sparse_add(float *dense, const uint32_t *idx, const float *val, size_t k)
{
    for (size_t j = 0; j < k; j++)
        dense[idx[j]] += val[j];
}

/* ---- PowerSGD ------------------------------------------------------------------------- */

/* cblas_sgemm takes int dimensions. */
static void psgd_check(int64_t rows, int64_t cols, int r)
{
    DT_ASSERT(rows >= 1 && cols >= 1 && r >= 1 && rows <= INT_MAX && cols <= INT_MAX);
}

void dt_psgd_init_q(float *q, int64_t cols, int r, uint64_t seed, uint64_t stream)
{
    DT_ASSERT(cols >= 1 && cols <= INT_MAX && r >= 1 && stream >> 56 == 0);
    const uint64_t count = (uint64_t)cols * (uint64_t)r;
    const uint32_t c3 = (uint32_t)PSGD_RNG_TAG << 24 | (uint32_t)(stream >> 32);
    const double two_pi = 6.283185307179586476925286766559;
    for (uint64_t e = 0; e < count; e++) {
        uint32_t w[4];
        dt_philox(seed, (uint32_t)e, (uint32_t)(e >> 32), (uint32_t)stream, c3, w);
        /* u1 in (0, 1], so the logarithm is finite. */
        const double u1 = ((double)w[0] + 1.0) * (1.0 / 4294967296.0);
        const double u2 = dt_u01d(w[1]);
        q[e] = (float)(sqrt(-2.0 * log(u1)) * cos(two_pi * u2));
    }
}

void dt_psgd_p(const float *m, int64_t rows, int64_t cols, const float *q, int r, float *p)
{
    psgd_check(rows, cols, r);
    /* P (rows, r) = M (rows, cols) @ Q (cols, r) */
    dt_sgemm_nn(rows, r, cols, m, cols, q, r, p, r);
}

void dt_psgd_q(const float *m, int64_t rows, int64_t cols, const float *p, int r, float *q)
{
    psgd_check(rows, cols, r);
    /* Q (cols, r) = M^T (cols, rows) @ P (rows, r) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)cols, r, (int)rows, 1.0f, m,
                (int)cols, p, r, 0.0f, q, r);
}

void dt_psgd_approx(const float *p, const float *q, int64_t rows, int64_t cols, int r, float *out)
{
    psgd_check(rows, cols, r);
    /* out (rows, cols) = P (rows, r) @ Q^T (r, cols) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)cols, r, 1.0f, p, r, q, r,
                0.0f, out, (int)cols);
}

/* Column a of p (rows, r) dotted with its column b, in double. */
static double col_dot(const float *p, int64_t rows, int r, int a, int b)
{
    double s = 0.0;
    for (int64_t i = 0; i < rows; i++)
        s += (double)p[i * r + a] * (double)p[i * r + b];
    return s;
}

/* Removes from column c of p (rows, r) its components along columns 0..c-1, one after
 * the other, each coefficient taken from the column as updated so far (what PyTorch's loop
 * does when it removes column b from all later columns right after normalizing it). A
 * coefficient that is not finite comes from a NaN column b or from c's own inf or NaN: it
 * is skipped, and c's norm then tells. */
static void project_out(float *p, int64_t rows, int r, int c)
{
    for (int b = 0; b < c; b++) {
        const double a = col_dot(p, rows, r, c, b);
        if (!isfinite(a))
            continue;
        for (int64_t i = 0; i < rows; i++)
            p[i * r + c] = (float)((double)p[i * r + c] - a * (double)p[i * r + b]);
    }
}

void dt_psgd_orthonormalize(float *p, int64_t rows, int r)
{
    DT_ASSERT(r >= 1 && rows >= r);
    for (int c = 0; c < r; c++) {
        /* One pass leaves a nearly dependent column with rounding noise of the size of what
         * remains, partly along the earlier columns; the second pass removes that. When the
         * second pass takes away more than half the column's square norm, the column was
         * dependent on the earlier ones to working precision and what is left is noise of
         * noise: Kahan's test (compress.h cites it; the threshold 1/sqrt(2) is ARPACK's)
         * declares it 0. The squares of floats neither overflow nor underflow to 0 in
         * double: a norm is 0 exactly when every entry is +-0, and not finite only with an
         * inf or NaN. */
        project_out(p, rows, r, c);
        const double once = col_dot(p, rows, r, c, c);
        project_out(p, rows, r, c);
        const double twice = col_dot(p, rows, r, c, c);
        const double norm = sqrt(twice);
        const int dependent = !(twice >= 0.5 * once);
        for (int64_t i = 0; i < rows; i++) {
            float *v = &p[i * r + c];
            if (!isfinite(once) || !isfinite(twice))
                *v = NAN;
            else if (norm == 0.0 || dependent)
                *v = 0.0f;
            else
                *v = (float)((double)*v / norm);
        }
    }
}

int dt_psgd_worth(int64_t rows, int64_t cols, int r)
{
    psgd_check(rows, cols, r);
    /* Below 2^63: each dimension is below 2^31. */
    return ((uint64_t)rows + (uint64_t)cols) * (uint64_t)r < (uint64_t)rows * (uint64_t)cols;
}

int dt_psgd_rank(int64_t rows, int64_t cols, int r)
{
    DT_ASSERT(rows >= 1 && cols >= 1 && r >= 1);
    if ((int64_t)r > rows)
        r = (int)rows;
    if ((int64_t)r > cols)
        r = (int)cols;
    return r;
}

int dt_psgd_view(int ndim, int64_t shape0, size_t count, int r_asked, int64_t *rows, int64_t *cols,
                 int *r)
{
    *rows = shape0;
    *cols = ndim >= 2 ? (int64_t)count / shape0 : 1;
    *r = dt_psgd_rank(*rows, *cols, r_asked);
    return ndim >= 2 && dt_psgd_worth(*rows, *cols, *r);
}

void dt_compress_psgd_bytes(const dt_compress_options *o, const dt_model *m, double *p_bytes,
                            double *q_bytes)
{
    *p_bytes = *q_bytes = 0;
    for (int i = 0; i < dt_model_tensor_count(m); i++) {
        const dt_param_info *t = dt_model_tensor(m, i);
        int64_t rows, cols;
        int r;
        if (dt_psgd_view(t->ndim, t->shape[0], t->count, o->rank, &rows, &cols, &r)) {
            *p_bytes += (double)rows * r * sizeof(float);
            *q_bytes += (double)cols * r * sizeof(float);
        } else {
            *p_bytes += (double)t->count * sizeof(float);
        }
    }
}

int dt_psgd_redraw_nonfinite(float *q, int64_t cols, int r, uint64_t seed, uint64_t stream)
{
    const size_t cnt = (size_t)cols * (size_t)r;
    int bad = 0;
    for (size_t i = 0; i < cnt; i++)
        bad |= !isfinite(q[i]);
    if (bad)
        dt_psgd_init_q(q, cols, r, seed, stream);
    return bad;
}
