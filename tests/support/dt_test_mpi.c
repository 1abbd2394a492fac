/* dt_test_mpi.c — the MPI test programs' harness (dt_test_mpi.h): cases one at a time, a
 * failure ends the job, the ranks meet after each case against a deadline. */
#include "dt_test_mpi.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtrain/blas.h"
#include "dtrain/comm_mpi.h"

enum { MAX_RANKS = 64, TAG_SPAN = 32000 /* MPI guarantees tags up to 32767 */ };

static MPI_Comm meet = MPI_COMM_NULL; /* the harness's own: a test's messages never match it */
static int meetings;                  /* the tag of the next meeting, the same on every rank */
static int me, ranks;

static void end_job(void)
{
    fflush(stdout);
    fflush(stderr);
    /* MPICH's Hydra can tear the job down before its proxy forwards the lines just written
     * (1 run in 4 of harness_fails_fast lost them): a fifth of a second first, as the CLI's
     * dt_cli_world_fail gives. */
    const struct timespec grace = {0, 200000000};
    nanosleep(&grace, NULL);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

void dt_test_mpi_agree(const char *what, double seconds)
{
    if (meet == MPI_COMM_NULL) {
        fprintf(stderr, "dt_test_mpi_agree(\"%s\") outside the harness's cases\n", what);
        end_job();
    }
    const int tag = meetings++ % TAG_SPAN;
    if (ranks == 1)
        return;
    /* Each rank tells every other one it has come, and polls for their word: a rank that
     * never comes cannot hold this one past the deadline. */
    int token = me, in[MAX_RANKS], came[MAX_RANKS] = {0};
    MPI_Request recv[MAX_RANKS], send[MAX_RANKS];
    for (int r = 0; r < ranks; r++) {
        recv[r] = send[r] = MPI_REQUEST_NULL;
        if (r != me)
            MPI_Irecv(&in[r], 1, MPI_INT, r, tag, meet, &recv[r]);
    }
    for (int r = 0; r < ranks; r++)
        if (r != me)
            MPI_Isend(&token, 1, MPI_INT, r, tag, meet, &send[r]);
    const double t0 = MPI_Wtime();
    for (;;) {
        int missing = 0;
        for (int r = 0; r < ranks; r++) {
            if (r == me || came[r])
                continue;
            MPI_Test(&recv[r], &came[r], MPI_STATUS_IGNORE);
            missing += !came[r];
        }
        if (missing == 0)
            break;
        if (MPI_Wtime() - t0 > seconds) {
            char who[4 * MAX_RANKS] = "";
            for (int r = 0; r < ranks; r++)
                if (r != me && !came[r])
                    snprintf(who + strlen(who), sizeof who - strlen(who), " %d", r);
            fprintf(stderr,
                    "rank %d: at %s, rank(s)%s never came within %.0f s: they are still inside "
                    "an earlier call (a collective this rank has left, a refusal raised on some "
                    "ranks only?); ending the job\n",
                    me, what, who, seconds);
            end_job();
        }
        const struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    MPI_Waitall(ranks, send, MPI_STATUSES_IGNORE);
}

/* DT_TEST_MPI_SKEW_S: how long a rank that has finished a case waits for the others. */
static double skew_seconds(void)
{
    const char *s = getenv("DT_TEST_MPI_SKEW_S");
    if (s == NULL || s[0] == '\0')
        return 60.0;
    char *end = NULL;
    const double v = strtod(s, &end);
    if (*end != '\0' || !(v > 0)) {
        fprintf(stderr, "DT_TEST_MPI_SKEW_S=%s: expected a number of seconds > 0\n", s);
        end_job();
    }
    return v;
}

int dt_test_mpi_cases(const char *name, const struct CMUnitTest *tests, size_t n)
{
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks > MAX_RANKS) {
        fprintf(stderr, "%s: the test harness takes up to %d ranks, not %d\n", name, MAX_RANKS,
                ranks);
        end_job();
    }
    const double skew = skew_seconds();
    MPI_Comm_dup(MPI_COMM_WORLD, &meet);
    for (size_t i = 0; i < n; i++) {
        /* A group of one case: cmocka returns right after a failed case, before this rank
         * starts the next one, whose collectives would meet the others' in the wrong place. */
        if (_cmocka_run_group_tests(tests[i].name, &tests[i], 1, NULL, NULL) != 0) {
            fprintf(stderr,
                    "rank %d: %s: case %s failed; ending the job so that no rank waits for "
                    "this one\n",
                    me, name, tests[i].name);
            end_job();
        }
        char what[256];
        snprintf(what, sizeof what, "the end of case %s", tests[i].name);
        dt_test_mpi_agree(what, skew);
    }
    MPI_Comm_free(&meet);
    meet = MPI_COMM_NULL;
    return 0;
}

int dt_test_mpi_run(int *argc, char ***argv, const struct CMUnitTest *tests, size_t n,
                    dt_comm **world, int *rank, int *size)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    dt_blas_set_threads(1);
    if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", world) != DT_OK) {
        fprintf(stderr, "rank %d: comm: %s\n", *rank, dt_last_error());
        end_job();
    }
    const int failed = dt_test_mpi_cases((*argv)[0], tests, n);
    dt_comm_free(*world);
    *world = NULL;
    MPI_Finalize();
    return failed ? 1 : 0;
}
