/* test_mpi_harness.c — the MPI test harness (dt_test_mpi.h) itself. Run plainly, its cases
 * pass. With DT_TEST_PLANT set (harness_fails_fast.sh does it), one case goes wrong on rank 1
 * while rank 0 waits for it inside a collective of the library (whose own watchdog waits
 * 300 s): "fail" fails a cmocka assertion there, "leave" leaves the case as a refusal raised
 * on one rank only would. Either way the job must end, non-zero, within seconds. */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/comm.h"

static dt_comm *world;
static int rank, size;

static void test_collective_completes(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, (float)rank};
    DT_ASSERT_OK(dt_comm_allreduce(world, x, x, 4, DT_COMM_FLOAT32, DT_COMM_SUM));
    assert_true(x[0] == (float)size);
    assert_true(x[3] == (float)(size * (size - 1) / 2));
    dt_test_mpi_agree("the collective's end", DT_TEST_MPI_REFUSAL_S);
}

static void test_planted(void **state)
{
    (void)state;
    const char *plant = getenv("DT_TEST_PLANT");
    if (plant == NULL || plant[0] == '\0' || size < 2)
        skip();
    float x[4] = {0};
    if (rank == 1) {
        if (strcmp(plant, "fail") == 0) {
            fprintf(stderr, "rank 1: failing on purpose (DT_TEST_PLANT=fail)\n");
            assert_int_equal(1, 2);
        }
        return; /* "leave": rank 0 waits in the all-reduce below for a rank that left */
    }
    DT_ASSERT_OK(dt_comm_allreduce(world, x, x, 4, DT_COMM_FLOAT32, DT_COMM_SUM));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collective_completes),
        cmocka_unit_test(test_planted), /* last: nothing after it can meet rank 0's wait */
    };
    return dt_test_mpi_main(&argc, &argv, tests, &world, &rank, &size);
}
