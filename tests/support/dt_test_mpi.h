/* dt_test_mpi.h — the main() of the MPI test programs: MPI started, one BLAS thread per
 * rank, the world wrapped as a dt_comm, the cmocka group run on every rank, and the job
 * failed when any rank's group failed (one rank's failure must fail the job). */
#ifndef DT_TEST_MPI_H
#define DT_TEST_MPI_H

#include <stddef.h>

#include "dt_test.h"
#include "dtrain/comm.h"

/* Sets *world, *rank and *size before the first test runs; frees the comm and finalizes MPI
 * after the last. Returns the program's exit status. */
int dt_test_mpi_run(int *argc, char ***argv, const struct CMUnitTest *tests, size_t n,
                    dt_comm **world, int *rank, int *size);
#define dt_test_mpi_main(argc, argv, tests, world, rank, size)                                     \
    dt_test_mpi_run(argc, argv, tests, sizeof(tests) / sizeof((tests)[0]), world, rank, size)

#endif
