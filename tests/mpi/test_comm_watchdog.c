/* test_comm_watchdog.c — a hang becomes a report: when one rank never calls a collective,
 * every rank that did returns DT_ERR_TIMEOUT within the (short, test-only) deadline plus
 * the grace period, naming the operation, group, sequence number, count and the missing
 * rank; a rank waiting in a different collective is named with what it waits in (the
 * oldest of its waits); a receive whose sender never sends names the peer; a rank that
 * never arrives where a group is created (MPI_Comm_split, which cannot time out) is named
 * the same way. Each case uses a fresh handle, since a timed-out handle is unusable. Run
 * with 2 or more ranks. */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_test_util.h"

#define TIMEOUT_S 0.5

static int rank, size;
enum { H_MPI, H_RING, H_ELSE, H_P2P, H_SPLIT, NH };
static dt_comm *handles[NH];

/* Every handle is made before any case runs: Open MPI's communicator creation (its
 * context-id agreement) hangs once a rank holds a collective that can never complete, and
 * a timed-out handle holds exactly that. The job would end there; the test goes on. */
static dt_comm *fresh(const char *name, dt_comm_algo algo)
{
    dt_comm *c = NULL;
    if (dt_comm_create_mpi(MPI_COMM_WORLD, name, &c) != DT_OK)
        fail_msg("create: %s", dt_last_error());
    dt_comm_options o = dt_comm_options_default();
    o.timeout_s = TIMEOUT_S;
    o.algorithm = algo;
    if (dt_comm_set_options(c, &o) != DT_OK)
        fail_msg("options: %s", dt_last_error());
    return c;
}

/* The missing rank does nothing — no MPI call at all — for longer than the deadline and
 * the grace period together. */
static void stay_away(void)
{
    struct timespec ts = {1, 600000000};
    nanosleep(&ts, NULL);
}

static int has(const char *text, const char *needle)
{
    if (strstr(text, needle) != NULL)
        return 1;
    fprintf(stderr, "FAIL rank %d: \"%s\" lacks \"%s\"\n", rank, text, needle);
    return 0;
}

static void never_arrives(dt_comm *c)
{
    int late = size - 1, ok = 1;
    char expect[128];
    const char *name = dt_comm_name(c);
    float x[1000];
    memset(x, 0, sizeof x);
    /* one completed collective first, so the hang is #1 and the history has two entries */
    DT_ASSERT_OK(dt_comm_allreduce(c, x, x, 10, DT_COMM_FLOAT32, DT_COMM_SUM));
    if (rank == late) {
        stay_away();
    } else {
        double t0 = dt_now();
        dt_status st = dt_comm_allreduce(c, x, x, 1000, DT_COMM_FLOAT32, DT_COMM_SUM);
        double took = dt_now() - t0;
        DT_ASSERT_STATUS(st, DT_ERR_TIMEOUT);
        const char *msg = dt_last_error();
        snprintf(expect, sizeof expect, "never arrived: rank %d (world %d)", late, late);
        ok &= has(msg, expect);
        snprintf(expect, sizeof expect,
                 "comm: allreduce #1 (1000 float32) on group '%s' (%d ranks)", name, size);
        ok &= has(msg, expect);
        if (size > 2) {
            snprintf(expect, sizeof expect, "arrived too: %d", rank == 0 ? 1 : 0);
            ok &= has(msg, expect);
        }
        const char *rep = dt_comm_last_report(c);
        if (rank == 0) /* what a user sees, in the test log */
            printf("rank 0's watchdog report:\n%s", rep);
        ok &= has(rep, expect);
        ok &= has(rep, "last 2 operations of rank");
        ok &= has(rep, "#0 allreduce on");
        ok &= has(rep, "not complete after");
        /* the deadline, the grace period, and a margin for 4 ranks on 2 busy cores */
        if (took < TIMEOUT_S || took > TIMEOUT_S + 0.5 + 3.0) {
            fprintf(stderr, "FAIL rank %d: timed out after %.2f s\n", rank, took);
            ok = 0;
        }
        /* the handle is unusable from now on, with the same message */
        DT_ASSERT_STATUS(dt_comm_barrier(c), DT_ERR_TIMEOUT);
        ok &= has(dt_last_error(), expect);
    }
    assert_true(ct_all(ok));
}

static void test_missing_rank_mpi(void **state)
{
    (void)state;
    never_arrives(handles[H_MPI]);
}

static void test_missing_rank_ring(void **state)
{
    (void)state;
    never_arrives(handles[H_RING]);
}

/* The last rank waits in two broadcasts whose root never comes while the others wait in a
 * ring all-reduce: each side names what the other is doing, the last rank by the oldest of
 * its waits. */
static void test_rank_elsewhere(void **state)
{
    (void)state;
    int late = size - 1, ok = 1;
    dt_comm *c = handles[H_ELSE];
    float x[64], y[32];
    memset(x, 0, sizeof x);
    memset(y, 0, sizeof y);
    dt_status st;
    char expect[160];
    if (rank == late) {
        /* Later than the others, so that they time out first and this rank answers them
         * (its answer names its oldest wait; a question of its own would name the one it
         * timed out in). */
        struct timespec ts = {0, 250000000};
        nanosleep(&ts, NULL);
        dt_comm_req *q[2] = {NULL, NULL};
        DT_ASSERT_OK(dt_comm_ibcast(c, x, 64, DT_COMM_FLOAT32, 0, &q[0]));
        DT_ASSERT_OK(dt_comm_ibcast(c, y, 32, DT_COMM_FLOAT32, 0, &q[1]));
        st = dt_comm_wait(&q[0]);
        DT_ASSERT_STATUS(st, DT_ERR_TIMEOUT);
        ok &= has(dt_last_error(), "bcast #0");
        DT_ASSERT_STATUS(dt_comm_wait(&q[1]), DT_ERR_TIMEOUT);
        snprintf(expect, sizeof expect, "rank 0 (world 0) waits in allreduce #0 (64 float32)");
        ok &= has(dt_last_error(), expect);
    } else {
        st = dt_comm_allreduce(c, x, x, 64, DT_COMM_FLOAT32, DT_COMM_SUM);
        DT_ASSERT_STATUS(st, DT_ERR_TIMEOUT);
        snprintf(expect, sizeof expect, "rank %d (world %d) waits in bcast #0 (64 float32)", late,
                 late);
        ok &= has(dt_last_error(), expect);
        ok &= has(dt_last_error(), "never arrived: none");
    }
    assert_true(ct_all(ok));
}

/* Point to point: a receive from a rank that never sends names that rank. */
static void test_receive_never_sent(void **state)
{
    (void)state;
    int ok = 1;
    dt_comm *c = handles[H_P2P];
    double v = 0;
    if (rank == 0) {
        DT_ASSERT_STATUS(dt_comm_recv(c, &v, 1, DT_COMM_FLOAT64, 1, 5), DT_ERR_TIMEOUT);
        ok &= has(dt_last_error(), "recv of 1 float64 from rank 1 (world 1), tag 5");
        ok &= has(dt_last_error(), "never sent it");
    } else if (rank == 1) {
        stay_away();
    }
    assert_true(ct_all(ok));
}

/* Creating a group: the late rank is still starting up (loading data, say) while the
 * others split the world. MPI_Comm_split alone would wait forever; the watched arrival
 * before it names the missing rank. */
static void test_split_never_arrives(void **state)
{
    (void)state;
    int late = size - 1, ok = 1;
    dt_comm *c = handles[H_SPLIT];
    if (rank == late) {
        stay_away();
    } else {
        dt_comm *sub = NULL;
        double t0 = dt_now();
        DT_ASSERT_STATUS(dt_comm_split(c, 0, rank, "dp", &sub), DT_ERR_TIMEOUT);
        double took = dt_now() - t0;
        assert_null(sub);
        char expect[96];
        snprintf(expect, sizeof expect, "never arrived: rank %d (world %d)", late, late);
        ok &= has(dt_last_error(), expect);
        ok &= has(dt_last_error(), "comm: creating group 'dp' from 'wd-split': ");
        if (took < TIMEOUT_S || took > TIMEOUT_S + 0.5 + 3.0) {
            fprintf(stderr, "FAIL rank %d: timed out after %.2f s\n", rank, took);
            ok = 0;
        }
    }
    assert_true(ct_all(ok));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        fprintf(stderr, "test_comm_watchdog needs 2 or more ranks\n");
        MPI_Finalize();
        return 1;
    }
    handles[H_MPI] = fresh("wd-mpi", DT_COMM_ALGO_MPI);
    handles[H_RING] = fresh("wd-ring", DT_COMM_ALGO_RING);
    handles[H_ELSE] = fresh("wd-else", DT_COMM_ALGO_RING);
    handles[H_P2P] = fresh("wd-p2p", DT_COMM_ALGO_AUTO);
    handles[H_SPLIT] = fresh("wd-split", DT_COMM_ALGO_AUTO);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_rank_mpi),
        cmocka_unit_test(test_missing_rank_ring),
        cmocka_unit_test(test_rank_elsewhere),
        cmocka_unit_test(test_receive_never_sent),
        /* last: no communicator can be made after it (see fresh) */
        cmocka_unit_test(test_split_never_arrives),
    };
    int failed = dt_test_mpi_run_cases(argv[0], tests);
    for (int h = 0; h < NH; h++)
        dt_comm_free(handles[h]);
    MPI_Finalize();
    return failed != 0;
}
