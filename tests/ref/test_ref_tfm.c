/* test_ref_tfm.c — the transformer's kernels (src/tensor/tfm_kernels.h) against PyTorch 1.13
 * in float64 (tests/ref/tfm.safetensors, from gen_tfm_refs.py): LayerNorm, GELU-tanh, token
 * + position embedding and causal attention, every output and every gradient, each tensor
 * within max|got - ref| <= 1e-5 max|ref| (issue 37's bound for the transformer's layers). */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_util.h"
#include "tensor/tfm_kernels.h"

static const double REL = 1e-5;

/* max|got - ref| <= REL max|ref| over the tensor. */
static void check(const char *name, const char *what, const float *got, const double *ref, size_t n)
{
    double mx = 0.0;
    for (size_t i = 0; i < n; i++)
        mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
    char label[160];
    snprintf(label, sizeof label, "%s: %s (dtrain vs PyTorch, max|ref| %.3g)", name, what, mx);
    DT_ASSERT_CLOSE_F(label, got, ref, n, REL * mx, 0.0);
}

static float *fbuf(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = NAN; /* every output must be written */
    return p;
}

/* ---- LayerNorm ---------------------------------------------------------------------- */

static void ln_case(const dt_st_file *f, const char *name, int64_t rows, int64_t n)
{
    char meta[128];
    snprintf(meta, sizeof meta, "kind=layernorm rows=%lld n=%lld eps=%g", (long long)rows,
             (long long)n, 1e-5);
    ru_check_meta(f, name, meta);
    const int64_t sx[2] = {rows, n}, sn[1] = {n}, sr[1] = {rows};
    float *x = ru_f32(ru_tensor(f, name, "x", DT_ST_F64, 2, sx));
    float *g = ru_f32(ru_tensor(f, name, "weight", DT_ST_F64, 1, sn));
    float *b = ru_f32(ru_tensor(f, name, "bias", DT_ST_F64, 1, sn));
    float *dy = ru_f32(ru_tensor(f, name, "dy", DT_ST_F64, 2, sx));
    double *y = ru_f64(ru_tensor(f, name, "y", DT_ST_F64, 2, sx));
    double *mean = ru_f64(ru_tensor(f, name, "mean", DT_ST_F64, 1, sr));
    double *rstd = ru_f64(ru_tensor(f, name, "rstd", DT_ST_F64, 1, sr));
    double *dx = ru_f64(ru_tensor(f, name, "dx", DT_ST_F64, 2, sx));
    double *dg = ru_f64(ru_tensor(f, name, "weight.grad", DT_ST_F64, 1, sn));
    double *db = ru_f64(ru_tensor(f, name, "bias.grad", DT_ST_F64, 1, sn));
    const size_t nx = (size_t)(rows * n);

    float *oy = fbuf(nx), *om = fbuf((size_t)rows), *orr = fbuf((size_t)rows), *odx = fbuf(nx);
    float *odg = calloc((size_t)n, sizeof(float)), *odb = calloc((size_t)n, sizeof(float));
    assert_true(odg && odb);
    dt_layernorm_forward(x, g, b, rows, n, 1e-5f, oy, om, orr);
    check(name, "y", oy, y, nx);
    check(name, "mean", om, mean, (size_t)rows);
    check(name, "rstd", orr, rstd, (size_t)rows);
    dt_layernorm_backward(dy, x, om, orr, g, rows, n, odx, odg, odb);
    check(name, "dx", odx, dx, nx);
    check(name, "weight.grad", odg, dg, (size_t)n);
    check(name, "bias.grad", odb, db, (size_t)n);
    free(x), free(g), free(b), free(dy), free(y), free(mean), free(rstd), free(dx), free(dg);
    free(db), free(oy), free(om), free(orr), free(odx), free(odg), free(odb);
}

static void test_layernorm(void **state)
{
    (void)state;
    dt_st_file *f = ru_open("tfm.safetensors");
    ln_case(f, "ln_a", 3, 24);
    ln_case(f, "ln_b", 6, 37);
    ln_case(f, "ln_one", 1, 5);
    ln_case(f, "ln_offset", 4, 40);
    dt_st_close(f);
}

/* ---- GELU --------------------------------------------------------------------------- */

static void gelu_case(const dt_st_file *f, const char *name, int64_t n)
{
    char meta[64];
    snprintf(meta, sizeof meta, "kind=gelu_tanh n=%lld", (long long)n);
    ru_check_meta(f, name, meta);
    const int64_t s[1] = {n};
    float *x = ru_f32(ru_tensor(f, name, "x", DT_ST_F64, 1, s));
    float *dy = ru_f32(ru_tensor(f, name, "dy", DT_ST_F64, 1, s));
    double *y = ru_f64(ru_tensor(f, name, "y", DT_ST_F64, 1, s));
    double *dx = ru_f64(ru_tensor(f, name, "dx", DT_ST_F64, 1, s));
    float *oy = fbuf((size_t)n), *odx = fbuf((size_t)n);
    dt_gelu_tanh_forward(x, n, oy);
    check(name, "y", oy, y, (size_t)n);
    dt_gelu_tanh_backward(dy, x, n, odx);
    check(name, "dx", odx, dx, (size_t)n);
    free(x), free(dy), free(y), free(dx), free(oy), free(odx);
}

static void test_gelu(void **state)
{
    (void)state;
    dt_st_file *f = ru_open("tfm.safetensors");
    gelu_case(f, "gelu_a", 37);
    gelu_case(f, "gelu_b", 300);
    dt_st_close(f);
}

/* ---- embedding ---------------------------------------------------------------------- */

static void emb_case(const dt_st_file *f, const char *name, int64_t T, int64_t V, int64_t P,
                     int64_t E, int64_t pos0)
{
    char meta[128];
    snprintf(meta, sizeof meta, "kind=embedding T=%lld V=%lld P=%lld E=%lld pos0=%lld",
             (long long)T, (long long)V, (long long)P, (long long)E, (long long)pos0);
    ru_check_meta(f, name, meta);
    const int64_t st[1] = {T}, sv[2] = {V, E}, sp[2] = {P, E}, sy[2] = {T, E};
    int32_t *tok = ru_i32(ru_tensor(f, name, "tok", DT_ST_I64, 1, st));
    for (int64_t t = 0; t < T; t++)
        assert_true(tok[t] >= 0 && tok[t] < V);
    float *wte = ru_f32(ru_tensor(f, name, "wte", DT_ST_F64, 2, sv));
    float *wpe = ru_f32(ru_tensor(f, name, "wpe", DT_ST_F64, 2, sp));
    float *dy = ru_f32(ru_tensor(f, name, "dy", DT_ST_F64, 2, sy));
    double *y = ru_f64(ru_tensor(f, name, "y", DT_ST_F64, 2, sy));
    double *gte = ru_f64(ru_tensor(f, name, "wte.grad", DT_ST_F64, 2, sv));
    double *gpe = ru_f64(ru_tensor(f, name, "wpe.grad", DT_ST_F64, 2, sp));
    float *oy = fbuf((size_t)(T * E));
    float *ote = calloc((size_t)(V * E), sizeof(float)),
          *ope = calloc((size_t)(P * E), sizeof(float));
    assert_true(ote && ope);
    dt_embedding_forward(tok, T, E, pos0, wte, wpe, oy);
    check(name, "y", oy, y, (size_t)(T * E));
    dt_embedding_backward(tok, T, E, pos0, dy, ote, ope);
    check(name, "wte.grad", ote, gte, (size_t)(V * E));
    check(name, "wpe.grad", ope, gpe, (size_t)(P * E));
    free(tok), free(wte), free(wpe), free(dy), free(y), free(gte), free(gpe), free(oy);
    free(ote), free(ope);
}

static void test_embedding(void **state)
{
    (void)state;
    dt_st_file *f = ru_open("tfm.safetensors");
    emb_case(f, "emb_one", 1, 13, 10, 20, 0);
    emb_case(f, "emb_rep", 7, 13, 10, 20, 0);
    emb_case(f, "emb_pos0", 5, 13, 10, 20, 4);
    dt_st_close(f);
}

/* ---- attention ---------------------------------------------------------------------- */

static void attn_case(const dt_st_file *f, const char *name, int64_t T, int64_t H, int64_t D)
{
    char meta[96];
    snprintf(meta, sizeof meta, "kind=attention T=%lld H=%lld D=%lld", (long long)T, (long long)H,
             (long long)D);
    ru_check_meta(f, name, meta);
    const int64_t E = H * D;
    const int64_t sq[2] = {T, 3 * E}, sy[2] = {T, E}, sl[2] = {H, T};
    float *qkv = ru_f32(ru_tensor(f, name, "qkv", DT_ST_F64, 2, sq));
    float *dy = ru_f32(ru_tensor(f, name, "dy", DT_ST_F64, 2, sy));
    double *y = ru_f64(ru_tensor(f, name, "y", DT_ST_F64, 2, sy));
    double *lse = ru_f64(ru_tensor(f, name, "lse", DT_ST_F64, 2, sl));
    double *dqkv = ru_f64(ru_tensor(f, name, "dqkv", DT_ST_F64, 2, sq));
    /* The scale as gen_tfm_refs.py rounds it: 1/sqrt(D) in float. */
    const float scale = (float)(1.0 / sqrt((double)D));
    float *ws = fbuf((size_t)dt_attn_ws_count(T, D));
    float *oy = fbuf((size_t)(T * E)), *ol = fbuf((size_t)(H * T)), *od = fbuf((size_t)(3 * T * E));
    for (int64_t h = 0; h < H; h++)
        dt_attn_forward(qkv, T, E, H, h, scale, NULL, oy, ol, ws);
    check(name, "y", oy, y, (size_t)(T * E));
    check(name, "lse", ol, lse, (size_t)(H * T));
    for (int64_t h = 0; h < H; h++)
        dt_attn_backward(qkv, oy, ol, dy, T, E, H, h, scale, NULL, od, ws);
    check(name, "dqkv", od, dqkv, (size_t)(3 * T * E));
    free(qkv), free(dy), free(y), free(lse), free(dqkv), free(ws), free(oy), free(ol), free(od);
}

static void test_attention(void **state)
{
    (void)state;
    dt_st_file *f = ru_open("tfm.safetensors");
    attn_case(f, "attn_t1", 1, 1, 8);
    attn_case(f, "attn_t5", 5, 2, 20);
    attn_case(f, "attn_t37", 37, 3, 12);
    attn_case(f, "attn_t67", 67, 4, 6);
    attn_case(f, "attn_t130", 130, 1, 4);
    dt_st_close(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_attention),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
