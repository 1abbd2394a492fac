/* test_gcomp_mpi.c — the compressed gradient exchange of ddp (src/parallel/gcomp.c) at 1-3
 * ranks, on the gradient buffer of a small model (linear 16 -> 8 -> 3: two weight matrices,
 * two biases) cut into awkward buckets:
 *   - fp16 and bf16 carry values they represent exactly, whose sums they represent too,
 *     without any loss: the result is the exact sum, bit for bit;
 *   - top-k with ratio 1 is the plain sum in rank order, bit for bit; with a smaller ratio
 *     and error feedback, what the ranks sent plus what they kept is what they had;
 *   - PowerSGD on gradients of rank 1 (the same on every rank up to a factor) returns their
 *     sum within float rounding after one step, and the ranks' residuals sum to nothing;
 *   - every rank ends with the same bits. */
#include "dt_test_mpi.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/model.h"
#include "parallel/gcomp.h"

static dt_comm *world;
/* cmocka's test_calloc: a leak fails the test. */
static int rank, size;

static dt_model *small_model(void)
{
    dt_layer_spec s[3] = {dt_layer_spec_default(DT_LAYER_LINEAR),
                          dt_layer_spec_default(DT_LAYER_RELU),
                          dt_layer_spec_default(DT_LAYER_LINEAR)};
    s[0].out_features = 8;
    s[2].out_features = 3;
    const dt_shape in = {.ndim = 1, .d = {16}};
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(s, 3, &in, 4, &m));
    return m;
}

/* Buckets of 5, 100, the rest: cuts through tensors, as ddp's never do, which the exchange
 * must not care about. */
static int cut(size_t n, dt_gcomp_bucket *b)
{
    b[0] = (dt_gcomp_bucket){0, 5};
    b[1] = (dt_gcomp_bucket){5, 100};
    b[2] = (dt_gcomp_bucket){105, n - 105};
    return 3;
}

static dt_status exchange(dt_gcomp *g, float *x, int nb)
{
    if (!dt_gcomp_per_bucket(g))
        return dt_gcomp_run(g, x);
    for (int b = 0; b < nb; b++) {
        dt_comm_req *req = NULL;
        dt_status st = dt_gcomp_start(g, x, b, &req);
        if (st == DT_OK)
            st = dt_comm_wait(&req);
        if (st != DT_OK)
            return st;
        dt_gcomp_finish(g, x, b);
    }
    return DT_OK;
}

/* Every rank holds the same bits as rank 0. */
static void check_same_everywhere(const char *what, const float *x, size_t n)
{
    float *r0 = test_calloc(n, sizeof *r0);
    memcpy(r0, x, n * sizeof *x);
    DT_ASSERT_OK(dt_comm_bcast(world, r0, n, DT_COMM_FLOAT32, 0));
    for (size_t i = 0; i < n; i++)
        if (memcmp(&r0[i], &x[i], sizeof *x) != 0)
            fail_msg("%s: rank %d element %zu is %.9g, rank 0's %.9g", what, rank, i, x[i], r0[i]);
    test_free(r0);
}

/* A value of rank r at i that fp16 and bf16 hold exactly, and whose sum over up to 3 ranks
 * they hold too: an integer in [-7, 7] times 2^-k, k in [0, 7]. */
static float exact_value(int r, size_t i)
{
    const int v = (int)((i * 7 + (size_t)r * 3) % 15) - 7;
    return ldexpf((float)v, -(int)(i % 8));
}

static void run_half(dt_compress_kind kind)
{
    dt_model *m = small_model();
    const size_t n = dt_model_param_count(m);
    dt_gcomp_bucket b[3];
    const int nb = cut(n, b);
    dt_compress_options o = {.kind = kind, .error_feedback = 1};
    dt_gcomp *g = NULL;
    DT_ASSERT_OK(dt_gcomp_create(&o, world, m, b, nb, &g));
    float *x = test_calloc(n, sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = exact_value(rank, i);
    DT_ASSERT_OK(exchange(g, x, nb));
    for (size_t i = 0; i < n; i++) {
        float want = 0.0f;
        for (int r = 0; r < size; r++)
            want += exact_value(r, i);
        if (x[i] != want)
            fail_msg("%s: element %zu: expected the exact sum %.9g, got %.9g",
                     kind == DT_COMPRESS_FP16 ? "fp16" : "bf16", i, want, x[i]);
    }
    assert_int_equal(dt_gcomp_wire_bytes(g), n * 2);
    test_free(x);
    dt_gcomp_free(g);
    dt_model_free(m);
}

static void fp16_exact(void **state)
{
    (void)state;
    run_half(DT_COMPRESS_FP16);
}

static void bf16_exact(void **state)
{
    (void)state;
    run_half(DT_COMPRESS_BF16);
}

static float noise(int r, size_t i, int step)
{
    return sinf((float)(i * 13 + (size_t)r * 101 + (size_t)step * 7)) * 1e-2f;
}

static void topk_ratio_one_is_the_sum(void **state)
{
    (void)state;
    dt_model *m = small_model();
    const size_t n = dt_model_param_count(m);
    dt_gcomp_bucket b[3];
    const int nb = cut(n, b);
    dt_compress_options o = {.kind = DT_COMPRESS_TOPK, .ratio = 1.0, .error_feedback = 1};
    dt_gcomp *g = NULL;
    DT_ASSERT_OK(dt_gcomp_create(&o, world, m, b, nb, &g));
    float *x = test_calloc(n, sizeof *x);
    for (int step = 0; step < 3; step++) {
        for (size_t i = 0; i < n; i++)
            x[i] = noise(rank, i, step);
        DT_ASSERT_OK(exchange(g, x, nb));
        for (size_t i = 0; i < n; i++) {
            float want = 0.0f; /* the rank-order sum, from zero, as the exchange adds */
            for (int r = 0; r < size; r++)
                want += noise(r, i, step);
            if (memcmp(&want, &x[i], sizeof want) != 0)
                fail_msg("topk:1 step %d element %zu: expected %.9g, got %.9g", step, i, want,
                         x[i]);
        }
        size_t ne = 0;
        const float *e = dt_gcomp_residual(g, &ne);
        for (size_t i = 0; i < ne; i++)
            if (e[i] != 0.0f)
                fail_msg("topk:1 step %d: residual %zu is %.9g, expected 0", step, i, e[i]);
    }
    test_free(x);
    dt_gcomp_free(g);
    dt_model_free(m);
}

/* Summed over ranks: sent + kept == had, up to the float rounding of the sums. */
static void topk_feedback_conserves(void **state)
{
    (void)state;
    dt_model *m = small_model();
    const size_t n = dt_model_param_count(m);
    dt_gcomp_bucket b[3];
    const int nb = cut(n, b);
    dt_compress_options o = {.kind = DT_COMPRESS_TOPK, .ratio = 0.1, .error_feedback = 1};
    dt_gcomp *g = NULL;
    DT_ASSERT_OK(dt_gcomp_create(&o, world, m, b, nb, &g));
    float *x = test_calloc(n, sizeof *x), *kept = test_calloc(n, sizeof *kept);
    double *sent = test_calloc(n, sizeof *sent), *had = test_calloc(n, sizeof *had);
    for (int step = 0; step < 5; step++) {
        for (size_t i = 0; i < n; i++) {
            x[i] = noise(rank, i, step);
            for (int r = 0; r < size; r++)
                had[i] += noise(r, i, step);
        }
        DT_ASSERT_OK(exchange(g, x, nb));
        check_same_everywhere("topk:0.1", x, n);
        for (size_t i = 0; i < n; i++)
            sent[i] += x[i];
    }
    size_t ne = 0;
    memcpy(kept, dt_gcomp_residual(g, &ne), n * sizeof *kept);
    assert_int_equal(ne, n);
    DT_ASSERT_OK(dt_comm_allreduce(world, kept, kept, n, DT_COMM_FLOAT32, DT_COMM_SUM));
    for (size_t i = 0; i < n; i++)
        if (fabs(sent[i] + kept[i] - had[i]) > 1e-6 + 1e-5 * fabs(had[i]))
            fail_msg("topk:0.1 element %zu: sent %.9g + kept %.9g != had %.9g", i, sent[i],
                     (double)kept[i], had[i]);
    test_free(x);
    test_free(kept);
    test_free(sent);
    test_free(had);
    dt_gcomp_free(g);
    dt_model_free(m);
}

/* Rank r's gradient: (r + 1) u v^T for each weight, its own values for the biases. */
static void rank_one(const dt_model *m, int r, float *x)
{
    for (int k = 0; k < dt_model_tensor_count(m); k++) {
        const dt_param_info *t = dt_model_tensor(m, k);
        const int64_t rows = t->shape[0], cols = (int64_t)t->count / rows;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++)
                x[t->offset + (size_t)(i * cols + j)] =
                    t->ndim >= 2 ? (float)(r + 1) * cosf((float)i + 0.5f) * sinf((float)j + 1.0f)
                                 : noise(r, (size_t)i, 0);
    }
}

static void powersgd_rank_one(void **state)
{
    (void)state;
    dt_model *m = small_model();
    const size_t n = dt_model_param_count(m);
    dt_gcomp_bucket b[1] = {{0, n}};
    dt_compress_options o = {.kind = DT_COMPRESS_POWERSGD, .rank = 2, .error_feedback = 1};
    dt_gcomp *g = NULL;
    DT_ASSERT_OK(dt_gcomp_create(&o, world, m, b, 1, &g));
    float *x = test_calloc(n, sizeof *x), *want = test_calloc(n, sizeof *want),
          *one = test_calloc(n, sizeof *one);
    for (int r = 0; r < size; r++) {
        rank_one(m, r, one);
        for (size_t i = 0; i < n; i++)
            want[i] += one[i];
    }
    rank_one(m, rank, x);
    DT_ASSERT_OK(exchange(g, x, 1));
    check_same_everywhere("powersgd:2", x, n);
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i] - want[i]) > 1e-5f + 1e-4f * fabsf(want[i]))
            fail_msg("powersgd:2 element %zu: expected %.9g, got %.9g", i, want[i], x[i]);
    /* Each rank keeps M_r - A / N; summed over ranks that is what the sum did not carry:
     * nothing, for gradients of rank 1. */
    size_t ne = 0;
    float *e = dt_gcomp_residual(g, &ne);
    assert_int_equal(ne, n);
    memcpy(one, e, n * sizeof *one);
    DT_ASSERT_OK(dt_comm_allreduce(world, one, one, n, DT_COMM_FLOAT32, DT_COMM_SUM));
    for (size_t i = 0; i < n; i++)
        if (fabsf(one[i]) > 1e-4f)
            fail_msg("powersgd:2 residuals summed over ranks, element %zu: %.9g, expected 0 "
                     "(a rank-1 gradient is carried whole)",
                     i, one[i]);
    /* Factors: (8 + 16) * 2 and (3 + 8) * 2 floats, biases 8 + 3, P then Q. */
    assert_true(dt_gcomp_wire_bytes(g) < n * sizeof(float));
    test_free(x);
    test_free(want);
    test_free(one);
    dt_gcomp_free(g);
    dt_model_free(m);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fp16_exact),
        cmocka_unit_test(bf16_exact),
        cmocka_unit_test(topk_ratio_one_is_the_sum),
        cmocka_unit_test(topk_feedback_conserves),
        cmocka_unit_test(powersgd_rank_one),
    };
    return dt_test_mpi_main(&argc, &argv, tests, &world, &rank, &size);
}
