/* test_comm_self.c — the single-process world without MPI: dt_comm_create_self works
 * before (and without) MPI_Init, every collective is a local copy (AVG divides by 1),
 * non-blocking requests complete at once, the grid is 1 x 1 x 1, point to point is refused,
 * and the request pool's limit is a clear error. Runs as a plain unit test (no mpirun); any
 * MPI call here would fail, since MPI is never initialised. */
#include "dt_test.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dtrain/comm_mpi.h"

static void test_collectives_are_copies(void **state)
{
    (void)state;
    dt_comm *c = NULL;
    DT_ASSERT_OK(dt_comm_create_self(&c));
    assert_int_equal(dt_comm_rank(c), 0);
    assert_int_equal(dt_comm_size(c), 1);
    assert_string_equal(dt_comm_name(c), "world");
    assert_true(dt_comm_mpi_comm(c) == MPI_COMM_NULL);
    float a[5] = {1.5f, -2, 3, 4, 5}, b[5] = {0}, ref[5];
    memcpy(ref, a, sizeof a);
    for (int op = 0; op < DT_COMM_REDOP_COUNT; op++) {
        memset(b, 0, sizeof b);
        DT_ASSERT_OK(dt_comm_allreduce(c, a, b, 5, DT_COMM_FLOAT32, (dt_comm_redop)op));
        DT_ASSERT_CLOSE_FF("allreduce", b, ref, 5, 0, 0);
        DT_ASSERT_OK(dt_comm_allreduce(c, a, a, 5, DT_COMM_FLOAT32, (dt_comm_redop)op));
        DT_ASSERT_CLOSE_FF("allreduce in place", a, ref, 5, 0, 0);
    }
    memset(b, 0, sizeof b);
    DT_ASSERT_OK(dt_comm_reduce_scatter(c, a, b, 5, DT_COMM_FLOAT32, DT_COMM_AVG));
    DT_ASSERT_CLOSE_FF("reduce_scatter", b, ref, 5, 0, 0);
    memset(b, 0, sizeof b);
    DT_ASSERT_OK(dt_comm_allgather(c, a, b, 5, DT_COMM_FLOAT32));
    DT_ASSERT_CLOSE_FF("allgather", b, ref, 5, 0, 0);
    size_t counts[1] = {3}, displs[1] = {2};
    memset(b, 0, sizeof b);
    DT_ASSERT_OK(dt_comm_allgatherv(c, a, b, counts, displs, DT_COMM_FLOAT32));
    DT_ASSERT_CLOSE_FF("allgatherv", b + 2, ref, 3, 0, 0);
    memset(b, 0, sizeof b);
    DT_ASSERT_OK(dt_comm_reduce(c, a, b, 5, DT_COMM_FLOAT32, DT_COMM_MAX, 0));
    DT_ASSERT_CLOSE_FF("reduce", b, ref, 5, 0, 0);
    DT_ASSERT_OK(dt_comm_bcast(c, a, 5, DT_COMM_FLOAT32, 0));
    DT_ASSERT_OK(dt_comm_barrier(c));
    DT_ASSERT_CLOSE_FF("untouched", a, ref, 5, 0, 0);
    DT_ASSERT_STATUS(dt_comm_send(c, a, 5, DT_COMM_FLOAT32, 0, 1), DT_ERR_UNSUPPORTED);
    DT_ASSERT_ERROR_HAS("single-process");
    DT_ASSERT_STATUS(dt_comm_bcast(c, a, 5, DT_COMM_FLOAT32, 1), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("root 1 outside the group of 1 ranks");

    dt_comm_stats s;
    dt_comm_get_stats(c, &s);
    assert_int_equal(s.collectives,
                     14); /* 8 all-reduces and 6 others; refused calls do not count */
    assert_int_equal(s.allocations, 0);
    dt_comm_record rec[DT_COMM_HISTORY];
    size_t k = dt_comm_history(c, rec, DT_COMM_HISTORY);
    assert_int_equal(k, 14);
    assert_string_equal(rec[k - 1].algo, "local");
    assert_int_equal(rec[k - 1].coll, DT_COMM_BARRIER);
    assert_int_equal(rec[0].seq, 0);
    assert_true(rec[0].t_end >= rec[0].t_start);
    assert_string_equal(dt_comm_last_report(c), "");
    dt_comm_free(c);
    dt_comm_free(NULL);
}

static void test_nonblocking_and_pool(void **state)
{
    (void)state;
    dt_comm *c = NULL;
    DT_ASSERT_OK(dt_comm_create_self(&c));
    int32_t v[DT_COMM_MAX_PENDING + 1];
    dt_comm_req *q[DT_COMM_MAX_PENDING + 1];
    for (int i = 0; i < DT_COMM_MAX_PENDING; i++) {
        v[i] = i;
        DT_ASSERT_OK(dt_comm_iallreduce(c, &v[i], &v[i], 1, DT_COMM_INT32, DT_COMM_SUM, &q[i]));
    }
    DT_ASSERT_STATUS(dt_comm_ibarrier(c, &q[DT_COMM_MAX_PENDING]), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("64 requests pending on group 'world'");
    assert_null(q[DT_COMM_MAX_PENDING]);
    int done = 0;
    DT_ASSERT_OK(dt_comm_test(&q[0], &done));
    assert_true(done);
    assert_null(q[0]);
    DT_ASSERT_OK(dt_comm_progress(c));
    DT_ASSERT_OK(dt_comm_waitall(q + 1, DT_COMM_MAX_PENDING - 1));
    for (int i = 0; i < DT_COMM_MAX_PENDING; i++)
        assert_int_equal(v[i], i);
    DT_ASSERT_OK(dt_comm_ibarrier(c, &q[0])); /* the pool is free again */
    DT_ASSERT_OK(dt_comm_wait(&q[0]));
    DT_ASSERT_OK(dt_comm_wait(&q[0])); /* NULL: nothing to do */
    dt_comm_free(c);
}

static void test_split_grid_options(void **state)
{
    (void)state;
    dt_comm *c = NULL, *d = NULL, *e = NULL;
    DT_ASSERT_OK(dt_comm_create_self(&c));
    DT_ASSERT_OK(dt_comm_split(c, 3, 0, "dp", &d));
    assert_non_null(d);
    assert_string_equal(dt_comm_name(d), "dp");
    DT_ASSERT_OK(dt_comm_split(c, -1, 0, "none", &e));
    assert_null(e);
    DT_ASSERT_OK(dt_comm_dup(c, "copy", &e));
    double x = 2.5;
    DT_ASSERT_OK(dt_comm_allreduce(d, &x, &x, 1, DT_COMM_FLOAT64, DT_COMM_SUM));
    /* the history is shared with the parent */
    dt_comm_record rec[DT_COMM_HISTORY];
    assert_int_equal(dt_comm_history(c, rec, DT_COMM_HISTORY), 1);
    assert_string_equal(rec[0].group, "dp");
    dt_comm_free(e);
    dt_comm_free(d);

    dt_grid *g = NULL;
    DT_ASSERT_OK(dt_grid_create(c, 0, 0, 0, &g));
    for (int a = 0; a < DT_GRID_AXIS_COUNT; a++) {
        assert_int_equal(dt_grid_size(g, (dt_grid_axis)a), 1);
        assert_int_equal(dt_grid_rank(g, (dt_grid_axis)a), 0);
        assert_int_equal(dt_comm_size(dt_grid_comm(g, (dt_grid_axis)a)), 1);
    }
    assert_ptr_equal(dt_grid_world(g), c);
    assert_int_equal(dt_grid_world_rank(g, 0, 0, 0), 0);
    dt_grid_free(g);
    DT_ASSERT_STATUS(dt_grid_create(c, 2, 1, 1, &g), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("dp 2 x tp 1 x pp 1 = 2 ranks, but the world has 1");
    dt_grid_free(NULL);

    dt_comm_options o = dt_comm_options_default();
    assert_int_equal(o.algorithm, DT_COMM_ALGO_AUTO);
    assert_true(o.timeout_s == 300.0);
    assert_int_equal(o.deterministic, 0);
    assert_int_equal(o.check, 0);
    o.chunk_bytes = 8192;
    o.direct_max_bytes = 4096;
    DT_ASSERT_OK(dt_comm_set_options(c, &o));
    dt_comm_options got;
    dt_comm_get_options(c, &got);
    assert_int_equal(got.chunk_bytes, 8192);
    o.algorithm = (dt_comm_algo)5;
    DT_ASSERT_STATUS(dt_comm_set_options(c, &o), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("options.algorithm 5");
    dt_comm_free(c);
}

static void test_names_and_no_mpi(void **state)
{
    (void)state;
    assert_string_equal(dt_comm_coll_name(DT_COMM_REDUCE_SCATTER), "reduce_scatter");
    assert_string_equal(dt_comm_dtype_name(DT_COMM_UINT8), "uint8");
    assert_string_equal(dt_comm_dtype_name(DT_COMM_FLOAT16), "float16");
    assert_string_equal(dt_comm_dtype_name(DT_COMM_BFLOAT16), "bfloat16");
    assert_int_equal(dt_comm_dtype_size(DT_COMM_FLOAT16), 2);
    assert_int_equal(dt_comm_dtype_size(DT_COMM_BFLOAT16), 2);
    assert_string_equal(dt_comm_dtype_name(DT_COMM_DTYPE_COUNT), "?");
    assert_string_equal(dt_comm_redop_name(DT_COMM_AVG), "avg");
    assert_string_equal(dt_comm_algo_name(DT_COMM_ALGO_MPI), "mpi");
    assert_string_equal(dt_comm_coll_name((dt_comm_coll)99), "?");
    assert_int_equal(dt_comm_dtype_size(DT_COMM_FLOAT64), 8);
    assert_int_equal(dt_comm_dtype_size((dt_comm_dtype)-1), 0);
    assert_string_equal(dt_grid_axis_name(DT_GRID_PP), "pp");
    dt_comm *c = NULL;
    DT_ASSERT_STATUS(dt_comm_create_mpi(MPI_COMM_NULL, "world", &c), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("MPI is not initialised");
    assert_null(c);
    int init = 1;
    MPI_Initialized(&init);
    assert_false(init);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives_are_copies),
        cmocka_unit_test(test_nonblocking_and_pool),
        cmocka_unit_test(test_split_grid_options),
        cmocka_unit_test(test_names_and_no_mpi),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
