/* test_comm_det.c — the deterministic flag: with random floats (where summation order
 * changes bits), every element of all-reduce, reduce-scatter and reduce equals the serial
 * left fold over ranks 0, 1, ..., N-1 bit for bit, on every rank, at every count, whatever
 * the algorithm asked for, the chunk size or the bucket boundaries. Without the flag, the
 * result is still the same on every rank (but its order is the algorithm's). float16 and
 * bfloat16 likewise, with a rounding back to 16 bits after every step of the fold. */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_cases.h"

static dt_comm *world;
static const dt_comm_algo algos[] = {DT_COMM_ALGO_AUTO, DT_COMM_ALGO_MPI, DT_COMM_ALGO_RING};

static void set(dt_comm *c, int det, size_t chunk)
{
    dt_comm_options o = dt_comm_options_default();
    o.timeout_s = 60;
    o.deterministic = det;
    o.chunk_bytes = chunk;
    if (o.direct_max_bytes > chunk)
        o.direct_max_bytes = chunk;
    if (dt_comm_set_options(c, &o) != DT_OK)
        fail_msg("set_options: %s", dt_last_error());
}

static void test_rank_order_fold(void **state)
{
    (void)state;
    static const size_t chunks[] = {(size_t)256 << 10, 4096, 100};
    static const size_t counts[] = {0, 1, 7, 10007, 1000003};
    int n = dt_comm_size(world), ok = 1;
    uint64_t seed = 100;
    for (size_t ch = 0; ch < 3; ch++) {
        set(world, 1, chunks[ch]);
        for (size_t ci = 0; ci < 5; ci++) {
            if (counts[ci] > 100000 && ch == 2)
                continue; /* 100-byte chunks of 4 MB: minutes of messages */
            for (int ai = 0; ai < 3; ai++) {
                if (counts[ci] > 100000 && algos[ai] == DT_COMM_ALGO_MPI)
                    continue; /* same algorithm as auto under the flag */
                for (int coll = 0; coll <= DT_COMM_REDUCE; coll++) {
                    if (coll == DT_COMM_ALLGATHER || coll == DT_COMM_BCAST)
                        continue;
                    for (int ip = 0; ip < 2; ip++) {
                        ct_case k = {.coll = (dt_comm_coll)coll,
                                     .algo = algos[ai],
                                     .t = ci % 2 ? DT_COMM_FLOAT32 : DT_COMM_FLOAT64,
                                     .op = ip ? DT_COMM_AVG : DT_COMM_SUM,
                                     .count = counts[ci],
                                     .v = 1,
                                     .in_place = ip,
                                     .root = n - 1,
                                     .kind = CT_RANDOM,
                                     .nonblocking = (int)(ci == 3)};
                        ok &= ct_run_case(world, &k, seed++);
                    }
                }
            }
        }
    }
    set(world, 0, (size_t)256 << 10);
    assert_true(ct_all(ok));
}

/* float16 and bfloat16 with random data: the fold rounds after every addition, so the
 * order shows in the bits; every reduction, every operation, at counts 0, 1, 7, 1000 and
 * 65537, must equal the serial left fold with those roundings (ct_reference) bit for bit. */
static void test_rank_order_fold_half(void **state)
{
    (void)state;
    static const dt_comm_dtype types[] = {DT_COMM_FLOAT16, DT_COMM_BFLOAT16};
    static const size_t chunks[] = {(size_t)256 << 10, 4096, 100};
    static const size_t counts[] = {0, 1, 7, 1000, 65537};
    int n = dt_comm_size(world), ok = 1;
    uint64_t seed = 300;
    for (size_t ch = 0; ch < 3; ch++) {
        set(world, 1, chunks[ch]);
        for (int ti = 0; ti < 2; ti++)
            for (size_t ci = 0; ci < 5; ci++)
                for (int ai = 0; ai < 3; ai++)
                    for (int op = 0; op < DT_COMM_REDOP_COUNT; op++) {
                        if (op >= DT_COMM_MAX && ch > 0)
                            continue; /* order-free: once is enough */
                        for (int coll = 0; coll <= DT_COMM_REDUCE; coll++) {
                            if (coll == DT_COMM_ALLGATHER || coll == DT_COMM_BCAST)
                                continue;
                            ct_case k = {.coll = (dt_comm_coll)coll,
                                         .algo = algos[ai],
                                         .t = types[ti],
                                         .op = (dt_comm_redop)op,
                                         .count = counts[ci],
                                         .v = 1,
                                         .in_place = (int)((ci + (size_t)op) & 1),
                                         .root = (int)(ci % (size_t)n),
                                         .kind = CT_RANDOM,
                                         .nonblocking = (int)(ci == 3)};
                            ok &= ct_run_case(world, &k, seed++);
                        }
                    }
    }
    set(world, 0, (size_t)256 << 10);
    assert_true(ct_all(ok));
}

/* Bucket boundaries do not matter: one all-reduce over the whole vector equals three
 * non-blocking all-reduces over uneven pieces of it, bit for bit. */
static void test_bucket_boundaries(void **state)
{
    (void)state;
    size_t cnt = 300007, cut[4] = {0, 1234, 200001, 300007};
    int me = dt_comm_rank(world);
    float *whole = ct_alloc(cnt * sizeof(float)), *parts = ct_alloc(cnt * sizeof(float));
    ct_fill(DT_COMM_FLOAT32, whole, cnt, me, 77, CT_RANDOM);
    memcpy(parts, whole, cnt * sizeof(float));
    set(world, 1, 8192);
    DT_ASSERT_OK(dt_comm_allreduce(world, whole, whole, cnt, DT_COMM_FLOAT32, DT_COMM_SUM));
    dt_comm_req *q[3];
    for (int b = 0; b < 3; b++)
        DT_ASSERT_OK(dt_comm_iallreduce(world, parts + cut[b], parts + cut[b], cut[b + 1] - cut[b],
                                        DT_COMM_FLOAT32, DT_COMM_SUM, &q[b]));
    DT_ASSERT_OK(dt_comm_waitall(q, 3));
    set(world, 0, (size_t)256 << 10);
    int ok = ct_check("whole vs buckets", DT_COMM_FLOAT32, parts, whole, cnt);
    free(whole);
    free(parts);
    assert_true(ct_all(ok));
}

/* Without the flag every algorithm still gives every rank the same bits. */
static void test_same_on_every_rank(void **state)
{
    (void)state;
    size_t cnt = 100003;
    int me = dt_comm_rank(world), n = dt_comm_size(world), ok = 1;
    float *x = ct_alloc(cnt * sizeof(float));
    float *all = ct_alloc((size_t)n * cnt * sizeof(float));
    for (int ai = 0; ai < 3; ai++) {
        ct_fill(DT_COMM_FLOAT32, x, cnt, me, 55, CT_RANDOM);
        dt_comm_args a = dt_comm_args_init(DT_COMM_ALLREDUCE);
        a.sendbuf = a.recvbuf = x;
        a.count = cnt;
        a.dtype = DT_COMM_FLOAT32;
        a.op = DT_COMM_SUM;
        a.algo = algos[ai];
        DT_ASSERT_OK(dt_comm_run(world, &a));
        DT_ASSERT_OK(dt_comm_allgather(world, x, all, cnt, DT_COMM_FLOAT32));
        for (int p = 0; p < n; p++) {
            char name[64];
            snprintf(name, sizeof name, "%s result of rank %d vs rank 0",
                     dt_comm_algo_name(algos[ai]), p);
            ok &= ct_check(name, DT_COMM_FLOAT32, all + (size_t)p * cnt, all, cnt);
        }
    }
    free(x);
    free(all);
    assert_true(ct_all(ok));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", &world) != DT_OK) {
        fprintf(stderr, "%s\n", dt_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rank_order_fold),
        cmocka_unit_test(test_rank_order_fold_half),
        cmocka_unit_test(test_bucket_boundaries),
        cmocka_unit_test(test_same_on_every_rank),
    };
    int failed = dt_test_mpi_run_cases(argv[0], tests);
    dt_comm_free(world);
    MPI_Finalize();
    return failed != 0;
}
