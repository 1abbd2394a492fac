/* test_comm_check.c — --comm-check (options.check): calls that agree run normally; a rank
 * calling a different operation, count, type, root, algorithm or block layout (the same
 * total split differently) makes every rank fail with DT_ERR_MISMATCH and the same message
 * naming both sides, before any data moves; the handle stays usable afterwards. */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_cases.h"

static dt_comm *world;
static int rank, size;

static int has(const char *text, const char *needle)
{
    if (strstr(text, needle) != NULL)
        return 1;
    fprintf(stderr, "FAIL rank %d: \"%s\" lacks \"%s\"\n", rank, text, needle);
    return 0;
}

/* Matching calls pass the check, for every kind and algorithm, blocking or not. */
static void test_agreeing_calls_run(void **state)
{
    (void)state;
    static const dt_comm_algo algos[] = {DT_COMM_ALGO_AUTO, DT_COMM_ALGO_MPI, DT_COMM_ALGO_RING};
    int ok = 1;
    uint64_t seed = 1;
    for (int ai = 0; ai < 3; ai++)
        for (int coll = 0; coll <= DT_COMM_REDUCE; coll++) {
            ct_case k = {.coll = (dt_comm_coll)coll,
                         .algo = algos[ai],
                         .t = DT_COMM_FLOAT32,
                         .op = DT_COMM_SUM,
                         .count = 1003,
                         .v = 1,
                         .root = size - 1,
                         .nonblocking = ai == 1};
            ok &= ct_run_case(world, &k, seed++);
        }
    DT_ASSERT_OK(dt_comm_barrier(world));
    assert_true(ct_all(ok));
}

/* Runs a call that differs on rank `odd`; every rank must get the same mismatch. */
static int expect_mismatch(dt_status st, const char *side0, const char *side_odd, int odd)
{
    int ok = 1;
    char expect[200];
    if (st != DT_ERR_MISMATCH) {
        fprintf(stderr, "FAIL rank %d: got %s (%s), expected a mismatch\n", rank, dt_status_str(st),
                dt_last_error());
        return 0;
    }
    const char *msg = dt_last_error();
    ok &= has(msg, "comm: check: ranks disagree");
    /* rank 0's side before "but", the odd rank's after it */
    snprintf(expect, sizeof expect, "but rank %d (world %d) calls ", odd, odd);
    const char *but = strstr(msg, expect);
    if (!has(msg, expect) || !has(msg, "rank 0 (world 0) calls "))
        return 0;
    char before[512];
    snprintf(before, sizeof before, "%.*s", (int)(but - msg), msg);
    ok &= has(before, side0);
    ok &= has(but, side_odd);
    ok &= has(dt_comm_last_report(world), "last ");
    return ok;
}

static void test_different_operation(void **state)
{
    (void)state;
    int odd = size - 1, ok = 1;
    float x[7] = {0};
    dt_status st;
    char seq[64];
    dt_comm_stats s;
    dt_comm_get_stats(world, &s);
    snprintf(seq, sizeof seq, "#%llu", (unsigned long long)s.collectives);
    if (rank == odd)
        st = dt_comm_bcast(world, x, 7, DT_COMM_FLOAT32, 0);
    else
        st = dt_comm_allreduce(world, x, x, 7, DT_COMM_FLOAT32, DT_COMM_SUM);
    char s0[128], s1[128];
    snprintf(s0, sizeof s0, "allreduce %s count 7 float32 sum", seq);
    snprintf(s1, sizeof s1, "bcast %s count 7 float32 root 0", seq);
    ok &= expect_mismatch(st, s0, s1, odd);
    /* the handle still works */
    int32_t one = 1, sum = 0;
    DT_ASSERT_OK(dt_comm_allreduce(world, &one, &sum, 1, DT_COMM_INT32, DT_COMM_SUM));
    assert_int_equal(sum, size);
    assert_true(ct_all(ok));
}

static void test_different_count(void **state)
{
    (void)state;
    int odd = size > 1 ? 1 : 0, ok = 1;
    double x[9] = {0};
    dt_comm_req *q = NULL;
    DT_ASSERT_OK(
        dt_comm_iallreduce(world, x, x, rank == odd ? 8 : 7, DT_COMM_FLOAT64, DT_COMM_MAX, &q));
    dt_status st = dt_comm_wait(&q);
    assert_null(q);
    ok &= expect_mismatch(st, "count 7 float64 max", "count 8 float64 max", odd);
    assert_true(ct_all(ok));
}

static void test_different_type_and_root(void **state)
{
    (void)state;
    int odd = size - 1, ok = 1;
    int32_t x[16] = {0};
    dt_status st =
        dt_comm_allgather(world, x, x + 16 - 1, 1, rank == odd ? DT_COMM_INT32 : DT_COMM_FLOAT32);
    ok &= expect_mismatch(st, "count", "int32", odd);
    st = dt_comm_bcast(world, x, 4, DT_COMM_INT32, rank == odd ? odd : 0);
    char s1[64];
    snprintf(s1, sizeof s1, "count 4 int32 root %d", odd);
    ok &= expect_mismatch(st, "count 4 int32 root 0", s1, odd);
    assert_true(ct_all(ok));
}

/* The same call through different algorithms (one rank's ring against the others' MPI)
 * would pair messages that do not belong together: refused, naming both. */
static void test_different_algorithm(void **state)
{
    (void)state;
    int odd = size - 1, ok = 1;
    float x[1000] = {0};
    dt_comm_args a = dt_comm_args_init(DT_COMM_ALLREDUCE);
    a.sendbuf = x;
    a.recvbuf = x;
    a.count = 1000;
    a.dtype = DT_COMM_FLOAT32;
    a.op = DT_COMM_SUM;
    a.algo = rank == odd ? DT_COMM_ALGO_RING : DT_COMM_ALGO_MPI;
    dt_status st = dt_comm_run(world, &a);
    ok &= expect_mismatch(st, "count 1000 float32 sum (algorithm mpi)",
                          "count 1000 float32 sum (algorithm ring)", odd);
    assert_true(ct_all(ok));
}

/* Varying blocks with the same total but a different split on one rank: the counts alone
 * agree, the layout does not. Reduce-scatter and all-gather both. */
static void test_different_block_layout(void **state)
{
    (void)state;
    int odd = size - 1, ok = 1;
    float x[64] = {0}, y[64] = {0};
    size_t counts[8], displs[8];
    DT_ASSERT(size <= 8);
    for (int b = 0; b < size; b++) {
        counts[b] = 4;
        displs[b] = (size_t)b * 4;
    }
    if (rank == odd) { /* one element moves from the first block to the last */
        counts[0] = 3;
        counts[size - 1] = 5;
        for (int b = 1; b < size; b++)
            displs[b] = displs[b - 1] + counts[b - 1];
    }
    dt_status st = dt_comm_reduce_scatterv(world, x, y, counts, DT_COMM_FLOAT32, DT_COMM_SUM);
    ok &= expect_mismatch(st, "reduce_scatter", "different block layout", odd);
    st = dt_comm_allgatherv(world, x + displs[rank], y, counts, displs, DT_COMM_FLOAT32);
    ok &= expect_mismatch(st, "allgather", "different block layout", odd);
    assert_true(ct_all(ok));
}

/* A report made on a sub-group is what the world's handle returns too (the CLI holds the
 * world's handle when it prints the report). */
static void test_report_reaches_the_world(void **state)
{
    (void)state;
    dt_comm *sub = NULL;
    DT_ASSERT_OK(dt_comm_split(world, 0, -rank, "sub", &sub)); /* reversed order */
    int8_t x[4] = {0};
    dt_status st = dt_comm_bcast(sub, x, rank == 0 ? 3 : 4, DT_COMM_UINT8, 0);
    int ok = st == DT_ERR_MISMATCH;
    ok &= has(dt_comm_last_report(world), "on group 'sub'");
    ok &= has(dt_comm_last_report(world), "last ");
    ok &= has(dt_comm_last_report(sub), "on group 'sub'");
    dt_comm_free(sub);
    assert_true(ct_all(ok));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        fprintf(stderr, "test_comm_check needs 2 or more ranks\n");
        MPI_Finalize();
        return 1;
    }
    dt_comm_options o = dt_comm_options_default();
    o.check = 1;
    o.timeout_s = 60;
    if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", &world) != DT_OK ||
        dt_comm_set_options(world, &o) != DT_OK) {
        fprintf(stderr, "%s\n", dt_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agreeing_calls_run),
        cmocka_unit_test(test_different_operation),
        cmocka_unit_test(test_different_count),
        cmocka_unit_test(test_different_type_and_root),
        cmocka_unit_test(test_different_algorithm),
        cmocka_unit_test(test_different_block_layout),
        cmocka_unit_test(test_report_reaches_the_world),
    };
    int failed = dt_test_mpi_run_cases(argv[0], tests);
    dt_comm_free(world);
    MPI_Finalize();
    return failed != 0;
}
