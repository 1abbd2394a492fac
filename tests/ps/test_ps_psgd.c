/* test_ps_psgd.c — PowerSGD for ps pushes (src/parallel/ps_psgd.c), without MPI: the plan's
 * payload sizes against sizes worked out by hand, and the worker's factors read back by the
 * servers (every server's pieces put side by side) on a small model (linear 16 -> 8 -> 3:
 * two weight matrices, two biases) split into 1 and 3 shards:
 *   - a gradient of rank <= K comes back whole, within float rounding, on any split;
 *   - a general gradient comes back the same on 3 shards as on 1 (a matrix cut between
 *     shards is rebuilt from the same factors), except the few elements of a cut matrix that
 *     go as they are, which come back exactly;
 *   - with error feedback, what was pushed plus what was kept is what the worker had, and
 *     the elements pushed as they are keep nothing;
 *   - warm start: repeated steps on one gradient approximate it no worse than the first;
 *   - a NaN draws the poisoned matrix's Q afresh and leaves the other's. */
#include "dt_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/model.h"
#include "dtrain/rng.h"
#include "parallel/compress.h"
#include "parallel/ps_psgd.h"
#include "parallel/strategy_impl.h"

enum { N = 163, W1 = 0, B1 = 128, W2 = 136, B2 = 160 }; /* the model's flat layout */
enum { TAIL = 109 }; /* at 3 shards, W1's elements [TAIL, B1) go as they are */

static dt_model *model; /* the small model, for the whole group */

static int make_model(void **state)
{
    (void)state;
    dt_layer_spec s[3] = {dt_layer_spec_default(DT_LAYER_LINEAR),
                          dt_layer_spec_default(DT_LAYER_RELU),
                          dt_layer_spec_default(DT_LAYER_LINEAR)};
    s[0].out_features = 8;
    s[2].out_features = 3;
    const dt_shape in = {.ndim = 1, .d = {16}};
    if (dt_model_create(s, 3, &in, 4, &model) != DT_OK || dt_model_param_count(model) != N)
        return -1;
    return 0;
}

static int free_model(void **state)
{
    (void)state;
    dt_model_free(model);
    return 0;
}

static const dt_compress_options psgd2 = {
    .kind = DT_COMPRESS_POWERSGD, .rank = 2, .error_feedback = 1};

/* ps's shards for k servers (ps.c cuts them with dt_strategy_part). */
static void shards(int k, size_t *off, size_t *cnt)
{
    for (int s = 0; s < k; s++) {
        int64_t o, c;
        dt_strategy_part(N, k, s, &o, &c);
        off[s] = (size_t)o;
        cnt[s] = (size_t)c;
    }
}

/* A worker's plan for k servers, with room for a residual. */
static dt_ps_psgd *worker_for(int k)
{
    size_t off[3], cnt[3];
    shards(k, off, cnt);
    dt_ps_psgd *w = NULL;
    DT_ASSERT_OK(dt_ps_psgd_create(&psgd2, model, k, off, cnt, 1, 1, &w));
    return w;
}

/* A uniform deviate in [-1, 1) for element i of stream `seed`. */
static float dev(uint64_t seed, size_t i)
{
    uint32_t w[4];
    dt_philox(seed, (uint32_t)i, 0, 2, DT_RNG_STREAM_TEST, w);
    return (float)((double)w[0] / 2147483648.0 - 1.0);
}

/* One worker's step on g (with residual e, or NULL), pushed to k servers and read back by
 * each into its part of out (N). */
static void push_and_read(dt_ps_psgd *worker, int k, const float *g, float *e, float *out)
{
    size_t off[3], cnt[3];
    shards(k, off, cnt);
    dt_ps_psgd *server = NULL;
    DT_ASSERT_OK(dt_ps_psgd_create(&psgd2, model, k, off, cnt, 0, 0, &server));
    dt_ps_psgd_factor(worker, g, e);
    for (int s = 0; s < k; s++) {
        const size_t nbytes = dt_ps_psgd_bytes(server, s);
        assert_int_equal(nbytes, dt_ps_psgd_bytes(worker, s));
        uint8_t *buf = malloc(nbytes);
        assert_non_null(buf);
        dt_ps_psgd_write(worker, s, g, buf);
        dt_ps_psgd_read(server, s, off[s], buf, out + off[s]);
        free(buf);
    }
    dt_ps_psgd_free(server);
}

/* Payload bytes, by hand: a factored piece is (its rows + cols) * K floats, a dense one its
 * elements. K = 2 factors both matrices: W1 (8, 16) as 48 < 128 floats, W2 (3, 8) as 22 < 24.
 * One server: W1 (8 + 16) * 2, b1 8, W2 (3 + 8) * 2, b2 3 = 81 floats. Three shards of
 * 55, 54, 54 elements: [0, 55) holds W1's rows 0-3 (row 3 in part), as (4 + 16) * 2 = 40
 * floats; [55, 109) rows 3-6, 40 floats; [109, 163) W1's last 19 elements, whose rows 6-7
 * would take (2 + 16) * 2 = 36 floats and so go as the 19 they are, then b1, W2 and b2. */
static void test_payload_bytes(void **state)
{
    (void)state;
    dt_ps_psgd *one = worker_for(1), *three = worker_for(3);
    assert_int_equal(dt_ps_psgd_bytes(one, 0), (48 + 8 + 22 + 3) * 4);
    assert_int_equal(dt_ps_psgd_bytes(three, 0), (4 + 16) * 2 * 4);
    assert_int_equal(dt_ps_psgd_bytes(three, 1), (4 + 16) * 2 * 4);
    assert_int_equal(dt_ps_psgd_bytes(three, 2), (19 + 8 + 22 + 3) * 4);
    size_t q = 0;
    (void)dt_ps_psgd_factors(one, &q);
    assert_int_equal(q, (16 + 8) * 2); /* Q (cols, K) of W1 and W2 */
    dt_ps_psgd_free(one);
    dt_ps_psgd_free(three);
}

/* W1 = u1 v1^T + u2 v2^T (rank 2), W2 = u v^T (rank 1), random biases. */
static void low_rank_grad(float *g)
{
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 16; j++)
            g[W1 + i * 16 + j] =
                dev(1, (size_t)i) * dev(2, (size_t)j) + dev(3, (size_t)i) * dev(4, (size_t)j);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 8; j++)
            g[W2 + i * 8 + j] = dev(5, (size_t)i) * dev(6, (size_t)j);
    for (int i = 0; i < 8; i++)
        g[B1 + i] = dev(7, (size_t)i);
    for (int i = 0; i < 3; i++)
        g[B2 + i] = dev(8, (size_t)i);
}

static void expect_near(const char *what, const float *want, const float *got, double tol)
{
    for (size_t i = 0; i < N; i++)
        if (!(fabs((double)want[i] - (double)got[i]) <= tol))
            fail_msg("%s: element %zu: expected %.9g, got %.9g (tolerance %.3g)", what, i,
                     (double)want[i], (double)got[i], tol);
}

/* Rank <= K: the power step finds the whole column space, and the push carries all of it,
 * on one server and cut across three; biases go as they are (bit for bit). */
static void test_low_rank_comes_back_whole(void **state)
{
    (void)state;
    float g[N], out[N];
    low_rank_grad(g);
    for (int k = 1; k <= 3; k += 2) {
        dt_ps_psgd *w = worker_for(k);
        memset(out, 0, sizeof out);
        push_and_read(w, k, g, NULL, out);
        expect_near(k == 1 ? "rank <= 2, one server" : "rank <= 2, three shards", g, out, 1e-5);
        assert_memory_equal(g + B1, out + B1, 8 * sizeof(float));
        assert_memory_equal(g + B2, out + B2, 3 * sizeof(float));
        dt_ps_psgd_free(w);
    }
}

/* A general gradient: three shards rebuild what one server rebuilds, but for W1's tail,
 * which arrives as it was. */
static void test_cut_matrices_rebuild_the_same(void **state)
{
    (void)state;
    float g[N], one[N], three[N];
    for (size_t i = 0; i < N; i++)
        g[i] = dev(9, i);
    dt_ps_psgd *w1 = worker_for(1), *w3 = worker_for(3);
    push_and_read(w1, 1, g, NULL, one);
    push_and_read(w3, 3, g, NULL, three);
    assert_memory_equal(g + TAIL, three + TAIL, (B1 - TAIL) * sizeof(float));
    memcpy(one + TAIL, g + TAIL, (B1 - TAIL) * sizeof(float));
    expect_near("three shards against one", one, three, 1e-6);
    dt_ps_psgd_free(w1);
    dt_ps_psgd_free(w3);
}

/* e := g + e - A: summed in double, the pushed A plus the kept e is g + e_before, to float
 * rounding of the subtraction; the dense biases keep nothing. */
static void test_error_feedback_keeps_the_rest(void **state)
{
    (void)state;
    float g[N], e[N], before[N], a[N];
    for (size_t i = 0; i < N; i++) {
        g[i] = dev(10, i);
        e[i] = before[i] = 0.25f * dev(11, i) * (i < B1 || (i >= W2 && i < B2));
    }
    dt_ps_psgd *w = worker_for(3);
    push_and_read(w, 3, g, e, a);
    for (size_t i = 0; i < N; i++) {
        const double m = (double)g[i] + (double)before[i], kept = (double)e[i] + (double)a[i];
        if (!(fabs(kept - m) <= ldexp(fabs(m) + fabs((double)a[i]), -23)))
            fail_msg("element %zu: pushed %.9g + kept %.9g = %.9g, expected g + e = %.9g", i,
                     (double)a[i], (double)e[i], kept, m);
    }
    for (size_t i = B1; i < W2; i++)
        assert_true(e[i] == 0.0f);
    for (size_t i = TAIL; i < B1; i++) /* pushed as it was: M, to the bit */
        if (e[i] != 0.0f || a[i] != g[i] + before[i])
            fail_msg("W1's tail, element %zu: pushed %.9g and kept %.9g, expected %.9g and 0", i,
                     (double)a[i], (double)e[i], (double)(g[i] + before[i]));
    dt_ps_psgd_free(w);
}

static double err2(const float *g, const float *a)
{
    double s = 0.0;
    for (size_t i = 0; i < N; i++)
        s += ((double)g[i] - a[i]) * ((double)g[i] - a[i]);
    return s;
}

/* The warm start: Q carries over, so ten steps on one gradient (no error feedback) end no
 * worse than the first, and Q is no longer the first draw. */
static void test_warm_start_refines(void **state)
{
    (void)state;
    float g[N], a[N];
    for (size_t i = 0; i < N; i++)
        g[i] = dev(12, i);
    dt_ps_psgd *w = worker_for(1);
    size_t qn = 0;
    float q0[48];
    memcpy(q0, dt_ps_psgd_factors(w, &qn), sizeof q0);
    push_and_read(w, 1, g, NULL, a);
    const double first = err2(g, a);
    for (int t = 0; t < 9; t++)
        push_and_read(w, 1, g, NULL, a);
    const double tenth = err2(g, a);
    if (!(tenth <= first * (1 + 1e-6)))
        fail_msg("squared error after 10 steps %.9g, after 1 %.9g: expected no worse", tenth,
                 first);
    assert_true(memcmp(q0, dt_ps_psgd_factors(w, &qn), sizeof q0) != 0);
    dt_ps_psgd_free(w);
}

/* A NaN in W2's gradient: W2's Q (after W1's 32) is drawn afresh, W1's is kept. */
static void test_nan_redraws_only_its_q(void **state)
{
    (void)state;
    float g[N], a[N], fresh[16];
    for (size_t i = 0; i < N; i++)
        g[i] = dev(13, i);
    dt_ps_psgd *w = worker_for(1);
    push_and_read(w, 1, g, NULL, a);
    g[W2 + 5] = NAN;
    size_t qn = 0;
    push_and_read(w, 1, g, NULL, a);
    float kept[32];
    memcpy(kept, dt_ps_psgd_factors(w, &qn), sizeof kept);
    dt_ps_psgd_forget_nonfinite(w);
    const float *q = dt_ps_psgd_factors(w, &qn);
    assert_memory_equal(kept, q, sizeof kept);
    dt_psgd_init_q(fresh, 8, 2, DT_PSGD_Q_SEED, 1);
    assert_memory_equal(fresh, q + 32, sizeof fresh);
    dt_ps_psgd_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_payload_bytes),
        cmocka_unit_test(test_low_rank_comes_back_whole),
        cmocka_unit_test(test_cut_matrices_rebuild_the_same),
        cmocka_unit_test(test_error_feedback_keeps_the_rest),
        cmocka_unit_test(test_warm_start_refines),
        cmocka_unit_test(test_nan_redraws_only_its_q),
    };
    return cmocka_run_group_tests(tests, make_model, free_model);
}
