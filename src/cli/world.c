/* world.c — who takes part in this run. A plain `dtrain train` is world size 1 and never
 * initialises MPI (a singleton MPI_Init costs about 0.3 s and forks a daemon); under
 * mpirun/srun the launcher's environment says so, MPI is initialised, and the world
 * communicator is wrapped in a dt_comm with the config's [comm] settings. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "dtrain/comm_mpi.h"
#include "dtrain/train.h"

/* Rank 0 says which ranks run on which host when there is more than one, so that a job
 * that loses a host can be read against it (mpirun's own message names a lost daemon, not
 * always its host). */
static void print_hosts(const dt_cli_world *w)
{
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_Get_processor_name(name, &len);
    char *all = calloc((size_t)w->size, MPI_MAX_PROCESSOR_NAME);
    if (all == NULL)
        return;
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);
    int hosts = 0;
    for (int r = 0; r < w->size; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = strcmp(all + (size_t)r * MPI_MAX_PROCESSOR_NAME,
                          all + (size_t)q * MPI_MAX_PROCESSOR_NAME) == 0;
        hosts += !seen;
    }
    if (w->rank == 0 && hosts > 1) {
        printf("dtrain: %d ranks on %d hosts:", w->size, hosts);
        for (int r = 0; r < w->size; r++)
            printf("%s rank %d on %s", r ? "," : "", r, all + (size_t)r * MPI_MAX_PROCESSOR_NAME);
        printf("\n");
        fflush(stdout);
    }
    free(all);
}

int dt_cli_world_open(dt_cli_world *w, int *argc, char ***argv, const dt_config *cfg)
{
    w->mpi = 0;
    w->rank = 0;
    w->size = 1;
    w->comm = NULL;
    if (!dt_cli_launched())
        return DT_EXIT_OK;
    int provided = 0;
    /* One thread calls MPI: FUNNELED is enough (MULTIPLE doubles small-message latency). */
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "dtrain: MPI_Init failed\n");
        return DT_EXIT_FAIL;
    }
    w->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size);
    dt_comm_options opt;
    dt_config_comm_options(cfg, &opt);
    if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", &w->comm) != DT_OK ||
        dt_comm_set_options(w->comm, &opt) != DT_OK) {
        fprintf(stderr, "dtrain: rank %d: %s\n", w->rank, dt_last_error());
        return dt_cli_world_fail(w, DT_EXIT_FAIL);
    }
    print_hosts(w);
    return DT_EXIT_OK;
}

/* Ends the whole job from this rank. Errors the ranks agree on (a config that differs, a
 * non-finite step, a checkpoint that failed) reach every rank at once; a fifth of a second
 * lets the others print theirs, and the launcher forward what this one printed, before the
 * abort tears them down (MPICH's Hydra drops lines still in flight). */
static void abort_job(int code)
{
    fflush(stdout);
    fflush(stderr);
    const struct timespec grace = {0, 200000000};
    nanosleep(&grace, NULL);
    MPI_Abort(MPI_COMM_WORLD, code);
}

int dt_cli_world_fail(dt_cli_world *w, int code)
{
    if (w->comm != NULL) {
        /* A watchdog or mismatch report: the summary went out with the error; the
         * history of the last collectives follows. */
        const char *report = dt_comm_last_report(w->comm);
        if (report != NULL && report[0] != '\0')
            fprintf(stderr, "dtrain: rank %d: %s\n", w->rank, report);
    }
    if (w->mpi && w->size > 1) /* others may wait for this rank in a collective */
        abort_job(code);
    dt_cli_world_close(w);
    return code;
}

int dt_cli_refuse_before_mpi(int code, int *argc, char ***argv)
{
    if (code == DT_EXIT_OK || !dt_cli_launched() || getenv("OMPI_COMM_WORLD_SIZE") != NULL)
        return code;
    int provided = 0;
    fflush(stdout);
    fflush(stderr);
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS) {
        int size = 1;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (size > 1)
            abort_job(code);
        MPI_Finalize();
    }
    return code;
}

void dt_cli_world_close(dt_cli_world *w)
{
    if (w->comm != NULL) {
        dt_comm_free(w->comm);
        w->comm = NULL;
    }
    if (w->mpi) {
        MPI_Finalize();
        w->mpi = 0;
    }
}

dt_status dt_cli_print_ranks(const dt_cli_world *w, const char *line)
{
    char mine[DT_CLI_LINE_MAX];
    snprintf(mine, sizeof mine, "%s", line);
    if (w->comm == NULL || w->size == 1) {
        if (mine[0] != '\0')
            printf("%s\n", mine);
        return DT_OK;
    }
    char *all = NULL;
    dt_status st = dt_alloc((size_t)w->size * DT_CLI_LINE_MAX, "report lines", (void **)&all);
    if (st == DT_OK)
        st = dt_comm_allgather(w->comm, mine, all, DT_CLI_LINE_MAX, DT_COMM_UINT8);
    for (int r = 0; st == DT_OK && w->rank == 0 && r < w->size; r++)
        if (all[(size_t)r * DT_CLI_LINE_MAX] != '\0')
            printf("%s\n", all + (size_t)r * DT_CLI_LINE_MAX);
    dt_free(all);
    return st;
}
