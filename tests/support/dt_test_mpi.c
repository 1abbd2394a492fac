/* dt_test_mpi.c — the MPI test programs' main (dt_test_mpi.h). */
#include "dt_test_mpi.h"

#include <mpi.h>
#include <stdio.h>

#include "dtrain/blas.h"
#include "dtrain/comm_mpi.h"

int dt_test_mpi_run(int *argc, char ***argv, const struct CMUnitTest *tests, size_t n,
                    dt_comm **world, int *rank, int *size)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    dt_blas_set_threads(1);
    if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", world) != DT_OK) {
        fprintf(stderr, "comm: %s\n", dt_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int failed = _cmocka_run_group_tests((*argv)[0], tests, n, NULL, NULL);
    dt_comm_free(*world);
    *world = NULL;
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}
