/* dt_test_mpi.h — the MPI test programs' harness: MPI started, one BLAS thread per rank, the
 * world wrapped as a dt_comm, and the cmocka cases run one at a time on every rank, so that a
 * mistake ends the job within seconds instead of leaving ranks waiting for ctest's timeout.
 *
 * Why: a rank that fails a cmocka assertion leaves its case at once (a longjmp), while the
 * other ranks may be waiting for it inside a collective that it will never join; and a
 * refusal that one rank raises and the others do not (a library bug) leaves them waiting the
 * same way. So:
 *   - a rank whose case failed prints which one and ends the whole job (MPI_Abort: about 2 s,
 *     docs/NOTES.md), with a non-zero exit;
 *   - after each case the ranks meet (point-to-point messages on a communicator of the
 *     harness's own, polled against a deadline, so that nothing here can hang): a rank that
 *     has waited DT_TEST_MPI_SKEW_S seconds (default 60) for the others names the ranks that
 *     never came and ends the job;
 *   - dt_test_mpi_agree is the same meeting, with a short deadline, for a test to place after
 *     a call that must end the same way on every rank (a refusal made before any message). */
#ifndef DT_TEST_MPI_H
#define DT_TEST_MPI_H

#include <stddef.h>

#include "dt_test.h"
#include "dtrain/comm.h"

/* Sets *world, *rank and *size before the first test runs; frees the comm and finalizes MPI
 * after the last. Returns the program's exit status (0: every case passed on every rank; a
 * failure never returns, it ends the job). */
int dt_test_mpi_run(int *argc, char ***argv, const struct CMUnitTest *tests, size_t n,
                    dt_comm **world, int *rank, int *size);
#define dt_test_mpi_main(argc, argv, tests, world, rank, size)                                     \
    dt_test_mpi_run(argc, argv, tests, sizeof(tests) / sizeof((tests)[0]), world, rank, size)

/* For programs that start MPI and make their communicators themselves: runs the cases as
 * dt_test_mpi_run does, after MPI_Init, on every rank of MPI_COMM_WORLD. Returns 0 when every
 * case passed on every rank. */
int dt_test_mpi_cases(const char *name, const struct CMUnitTest *tests, size_t n);
#define dt_test_mpi_run_cases(name, tests)                                                         \
    dt_test_mpi_cases(name, tests, sizeof(tests) / sizeof((tests)[0]))

/* Every rank must call this, in the same order, within `seconds` of each other; a rank that
 * waits longer prints `what` and the ranks that never came, and ends the job. Only inside
 * cases run by the harness (it owns the communicator). */
void dt_test_mpi_agree(const char *what, double seconds);

/* The deadline tests give dt_test_mpi_agree after a refusal: refusals come before any
 * message, so the ranks reach it within milliseconds of each other. */
#define DT_TEST_MPI_REFUSAL_S 10.0

#endif
