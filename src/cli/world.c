/* world.c — who takes part in this run. A plain `dtrain train` is world size 1 and never
 * initialises MPI (a singleton MPI_Init costs about 0.3 s and forks a daemon); under
 * mpirun/srun the launcher's environment says so and MPI is initialised. */
#include <mpi.h>
#include <stdio.h>

#include "cli.h"

int dt_cli_world_open(dt_cli_world *w, int *argc, char ***argv, const dt_config *cfg)
{
    (void)cfg;
    w->mpi = 0;
    w->rank = 0;
    w->size = 1;
    w->comm = NULL;
    if (!dt_cli_launched())
        return DT_EXIT_OK;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "dtrain: MPI_Init failed\n");
        return DT_EXIT_FAIL;
    }
    w->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size);
    if (w->size > 1) {
        if (w->rank == 0)
            fprintf(stderr, "dtrain: data-parallel training over %d ranks needs the comm layer, "
                            "which this build does not have yet\n", w->size);
        return dt_cli_world_fail(w, DT_EXIT_FAIL);
    }
    return DT_EXIT_OK;
}

int dt_cli_world_fail(dt_cli_world *w, int code)
{
    if (w->mpi && w->size > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    dt_cli_world_close(w);
    return code;
}

void dt_cli_world_close(dt_cli_world *w)
{
    if (w->mpi) {
        MPI_Finalize();
        w->mpi = 0;
    }
}
