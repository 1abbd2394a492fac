/* test_comm_coll.c — every collective and algorithm against a serial reference, under
 * mpirun with 1..5 ranks: counts 0, 1, 7 and 1,000,003, in place and not, every type and
 * reduction, uneven and empty blocks, small chunks (long pipelines), sub-groups and the
 * grid, non-blocking requests in flight together, point to point, splitting above the MPI
 * count limit (lowered for the test), and refused arguments. float16 and bfloat16 at counts
 * 1, 7, 1000 and 65537: exact where the data keep sums exact, and with random data the same
 * bits on every rank within the rounding bound of the exact sum. */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_cases.h"

static dt_comm *world;
static const dt_comm_algo algos[] = {DT_COMM_ALGO_AUTO, DT_COMM_ALGO_MPI, DT_COMM_ALGO_RING};
#define NALGO 3

static dt_comm_options test_options(void)
{
    dt_comm_options o = dt_comm_options_default();
    o.timeout_s = 60; /* a hang fails the test with a report instead of the ctest timeout */
    return o;
}

/* The covering set: every operation x algorithm x count x in-place form in float32 sum
 * (the exact small integers make every order give the same bits). */
static int float_sum_matrix(dt_comm *c, uint64_t seed)
{
    static const size_t counts[] = {0, 1, 7, 1000003};
    int ok = 1, n = dt_comm_size(c);
    for (int ai = 0; ai < NALGO; ai++)
        for (size_t ci = 0; ci < 4; ci++) {
            size_t cnt = counts[ci];
            for (int ip = 0; ip < 2; ip++) {
                ct_case k = {.coll = DT_COMM_ALLREDUCE,
                             .algo = algos[ai],
                             .t = DT_COMM_FLOAT32,
                             .op = DT_COMM_SUM,
                             .count = cnt,
                             .in_place = ip,
                             .root = n - 1};
                ok &= ct_run_case(c, &k, seed++);
                k.coll = DT_COMM_REDUCE;
                ok &= ct_run_case(c, &k, seed++);
                k.coll = DT_COMM_ALLGATHER;
                k.v = 1; /* the total is cnt, in uneven (for 1: empty) blocks */
                ok &= ct_run_case(c, &k, seed++);
                k.coll = DT_COMM_REDUCE_SCATTER;
                ok &= ct_run_case(c, &k, seed++);
            }
            ct_case k = {.coll = DT_COMM_REDUCE_SCATTER,
                         .algo = algos[ai],
                         .t = DT_COMM_FLOAT32,
                         .op = DT_COMM_SUM,
                         .count = cnt,
                         .v = 1,
                         .in_place = 2};
            ok &= ct_run_case(c, &k, seed++);
            k.coll = DT_COMM_BCAST;
            k.in_place = 0;
            k.root = n / 2;
            ok &= ct_run_case(c, &k, seed++);
            if (cnt <= 7) { /* the equal-block forms: count per rank */
                k.v = 0;
                for (int ip = 0; ip < 3; ip++) {
                    k.coll = DT_COMM_REDUCE_SCATTER;
                    k.in_place = ip;
                    ok &= ct_run_case(c, &k, seed++);
                    k.coll = DT_COMM_ALLGATHER;
                    k.in_place = ip > 0;
                    ok &= ct_run_case(c, &k, seed++);
                }
            }
        }
    return ok;
}

static void test_float_sum_matrix(void **state)
{
    (void)state;
    assert_true(ct_all(float_sum_matrix(world, 1000)));
}

/* Every type and reduction (integers at full range: sums wrap; floats' max and min with NaNs
 * and infinities), every algorithm. */
static void test_types_and_ops(void **state)
{
    (void)state;
    static const size_t counts[] = {7, 1000, 20011};
    int ok = 1, n = dt_comm_size(world);
    uint64_t seed = 2000;
    for (int t = 0; t < DT_COMM_DTYPE_COUNT; t++)
        for (int op = 0; op < DT_COMM_REDOP_COUNT; op++)
            for (int ai = 0; ai < NALGO; ai++)
                for (size_t ci = 0; ci < 3; ci++) {
                    /* Floats stay exact (small integers; 16 bits: times a power of two)
                     * under sum and avg; max/min and integer sums are order-free at any
                     * value. Float max/min meet NaNs and infinities on every rank, which
                     * comm.h's rule propagates (MPI's MAX and MIN leave NaN undefined). */
                    int is_float = t == DT_COMM_FLOAT32 || t == DT_COMM_FLOAT64 ||
                                   ct_is_half((dt_comm_dtype)t);
                    int sum = op == DT_COMM_SUM || op == DT_COMM_AVG;
                    int kind = is_float ? (sum ? CT_EXACT : CT_SPECIAL) : CT_RANDOM;
                    ct_case k = {.coll = DT_COMM_ALLREDUCE,
                                 .algo = algos[ai],
                                 .t = (dt_comm_dtype)t,
                                 .op = (dt_comm_redop)op,
                                 .count = counts[ci],
                                 .in_place = (int)(ci & 1),
                                 .root = (int)ci % n,
                                 .kind = kind};
                    ok &= ct_run_case(world, &k, seed++);
                    k.coll = DT_COMM_REDUCE;
                    ok &= ct_run_case(world, &k, seed++);
                    k.coll = DT_COMM_REDUCE_SCATTER;
                    k.v = 1;
                    ok &= ct_run_case(world, &k, seed++);
                    if (op == 0) { /* data movement does not depend on the operation */
                        k.coll = DT_COMM_ALLGATHER;
                        ok &= ct_run_case(world, &k, seed++);
                        k.coll = DT_COMM_BCAST;
                        ok &= ct_run_case(world, &k, seed++);
                    }
                }
    assert_true(ct_all(ok));
}

static const dt_comm_dtype half_types[] = {DT_COMM_FLOAT16, DT_COMM_BFLOAT16};
static const size_t half_counts[] = {1, 7, 1000, 65537};

/* float16 and bfloat16: every collective x algorithm x reduction at awkward counts, in
 * place and not, blocking and not. The EXACT data (small integers times one power of two
 * per element, from the subnormals to near the largest values) keep every sum exact, so
 * every algorithm must give the reference's bits, AVG's rounding included. */
static void test_half_types(void **state)
{
    (void)state;
    int ok = 1, n = dt_comm_size(world);
    uint64_t seed = 9000;
    for (int ti = 0; ti < 2; ti++)
        for (int op = 0; op < DT_COMM_REDOP_COUNT; op++)
            for (int ai = 0; ai < NALGO; ai++)
                for (size_t ci = 0; ci < 4; ci++) {
                    ct_case k = {.coll = DT_COMM_ALLREDUCE,
                                 .algo = algos[ai],
                                 .t = half_types[ti],
                                 .op = (dt_comm_redop)op,
                                 .count = half_counts[ci],
                                 .in_place = (int)((ci + (size_t)op) & 1),
                                 .root = (int)(ci % (size_t)n),
                                 .kind = CT_EXACT,
                                 .nonblocking = (int)(ci == 2)};
                    ok &= ct_run_case(world, &k, seed++);
                    k.coll = DT_COMM_REDUCE;
                    ok &= ct_run_case(world, &k, seed++);
                    k.coll = DT_COMM_REDUCE_SCATTER;
                    k.v = 1; /* the total is the count, in uneven (for 1: empty) blocks */
                    ok &= ct_run_case(world, &k, seed++);
                    k.v = 0; /* equal blocks of the count each, into the own block */
                    k.in_place = 2 * k.in_place;
                    ok &= ct_run_case(world, &k, seed++);
                    if (op == 0) { /* data movement does not depend on the operation */
                        k.coll = DT_COMM_ALLGATHER;
                        k.in_place = k.in_place > 0;
                        ok &= ct_run_case(world, &k, seed++);
                        k.v = 1;
                        ok &= ct_run_case(world, &k, seed++);
                        k.coll = DT_COMM_BCAST;
                        ok &= ct_run_case(world, &k, seed++);
                    }
                }
    assert_true(ct_all(ok));
}

/* One all-reduce or reduce-scatter of random 16-bit data on the world, whose rounding
 * depends on the algorithm's order: checked against the exact sum (double holds sums of
 * these values exactly). N-1 additions in any order, each rounded once with relative error
 * at most u, the unit roundoff, give |got - sum| <= g S with g = (N-1)u / (1 - (N-1)u) and
 * S the sum of |x| (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., 4.2;
 * additions with subnormal results are exact). AVG rounds once more: u |got sum| / N, plus
 * half the smallest subnormal. An all-reduce must also leave the same bits on every rank. */
static int half_bound_case(dt_comm_dtype t, dt_comm_coll coll, dt_comm_algo algo, dt_comm_redop op,
                           size_t cnt, uint64_t seed)
{
    int n = dt_comm_size(world), r = dt_comm_rank(world), ok = 1;
    size_t full = coll == DT_COMM_ALLREDUCE ? cnt : cnt * (size_t)n;
    size_t first = coll == DT_COMM_ALLREDUCE ? 0 : cnt * (size_t)r;
    uint16_t *x = ct_alloc(full * 2), *tmp = ct_alloc(full * 2);
    uint16_t *all = ct_alloc((size_t)n * cnt * 2);
    double *sum = ct_alloc(cnt * sizeof(double)), *abs_sum = ct_alloc(cnt * sizeof(double));
    ct_fill(t, x, full, r, seed, CT_RANDOM);
    dt_comm_args a = dt_comm_args_init(coll);
    a.sendbuf = a.recvbuf = x; /* in place: the result at the buffer's start */
    a.count = cnt;
    a.dtype = t;
    a.op = op;
    a.algo = algo;
    dt_status st = dt_comm_run(world, &a);
    char name[160];
    snprintf(name, sizeof name, "%s %s %s count %zu algo %s", dt_comm_coll_name(coll),
             dt_comm_redop_name(op), dt_comm_dtype_name(t), cnt, dt_comm_algo_name(algo));
    if (st != DT_OK) {
        fprintf(stderr, "FAIL rank %d: %s: %s: %s\n", r, name, dt_status_str(st), dt_last_error());
        ok = 0;
    }
    for (int p = 0; p < n; p++) {
        ct_fill(t, tmp, full, p, seed, CT_RANDOM);
        for (size_t i = 0; i < cnt; i++) {
            double v = ct_half_value(t, tmp[first + i]);
            sum[i] = p ? sum[i] + v : v;
            abs_sum[i] = p ? abs_sum[i] + fabs(v) : fabs(v);
        }
    }
    double u = ct_half_unit(t), g = (n - 1) * u / (1 - (n - 1) * u);
    size_t bad = 0;
    for (size_t i = 0; i < cnt; i++) {
        double got = ct_half_value(t, x[i]), tol = g * abs_sum[i], want = sum[i];
        if (op == DT_COMM_AVG) {
            tol = (tol + u * (fabs(sum[i]) + tol)) / n + ct_half_tiny(t);
            want = sum[i] / n;
        }
        if (!(fabs(got - want) <= tol) && bad++ == 0)
            fprintf(stderr,
                    "FAIL rank %d: %s: element %zu is %.9g (0x%04X), exact %.9g, "
                    "error %.3g above the bound %.3g\n",
                    r, name, i, got, (unsigned)x[i], want, fabs(got - want), tol);
    }
    ok &= bad == 0;
    if (coll == DT_COMM_ALLREDUCE) { /* raw MPI, not the layer under test */
        MPI_Allgather(x, (int)cnt, MPI_UINT16_T, all, (int)cnt, MPI_UINT16_T, MPI_COMM_WORLD);
        for (int p = 1; p < n; p++) {
            char what[200];
            snprintf(what, sizeof what, "%s: rank %d's bits vs rank 0's", name, p);
            ok &= ct_check(what, t, all + (size_t)p * cnt, all, cnt);
        }
    }
    free(x);
    free(tmp);
    free(all);
    free(sum);
    free(abs_sum);
    return ok;
}

static void test_half_rounding_bound(void **state)
{
    (void)state;
    int ok = 1;
    uint64_t seed = 9500;
    for (int ti = 0; ti < 2; ti++)
        for (int ai = 0; ai < NALGO; ai++)
            for (size_t ci = 0; ci < 4; ci++)
                for (int avg = 0; avg < 2; avg++) {
                    dt_comm_redop op = avg ? DT_COMM_AVG : DT_COMM_SUM;
                    ok &= half_bound_case(half_types[ti], DT_COMM_ALLREDUCE, algos[ai], op,
                                          half_counts[ci], seed++);
                    ok &= half_bound_case(half_types[ti], DT_COMM_REDUCE_SCATTER, algos[ai], op,
                                          half_counts[ci], seed++);
                }
    assert_true(ct_all(ok));
}

/* Tiny chunks: thousands of pipelined steps, windows full, slots recycled. */
static void test_small_chunks(void **state)
{
    (void)state;
    dt_comm *c = NULL;
    DT_ASSERT_OK(dt_comm_dup(world, "chunks", &c));
    int ok = 1;
    uint64_t seed = 3000;
    for (int det = 0; det < 2; det++)
        for (size_t chunk = 64; chunk <= 200; chunk += 136) { /* 64 and 200 bytes */
            dt_comm_options o = test_options();
            o.chunk_bytes = chunk;
            o.direct_max_bytes = 0;
            o.deterministic = det;
            DT_ASSERT_OK(dt_comm_set_options(c, &o));
            static const size_t counts[] = {1, 7, 10007};
            for (size_t ci = 0; ci < 3; ci++)
                for (int ip = 0; ip < 2; ip++) {
                    ct_case k = {.coll = DT_COMM_ALLREDUCE,
                                 .algo = DT_COMM_ALGO_RING,
                                 .t = DT_COMM_FLOAT64,
                                 .op = DT_COMM_AVG,
                                 .count = counts[ci],
                                 .in_place = ip,
                                 .v = 1,
                                 .root = 0};
                    ok &= ct_run_case(c, &k, seed++);
                    k.coll = DT_COMM_REDUCE_SCATTER;
                    ok &= ct_run_case(c, &k, seed++);
                    k.coll = DT_COMM_ALLGATHER;
                    ok &= ct_run_case(c, &k, seed++);
                    k.coll = DT_COMM_REDUCE;
                    ok &= ct_run_case(c, &k, seed++);
                }
        }
    dt_comm_free(c);
    assert_true(ct_all(ok));
}

/* Sub-groups: even and odd world ranks, each running the collectives on its own. */
static void test_subgroups(void **state)
{
    (void)state;
    int wr = dt_comm_rank(world), wn = dt_comm_size(world);
    dt_comm *half = NULL, *none = NULL;
    DT_ASSERT_OK(dt_comm_split(world, wr % 2, -wr, "half", &half));
    assert_non_null(half);
    /* key -wr: reversed order inside the group */
    int hn = dt_comm_size(half), hr = dt_comm_rank(half);
    assert_int_equal(hn, (wn + 1 - wr % 2) / 2);
    assert_int_equal(dt_comm_world_rank(half, hr), wr);
    if (hn > 1)
        assert_true(dt_comm_world_rank(half, 0) > dt_comm_world_rank(half, hn - 1));
    DT_ASSERT_OK(dt_comm_split(world, wr == 0 ? 0 : -1, 0, "solo", &none));
    assert_true(wr == 0 ? none != NULL : none == NULL);
    dt_comm_free(none);
    int ok = 1;
    uint64_t seed = 4000;
    static const size_t counts[] = {0, 1, 7, 1000003};
    for (int ai = 0; ai < NALGO; ai++)
        for (size_t ci = 0; ci < 4; ci++) {
            ct_case k = {.coll = DT_COMM_ALLREDUCE,
                         .algo = algos[ai],
                         .t = DT_COMM_FLOAT32,
                         .op = DT_COMM_SUM,
                         .count = counts[ci],
                         .v = 1,
                         .in_place = 1,
                         .root = hn - 1};
            for (int coll = 0; coll <= DT_COMM_REDUCE; coll++) {
                k.coll = (dt_comm_coll)coll;
                ok &= ct_run_case(half, &k, seed++);
            }
        }
    dt_comm_free(half);
    assert_true(ct_all(ok));
}

/* The grid: coordinates follow rank = tp + T*(dp + D*pp) and every group holds exactly the
 * ranks that differ along its axis; an all-reduce of world ranks over each group shows it. */
static void test_grid(void **state)
{
    (void)state;
    int wn = dt_comm_size(world), wr = dt_comm_rank(world);
    int layouts[][3] = {{0, 1, 1}, {0, 2, 1}, {0, 1, 2}, {1, 2, 2}, {2, 1, 2}, {0, 0, 0}};
    int ok = 1;
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        int D = layouts[li][0], T = layouts[li][1] ? layouts[li][1] : 1,
            P = layouts[li][2] ? layouts[li][2] : 1;
        if ((D ? D : wn / (T * P)) * T * P != wn || wn % (T * P) != 0)
            continue;
        dt_grid *g = NULL;
        DT_ASSERT_OK(dt_grid_create(world, layouts[li][0], layouts[li][1], layouts[li][2], &g));
        D = dt_grid_size(g, DT_GRID_DP);
        int t = dt_grid_rank(g, DT_GRID_TP), d = dt_grid_rank(g, DT_GRID_DP),
            p = dt_grid_rank(g, DT_GRID_PP);
        ok &= dt_grid_world_rank(g, d, t, p) == wr && wr == t + T * (d + D * p);
        for (int ax = 0; ax < DT_GRID_AXIS_COUNT; ax++) {
            dt_comm *c = dt_grid_comm(g, (dt_grid_axis)ax);
            ok &= dt_comm_size(c) == dt_grid_size(g, (dt_grid_axis)ax);
            ok &= dt_comm_rank(c) == dt_grid_rank(g, (dt_grid_axis)ax);
            ok &= strcmp(dt_comm_name(c), dt_grid_axis_name((dt_grid_axis)ax)) == 0;
            /* the members' world ranks, summed, equal the formula's sum over the axis */
            int64_t mine = wr, sum = 0, expect = 0;
            DT_ASSERT_OK(dt_comm_allreduce(c, &mine, &sum, 1, DT_COMM_INT64, DT_COMM_SUM));
            for (int k = 0; k < dt_grid_size(g, (dt_grid_axis)ax); k++)
                expect += ax == DT_GRID_DP   ? dt_grid_world_rank(g, k, t, p)
                          : ax == DT_GRID_TP ? dt_grid_world_rank(g, d, k, p)
                                             : dt_grid_world_rank(g, d, t, k);
            if (sum != expect) {
                fprintf(stderr,
                        "FAIL rank %d: grid %dx%dx%d axis %s: sum of members %lld, "
                        "expected %lld\n",
                        wr, D, T, P, dt_grid_axis_name((dt_grid_axis)ax), (long long)sum,
                        (long long)expect);
                ok = 0;
            }
        }
        dt_grid_free(g);
    }
    /* Refused layouts: same message on every rank, nothing sent. */
    dt_grid *g = NULL;
    DT_ASSERT_STATUS(dt_grid_create(world, wn + 1, 1, 1, &g), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("must equal the world size");
    assert_null(g);
    DT_ASSERT_STATUS(dt_grid_create(world, 0, wn + 1, 1, &g), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("does not divide");
    DT_ASSERT_STATUS(dt_grid_create(world, -1, 1, 1, &g), DT_ERR_INVALID);
    assert_true(ct_all(ok));
}

/* Non-blocking: several requests of every algorithm in flight at once, driven by progress
 * and completed in reverse order; the data-parallel pattern. */
static void test_nonblocking_overlap(void **state)
{
    (void)state;
    enum { NB = 6 };
    static const size_t counts[NB] = {5, 3000, 1000003, 17, 250000, 0};
    int n = dt_comm_size(world), me = dt_comm_rank(world);
    float *buf[NB], *ref[NB];
    dt_comm_req *req[NB];
    for (int i = 0; i < NB; i++) {
        buf[i] = ct_alloc(counts[i] * sizeof(float));
        ref[i] = ct_alloc(counts[i] * sizeof(float));
        ct_fill(DT_COMM_FLOAT32, buf[i], counts[i], me, 5000 + (uint64_t)i, CT_EXACT);
        dt_comm_args a = dt_comm_args_init(DT_COMM_ALLREDUCE);
        a.sendbuf = a.recvbuf = buf[i];
        a.count = counts[i];
        a.dtype = DT_COMM_FLOAT32;
        a.op = DT_COMM_SUM;
        a.algo = algos[i % NALGO];
        DT_ASSERT_OK(dt_comm_start(world, &a, &req[i]));
        DT_ASSERT_OK(dt_comm_progress(world));
    }
    int done = 0;
    DT_ASSERT_OK(dt_comm_test(&req[0], &done));
    for (int i = NB - 1; i >= 0; i--)
        DT_ASSERT_OK(dt_comm_wait(&req[i]));
    int ok = 1;
    for (int i = 0; i < NB; i++) {
        assert_null(req[i]);
        ct_reference(world, DT_COMM_FLOAT32, DT_COMM_SUM, ref[i], 0, counts[i], counts[i],
                     5000 + (uint64_t)i, CT_EXACT);
        ok &= ct_check("overlapped allreduce", DT_COMM_FLOAT32, buf[i], ref[i], counts[i]);
        free(buf[i]);
        free(ref[i]);
    }
    (void)n;
    /* The non-blocking path of every collective kind. */
    uint64_t seed = 5100;
    for (int coll = 0; coll <= DT_COMM_REDUCE; coll++)
        for (int ai = 0; ai < NALGO; ai++) {
            ct_case k = {.coll = (dt_comm_coll)coll,
                         .algo = algos[ai],
                         .t = DT_COMM_INT32,
                         .op = DT_COMM_MAX,
                         .count = 30011,
                         .v = 1,
                         .root = 1 % n,
                         .kind = CT_RANDOM,
                         .nonblocking = 1};
            ok &= ct_run_case(world, &k, seed++);
        }
    DT_ASSERT_OK(dt_comm_waitall(NULL, 0));
    assert_true(ct_all(ok));
}

/* Steady state: after dt_comm_reserve, collectives of every algorithm allocate nothing. */
static void test_no_allocation(void **state)
{
    (void)state;
    size_t cnt = 300007;
    float *a = ct_alloc(cnt * sizeof(float)), *b = ct_alloc(cnt * sizeof(float));
    DT_ASSERT_OK(dt_comm_reserve(world, cnt * sizeof(float)));
    dt_comm_stats before, after;
    dt_comm_get_stats(world, &before);
    for (int ai = 0; ai < NALGO; ai++) {
        dt_comm_args x = dt_comm_args_init(DT_COMM_REDUCE_SCATTER);
        x.sendbuf = a;
        x.recvbuf = b;
        x.count = cnt / (size_t)dt_comm_size(world);
        x.dtype = DT_COMM_FLOAT32;
        x.op = DT_COMM_SUM;
        x.algo = algos[ai];
        DT_ASSERT_OK(dt_comm_run(world, &x));
        DT_ASSERT_OK(dt_comm_allreduce(world, a, a, cnt, DT_COMM_FLOAT32, DT_COMM_SUM));
        DT_ASSERT_OK(dt_comm_reduce(world, a, b, cnt, DT_COMM_FLOAT32, DT_COMM_SUM, 0));
    }
    dt_comm_get_stats(world, &after);
    assert_int_equal(after.allocations, before.allocations);
    assert_int_equal(after.collectives, before.collectives + 3 * NALGO);
    free(a);
    free(b);
}

/* Point to point around the ring, blocking and not, with every tag class. */
static void test_point_to_point(void **state)
{
    (void)state;
    int n = dt_comm_size(world), r = dt_comm_rank(world);
    int right = (r + 1) % n, left = (r + n - 1) % n;
    size_t cnt = 70001;
    double *out = ct_alloc(cnt * sizeof(double)), *in = ct_alloc(cnt * sizeof(double));
    double *ref = ct_alloc(cnt * sizeof(double));
    ct_fill(DT_COMM_FLOAT64, out, cnt, r, 6000, CT_RANDOM);
    ct_fill(DT_COMM_FLOAT64, ref, cnt, left, 6000, CT_RANDOM);
    dt_comm_req *rs = NULL, *rr = NULL;
    DT_ASSERT_OK(dt_comm_irecv(world, in, cnt, DT_COMM_FLOAT64, left, 7, &rr));
    DT_ASSERT_OK(dt_comm_isend(world, out, cnt, DT_COMM_FLOAT64, right, 7, &rs));
    DT_ASSERT_OK(dt_comm_wait(&rr));
    DT_ASSERT_OK(dt_comm_wait(&rs));
    int ok = ct_check("isend/irecv", DT_COMM_FLOAT64, in, ref, cnt);
    /* blocking, zero length, ordered by rank parity so that it cannot deadlock */
    if (n > 1) {
        if (r % 2 == 0) {
            DT_ASSERT_OK(dt_comm_send(world, out, 0, DT_COMM_FLOAT64, right, DT_COMM_TAG_MAX - 1));
            DT_ASSERT_OK(dt_comm_recv(world, in, 0, DT_COMM_FLOAT64, left, DT_COMM_TAG_MAX - 1));
        } else {
            DT_ASSERT_OK(dt_comm_recv(world, in, 0, DT_COMM_FLOAT64, left, DT_COMM_TAG_MAX - 1));
            DT_ASSERT_OK(dt_comm_send(world, out, 0, DT_COMM_FLOAT64, right, DT_COMM_TAG_MAX - 1));
        }
    }
    /* the 16-bit types, around the ring the other way */
    for (int ti = 0; ti < 2; ti++) {
        dt_comm_dtype t = half_types[ti];
        ct_fill(t, out, cnt, r, 6100 + (uint64_t)ti, CT_RANDOM);
        ct_fill(t, ref, cnt, right, 6100 + (uint64_t)ti, CT_RANDOM);
        DT_ASSERT_OK(dt_comm_irecv(world, in, cnt, t, right, 8, &rr));
        DT_ASSERT_OK(dt_comm_isend(world, out, cnt, t, left, 8, &rs));
        DT_ASSERT_OK(dt_comm_wait(&rs));
        DT_ASSERT_OK(dt_comm_wait(&rr));
        ok &= ct_check("isend/irecv", t, in, ref, cnt);
        if (n > 1) { /* blocking, ordered by rank parity so that it cannot deadlock */
            memset(in, 0, cnt * 2);
            if (r % 2 == 0) {
                DT_ASSERT_OK(dt_comm_send(world, out, cnt, t, left, 9));
                DT_ASSERT_OK(dt_comm_recv(world, in, cnt, t, right, 9));
            } else {
                DT_ASSERT_OK(dt_comm_recv(world, in, cnt, t, right, 9));
                DT_ASSERT_OK(dt_comm_send(world, out, cnt, t, left, 9));
            }
            ok &= ct_check("send/recv", t, in, ref, cnt);
        }
    }
    free(out);
    free(in);
    free(ref);
    assert_true(ct_all(ok));
}

/* Counts above the MPI int limit are split: the limit lowered to 4096 elements here,
 * since 2 GiB per rank does not fit the test machines. */
static void test_split_above_limit(void **state)
{
    (void)state;
    dt_comm *c = NULL;
    DT_ASSERT_OK(dt_comm_dup(world, "limited", &c));
    dt_comm_set_max_count_for_testing(c, 4096);
    int n = dt_comm_size(c), r = dt_comm_rank(c), ok = 1;
    uint64_t seed = 7000;
    for (int ai = 0; ai < NALGO; ai++)
        for (int coll = 0; coll <= DT_COMM_REDUCE; coll++)
            for (int ip = 0; ip < 2; ip++) {
                ct_case k = {.coll = (dt_comm_coll)coll,
                             .algo = algos[ai],
                             .t = DT_COMM_FLOAT32,
                             .op = DT_COMM_AVG,
                             .count = 40013,
                             .v = 1,
                             .in_place = ip,
                             .root = n - 1};
                ok &= ct_run_case(c, &k, seed++);
                if (coll == DT_COMM_REDUCE_SCATTER || coll == DT_COMM_ALLGATHER) {
                    k.v = 0; /* equal blocks, each above the limit */
                    k.count = 9001;
                    ok &= ct_run_case(c, &k, seed++);
                }
            }
    for (int ti = 0; ti < 2; ti++) /* 16-bit pieces, through our MPI operations */
        for (int ai = 0; ai < NALGO; ai++)
            for (int coll = 0; coll <= DT_COMM_REDUCE; coll++) {
                ct_case k = {.coll = (dt_comm_coll)coll,
                             .algo = algos[ai],
                             .t = half_types[ti],
                             .op = DT_COMM_AVG,
                             .count = 40013,
                             .v = 1,
                             .in_place = 1,
                             .root = 0,
                             .kind = CT_EXACT};
                ok &= ct_run_case(c, &k, seed++);
            }
    ct_case big = {.coll = DT_COMM_ALLREDUCE,
                   .algo = DT_COMM_ALGO_MPI,
                   .t = DT_COMM_FLOAT32,
                   .op = DT_COMM_SUM,
                   .count = 1000003};
    ok &= ct_run_case(c, &big, seed++);
    /* point to point in pieces */
    size_t cnt = 10000;
    int32_t *x = ct_alloc(cnt * sizeof(int32_t)), *y = ct_alloc(cnt * sizeof(int32_t));
    int32_t *ref = ct_alloc(cnt * sizeof(int32_t));
    ct_fill(DT_COMM_INT32, x, cnt, r, seed, CT_RANDOM);
    ct_fill(DT_COMM_INT32, ref, cnt, (r + n - 1) % n, seed, CT_RANDOM);
    dt_comm_req *q = NULL;
    DT_ASSERT_OK(dt_comm_irecv(c, y, cnt, DT_COMM_INT32, (r + n - 1) % n, 3, &q));
    DT_ASSERT_OK(dt_comm_send(c, x, cnt, DT_COMM_INT32, (r + 1) % n, 3));
    DT_ASSERT_OK(dt_comm_wait(&q));
    ok &= ct_check("send/recv in pieces", DT_COMM_INT32, y, ref, cnt);
    free(x);
    free(y);
    free(ref);
    dt_comm_free(c);
    assert_true(ct_all(ok));
}

/* Arguments MPI would abort on are refused before MPI sees them. */
static void test_refused_arguments(void **state)
{
    (void)state;
    int n = dt_comm_size(world);
    float buf[64];
    memset(buf, 0, sizeof buf);
    DT_ASSERT_STATUS(dt_comm_allreduce(world, buf, buf + 1, 8, DT_COMM_FLOAT32, DT_COMM_SUM),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("overlap");
    DT_ASSERT_STATUS(dt_comm_allreduce(world, buf, NULL, 8, DT_COMM_FLOAT32, DT_COMM_SUM),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("NULL");
    DT_ASSERT_STATUS(dt_comm_allreduce(world, buf, buf, 8, (dt_comm_dtype)9, DT_COMM_SUM),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("element type 9");
    DT_ASSERT_STATUS(dt_comm_allreduce(world, buf, buf, 8, DT_COMM_FLOAT32, (dt_comm_redop)7),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("reduction operation 7");
    DT_ASSERT_STATUS(dt_comm_bcast(world, buf, 8, DT_COMM_FLOAT32, n), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("root");
    DT_ASSERT_STATUS(dt_comm_send(world, buf, 8, DT_COMM_FLOAT32, 0, DT_COMM_TAG_MAX),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("tag");
    DT_ASSERT_STATUS(dt_comm_allgather(world, buf + 1, buf, 2, DT_COMM_FLOAT32), DT_ERR_INVALID);
    /* rank 0's in-place all-gather is buf + 0; anything else overlapping is refused */
    if (dt_comm_rank(world) == 0 && n > 1)
        DT_ASSERT_ERROR_HAS("in place means sendbuf == recvbuf + 0");
    dt_comm_args a = dt_comm_args_init(DT_COMM_ALLREDUCE);
    a.algo = (dt_comm_algo)17;
    DT_ASSERT_STATUS(dt_comm_run(world, &a), DT_ERR_INVALID);
    dt_comm_options o = test_options();
    o.direct_max_bytes = o.chunk_bytes + 1;
    DT_ASSERT_STATUS(dt_comm_set_options(world, &o), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("direct_max_bytes");
    o = test_options();
    o.timeout_s = 0;
    DT_ASSERT_STATUS(dt_comm_set_options(world, &o), DT_ERR_INVALID);
    /* nothing was started: the handle still works and the sequences still agree */
    int32_t one = 1, sum = 0;
    DT_ASSERT_OK(dt_comm_allreduce(world, &one, &sum, 1, DT_COMM_INT32, DT_COMM_SUM));
    assert_int_equal(sum, n);
    dt_comm_algo al;
    DT_ASSERT_OK(dt_comm_algo_parse("ring", &al));
    assert_int_equal(al, DT_COMM_ALGO_RING);
    DT_ASSERT_STATUS(dt_comm_algo_parse("nccl", &al), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("nccl");
}

/* Waiting on one handle advances the others of its family: even ranks start a ring
 * all-reduce on A and then block on B, odd ranks the other way round. If a wait only stepped
 * its own handle's state machines, each side would wait for the other forever. */
static void test_cross_handle_progress(void **state)
{
    (void)state;
    dt_comm *a = NULL, *b = NULL;
    DT_ASSERT_OK(dt_comm_dup(world, "A", &a));
    DT_ASSERT_OK(dt_comm_dup(world, "B", &b));
    dt_comm_options o = test_options();
    o.algorithm = DT_COMM_ALGO_RING;
    o.chunk_bytes = 4096; /* many chunks: many steps that need the other side */
    o.direct_max_bytes = 0;
    DT_ASSERT_OK(dt_comm_set_options(a, &o));
    DT_ASSERT_OK(dt_comm_set_options(b, &o));
    size_t cnt = 200003;
    int me = dt_comm_rank(world), ok = 1;
    float *x = ct_alloc(cnt * sizeof(float)), *y = ct_alloc(cnt * sizeof(float));
    float *ref = ct_alloc(cnt * sizeof(float));
    ct_fill(DT_COMM_FLOAT32, x, cnt, me, 8000, CT_EXACT);
    ct_fill(DT_COMM_FLOAT32, y, cnt, me, 8001, CT_EXACT);
    dt_comm *first = me % 2 ? b : a, *second = me % 2 ? a : b;
    float *xf = me % 2 ? y : x, *xs = me % 2 ? x : y;
    dt_comm_req *q = NULL;
    DT_ASSERT_OK(dt_comm_iallreduce(first, xf, xf, cnt, DT_COMM_FLOAT32, DT_COMM_SUM, &q));
    DT_ASSERT_OK(dt_comm_allreduce(second, xs, xs, cnt, DT_COMM_FLOAT32, DT_COMM_SUM));
    DT_ASSERT_OK(dt_comm_wait(&q));
    ct_reference(world, DT_COMM_FLOAT32, DT_COMM_SUM, ref, 0, cnt, cnt, 8000, CT_EXACT);
    ok &= ct_check("all-reduce on A", DT_COMM_FLOAT32, x, ref, cnt);
    ct_reference(world, DT_COMM_FLOAT32, DT_COMM_SUM, ref, 0, cnt, cnt, 8001, CT_EXACT);
    ok &= ct_check("all-reduce on B", DT_COMM_FLOAT32, y, ref, cnt);
    free(x);
    free(y);
    free(ref);
    dt_comm_free(a);
    dt_comm_free(b);
    assert_true(ct_all(ok));
}

static const char *last_algo(dt_comm *c, dt_comm_record *rec)
{
    dt_comm_record all[DT_COMM_HISTORY];
    size_t k = dt_comm_history(c, all, DT_COMM_HISTORY);
    assert_true(k > 0);
    *rec = all[k - 1];
    return rec->algo;
}

/* AUTO takes ours below direct_max_bytes, MPI's below the ring's threshold (ring_min_bytes
 * at 2 ranks, x (N/2)^2 in a group of N > 2), the ring from there; the deterministic flag
 * overrides every choice for reductions. The history says which ran. */
static void test_algorithm_choice(void **state)
{
    (void)state;
    int n = dt_comm_size(world);
    dt_comm_options d = dt_comm_options_default();
    double grow = n > 2 ? (double)n * n / 4.0 : 1.0;
    size_t at = (size_t)((double)d.ring_min_bytes * grow + 3.0) / sizeof(float);
    /* floats at the threshold or just over, a multiple of the group (whole blocks) */
    size_t big = (at + (size_t)n - 1) / (size_t)n * (size_t)n;
    size_t below = big - (size_t)n; /* a block's float less: under it */
    if (n == 1)
        below = big - 1;
    float *x = ct_alloc(big * sizeof(float));
    struct {
        dt_comm_coll coll;
        dt_comm_algo algo;
        int det;
        size_t count;
        const char *expect;
    } cases[] = {
        {DT_COMM_ALLREDUCE, DT_COMM_ALGO_AUTO, 0, 256, "direct"},
        {DT_COMM_ALLREDUCE, DT_COMM_ALGO_AUTO, 0, 65536, "mpi"},
        {DT_COMM_ALLREDUCE, DT_COMM_ALGO_AUTO, 0, big, "ring"},
        {DT_COMM_ALLREDUCE, DT_COMM_ALGO_AUTO, 0, below, "mpi"},
        {DT_COMM_REDUCE_SCATTER, DT_COMM_ALGO_AUTO, 0, below, "mpi"},
        {DT_COMM_ALLREDUCE, DT_COMM_ALGO_RING, 0, 7, "ring"},
        {DT_COMM_ALLREDUCE, DT_COMM_ALGO_MPI, 0, big, "mpi"},
        {DT_COMM_ALLREDUCE, DT_COMM_ALGO_MPI, 1, 7, "direct"},
        {DT_COMM_ALLREDUCE, DT_COMM_ALGO_MPI, 1, big, "det"},
        {DT_COMM_ALLREDUCE, DT_COMM_ALGO_RING, 1, big, "det"},
        {DT_COMM_REDUCE_SCATTER, DT_COMM_ALGO_AUTO, 0, 256, "det"},
        {DT_COMM_REDUCE_SCATTER, DT_COMM_ALGO_AUTO, 0, big, "ring"},
        {DT_COMM_ALLGATHER, DT_COMM_ALGO_AUTO, 0, 256, "direct"},
        {DT_COMM_ALLGATHER, DT_COMM_ALGO_RING, 0, 256, "ring"},
        {DT_COMM_REDUCE, DT_COMM_ALGO_RING, 0, big, "mpi"},
        {DT_COMM_REDUCE, DT_COMM_ALGO_AUTO, 1, big, "det"},
        {DT_COMM_BCAST, DT_COMM_ALGO_RING, 0, big, "mpi"},
    };
    dt_comm_options o = test_options();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        o.deterministic = cases[i].det;
        DT_ASSERT_OK(dt_comm_set_options(world, &o));
        dt_comm_args a = dt_comm_args_init(cases[i].coll);
        a.sendbuf = a.recvbuf = x;
        a.count = cases[i].coll == DT_COMM_REDUCE_SCATTER || cases[i].coll == DT_COMM_ALLGATHER
                      ? cases[i].count / (size_t)n
                      : cases[i].count;
        if (cases[i].coll == DT_COMM_ALLGATHER) /* in place: this rank's block */
            a.sendbuf = x + a.count * (size_t)dt_comm_rank(world);
        a.dtype = DT_COMM_FLOAT32;
        a.algo = cases[i].algo;
        DT_ASSERT_OK(dt_comm_run(world, &a));
        dt_comm_record rec;
        const char *got = last_algo(world, &rec);
        const char *expect = n == 1 ? "local" : cases[i].expect;
        if (strcmp(got, expect) != 0)
            fail_msg("case %zu: %s of %zu floats, algorithm %s, deterministic %d ran %s, "
                     "expected %s",
                     i, dt_comm_coll_name(cases[i].coll), cases[i].count,
                     dt_comm_algo_name(cases[i].algo), cases[i].det, got, expect);
        assert_int_equal(rec.coll, cases[i].coll);
        assert_string_equal(rec.group, "world");
        assert_true(rec.t_end >= rec.t_start && rec.t_start > 0);
    }
    o.deterministic = 0;
    DT_ASSERT_OK(dt_comm_set_options(world, &o));
    free(x);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", &world) != DT_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, dt_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    dt_comm_options o = test_options();
    if (dt_comm_set_options(world, &o) != DT_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_sum_matrix),
        cmocka_unit_test(test_types_and_ops),
        cmocka_unit_test(test_half_types),
        cmocka_unit_test(test_half_rounding_bound),
        cmocka_unit_test(test_small_chunks),
        cmocka_unit_test(test_subgroups),
        cmocka_unit_test(test_grid),
        cmocka_unit_test(test_nonblocking_overlap),
        cmocka_unit_test(test_no_allocation),
        cmocka_unit_test(test_point_to_point),
        cmocka_unit_test(test_split_above_limit),
        cmocka_unit_test(test_refused_arguments),
        cmocka_unit_test(test_algorithm_choice),
        cmocka_unit_test(test_cross_handle_progress),
    };
    int failed = dt_test_mpi_run_cases(argv[0], tests);
    dt_comm_free(world);
    MPI_Finalize();
    return failed != 0;
}
