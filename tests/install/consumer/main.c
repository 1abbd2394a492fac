/* main.c — a program on an installed dtrain, built outside the source tree against what
 * `cmake --install` put in place: with pkg-config (Makefile) and with CMake's
 * find_package (CMakeLists.txt). tests/install/install.sh builds and runs it both ways.
 *
 * It trains a linear regression on synthetic data for a few SGD steps and prints the test
 * loss before and after. By default it runs in one process without MPI (world NULL); with
 * --mpi, under mpirun, it trains data-parallel over MPI_COMM_WORLD, which is why it
 * includes <dtrain/comm_mpi.h>: the one public header that needs MPI's flags, so a build
 * of this file shows that pkg-config and find_package give them. Exits 0, or 1 with
 * dtrain's message. */
#include <stdio.h>
#include <string.h>

#include <dtrain/comm_mpi.h>
#include <dtrain/dtrain.h>

static int failed(const char *what, int use_mpi)
{
    fprintf(stderr, "consumer: %s: %s\n", what, dt_last_error());
    if (use_mpi) /* the other ranks may be waiting in a collective */
        MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

int main(int argc, char **argv)
{
    const int use_mpi = argc > 1 && strcmp(argv[1], "--mpi") == 0;
    static const char *const settings[] = {
        "data.kind=synthetic",    "data.synth_samples=1280", "data.synth_features=8",
        "data.synth_targets=2",   "data.test_samples=256",   "model.layers=linear 2",
        "loss.kind=mse",          "optim.kind=sgd",          "optim.lr=0.05",
        "schedule.kind=constant", "train.batch=16",          "train.epochs=1",
        "train.max_steps=20",     "train.threads=1",
    };
    dt_config cfg = dt_config_default();
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++)
        if (dt_config_set(&cfg, settings[i], "consumer") != DT_OK)
            return failed("config", 0);

    dt_comm *world = NULL;
    int rank = 0, ranks = 1;
    if (use_mpi) {
        if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
            fprintf(stderr, "consumer: MPI_Init failed\n");
            return 1;
        }
        if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", &world) != DT_OK)
            return failed("communicator", use_mpi);
        rank = dt_comm_rank(world);
        ranks = dt_comm_size(world);
    }

    dt_trainer *t = NULL;
    double before = 0, after = 0, accuracy = 0;
    if (dt_trainer_create(&cfg, world, &t) != DT_OK)
        return failed("trainer", use_mpi);
    if (dt_trainer_evaluate(t, &before, &accuracy) != DT_OK || dt_trainer_run(t, NULL) != DT_OK ||
        dt_trainer_evaluate(t, &after, &accuracy) != DT_OK)
        return failed("training", use_mpi);
    if (rank == 0)
        printf("ranks %d: test loss before %.6f after %.6f\n", ranks, before, after);
    dt_trainer_free(t);
    dt_comm_free(world);
    if (use_mpi)
        MPI_Finalize();
    return 0;
}
