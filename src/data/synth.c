/* synth.c — synthetic linear-regression data, Y = X W^T + b + noise.
 *
 * Every number is a pure function of (seed, array, element index), so every rank, any
 * sample count and any order of generation give the same values: sample i is the same
 * whether n is 100 or 100000. Exactly:
 *
 *   r(a, e) = Philox4x32-10(key = seed, counter = (e mod 2^32, e div 2^32, a,
 *                                                  DT_RNG_STREAM_DATA << 24))
 *             for array a (0 = X, 1 = W, 2 = b, 3 = noise) and element index e,
 *   U(a, e) = 2 r0 / 2^32 - 1                                      in [-1, 1)
 *   N(a, e) = sqrt(-2 ln u1) cos(2 pi u2),  u1 = (r0 + 1) / 2^32 in (0, 1],
 *                                           u2 = r1 / 2^32 in [0, 1)
 *             (Box and Muller, "A note on the generation of random normal deviates",
 *             Ann. Math. Statist. 29, 1958; the cosine half only, one deviate per element)
 *
 *   X[i][j] = (float) N(0, i p + j)          W[k][j] = (float) U(1, k p + j)
 *   b[k]    = (float) U(2, k)
 *   Y[i][k] = (float) (sum_{j = 0..p-1} X[i][j] W[k][j] + b[k] + noise N(3, i q + k))
 *
 * with X, W and b rounded to float first and the sum taken in double in the order of j,
 * so Y is consistent with the stored X to float precision. The uniform-to-normal step is
 * in double and rounded to float afterwards: ranks on one machine agree bit for bit, and
 * across CPUs where glibc picks a different (FMA or not) variant of log or cos, a last-bit
 * difference in double survives the rounding to float only for a value within 2^-29
 * relative of a rounding boundary. */
#include "data/data_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/rng.h"

enum { SYNTH_X = 0, SYNTH_W = 1, SYNTH_B = 2, SYNTH_NOISE = 3 };

static void synth_words(uint64_t seed, uint32_t array, uint64_t e, uint32_t w[4])
{
    dt_philox(seed, (uint32_t)e, (uint32_t)(e >> 32), array, (uint32_t)DT_RNG_STREAM_DATA << 24, w);
}

static double synth_uniform(uint64_t seed, uint32_t array, uint64_t e)
{
    uint32_t w[4];
    synth_words(seed, array, e, w);
    return 2.0 * dt_u01d(w[0]) - 1.0;
}

static double synth_normal(uint64_t seed, uint32_t array, uint64_t e)
{
    uint32_t w[4];
    synth_words(seed, array, e, w);
    const double two_pi = 6.283185307179586476925286766559;
    double u1 = ((double)w[0] + 1.0) * (1.0 / 4294967296.0);
    double u2 = dt_u01d(w[1]);
    return sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
}

/* Checks cfg (n, p, q >= 1, a finite noise >= 0) and sizes the arrays in bytes: X (n, p)
 * in *nx, Y (n, q) in *ny, W (q, p) in *nw, refusing any that overflows. */
static dt_status synth_check(const dt_synth_linreg *cfg, size_t *nx, size_t *ny, size_t *nw)
{
    if (cfg->n < 1 || cfg->p < 1 || cfg->q < 1)
        return dt_fail(DT_ERR_INVALID, "synth: n, p and q must be >= 1, got n=%lld p=%lld q=%lld",
                       (long long)cfg->n, (long long)cfg->p, (long long)cfg->q);
    if (!(cfg->noise >= 0.0) || !isfinite(cfg->noise))
        return dt_fail(DT_ERR_INVALID,
                       "synth: noise must be a finite standard deviation >= 0, "
                       "got %g",
                       cfg->noise);
    const int64_t n = cfg->n, p = cfg->p, q = cfg->q;
    if (dt_mul_size((size_t)n, (size_t)p, nx) != DT_OK ||
        dt_mul_size(*nx, sizeof(float), nx) != DT_OK ||
        dt_mul_size((size_t)n, (size_t)q, ny) != DT_OK ||
        dt_mul_size(*ny, sizeof(float), ny) != DT_OK ||
        dt_mul_size((size_t)q, (size_t)p, nw) != DT_OK ||
        dt_mul_size(*nw, sizeof(float), nw) != DT_OK)
        return dt_fail(DT_ERR_INVALID, "synth: n=%lld p=%lld q=%lld overflows the address space",
                       (long long)n, (long long)p, (long long)q);
    return DT_OK;
}

/* Generates W (q, p), b (q), X (n, p) and Y (n, q) as the formulas at the top say: each
 * element a pure function of (seed, array, index), each Y summed in double over j in
 * order from the float X, W and b. */
static void synth_fill(const dt_synth_linreg *cfg, float *x, float *y, float *w, float *b)
{
    const int64_t n = cfg->n, p = cfg->p, q = cfg->q;
    const uint64_t seed = cfg->seed;
    for (int64_t e = 0; e < q * p; e++)
        w[e] = (float)synth_uniform(seed, SYNTH_W, (uint64_t)e);
    for (int64_t k = 0; k < q; k++)
        b[k] = (float)synth_uniform(seed, SYNTH_B, (uint64_t)k);
    for (int64_t i = 0; i < n; i++) {
        float *xi = x + i * p;
        for (int64_t j = 0; j < p; j++)
            xi[j] = (float)synth_normal(seed, SYNTH_X, (uint64_t)(i * p + j));
        for (int64_t k = 0; k < q; k++) {
            const float *wk = w + k * p;
            double acc = 0.0;
            for (int64_t j = 0; j < p; j++)
                acc += (double)xi[j] * (double)wk[j];
            acc += (double)b[k];
            if (cfg->noise > 0.0)
                acc += cfg->noise * synth_normal(seed, SYNTH_NOISE, (uint64_t)(i * q + k));
            y[i * q + k] = (float)acc;
        }
    }
}

dt_status dt_synth_linreg_make(const dt_synth_linreg *cfg, dt_dataset *out, float *w_true,
                               float *b_true)
{
    DT_ASSERT(cfg != NULL && out != NULL);
    dt_status st = DT_OK;
    float *x = NULL, *y = NULL, *w = NULL, *b = NULL;
    memset(out, 0, sizeof *out);
    size_t nx, ny, nw;
    DT_TRY(synth_check(cfg, &nx, &ny, &nw));
    const int64_t n = cfg->n, p = cfg->p, q = cfg->q;

    x = malloc(nx);
    y = malloc(ny);
    w = malloc(nw);
    b = malloc((size_t)q * sizeof *b);
    if (x == NULL || y == NULL || w == NULL || b == NULL) {
        st = dt_fail(DT_ERR_NOMEM, "synth: cannot allocate %lld x (%lld + %lld) floats",
                     (long long)n, (long long)p, (long long)q);
        goto fail;
    }
    synth_fill(cfg, x, y, w, b);
    if (w_true != NULL)
        memcpy(w_true, w, nw);
    if (b_true != NULL)
        memcpy(b_true, b, (size_t)q * sizeof *b);
    free(w);
    free(b);

    out->n = n;
    out->sample_shape.ndim = 1;
    out->sample_shape.d[0] = p;
    out->features = DT_FEATURES_F32;
    out->x_f32 = x;
    out->scale = 1.0f;
    out->shift = 0.0f;
    out->targets = DT_TARGETS_F32;
    out->y_f32 = y;
    out->target_width = q;
    st = dt_dataset_adopt(out, x, y, "synthetic linear regression");
    if (st != DT_OK)
        memset(out, 0, sizeof *out); /* adopt freed both blocks */
    return st;

fail:
    free(x);
    free(y);
    free(w);
    free(b);
    return st;
}
