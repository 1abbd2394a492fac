/* test_comm_kill.c — run by comm_kill.sh under mpirun: the last rank kills itself with
 * SIGKILL while the others wait in an all-reduce (watchdog at its default 300 s). No rank
 * may hang: mpirun must end the whole job, with a non-zero exit, within seconds. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtrain/comm_mpi.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dt_comm *c = NULL;
    if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", &c) != DT_OK) {
        fprintf(stderr, "%s\n", dt_last_error());
        return 2;
    }
    static float x[1 << 20];
    /* one collective that everyone completes, so the kill lands mid-run */
    if (dt_comm_allreduce(c, x, x, 1 << 20, DT_COMM_FLOAT32, DT_COMM_SUM) != DT_OK)
        return 2;
    if (rank == size - 1) {
        fprintf(stderr, "rank %d: raising SIGKILL\n", rank);
        fflush(stderr);
        raise(SIGKILL);
    }
    dt_status st = dt_comm_allreduce(c, x, x, 1 << 20, DT_COMM_FLOAT32, DT_COMM_SUM);
    /* Not reached in a correct run: mpirun ends this process first. */
    fprintf(stderr, "rank %d: allreduce returned %s: %s\n", rank, dt_status_str(st),
            dt_last_error());
    dt_comm_free(c);
    MPI_Finalize();
    return 0;
}
