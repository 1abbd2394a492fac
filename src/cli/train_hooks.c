/* train_hooks.c — the progress file and the test faults of `dtrain train` (train_hooks.h). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/train_hooks.h"

static int progress_fd = -1;
static int kill_rank = -1;
static int64_t kill_step = -1;
static char kill_marker[1024];

void dt_cli_hooks_setup(dt_trainer *t, int rank)
{
    const char *p = getenv("DTRAIN_PROGRESS_FILE");
    if (p != NULL && p[0] != '\0' && rank == 0)
        progress_fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    const char *k = getenv("DTRAIN_TEST_KILL");
    long long step = 0;
    int who = -1, used = 0;
    if (k != NULL && sscanf(k, "%d:%lld%n", &who, &step, &used) == 2) {
        kill_rank = who;
        kill_step = step;
        if (k[used] == ':')
            snprintf(kill_marker, sizeof kill_marker, "%s", k + used + 1);
    }
    const char *n = getenv("DTRAIN_TEST_NAN");
    if (n != NULL && sscanf(n, "%d:%lld", &who, &step) == 2 && who == rank)
        dt_trainer_inject_nonfinite(t, (int64_t)step);
}

void dt_cli_hooks_step(int rank, int64_t step)
{
    if (progress_fd >= 0) {
        char buf[32];
        const int n = snprintf(buf, sizeof buf, "%20lld\n", (long long)step);
        if (pwrite(progress_fd, buf, (size_t)n, 0) != n) {
            close(progress_fd); /* a progress file is a courtesy: stop trying */
            progress_fd = -1;
        }
    }
    if (rank != kill_rank || step != kill_step)
        return;
    if (kill_marker[0] != '\0') {
        int fd = open(kill_marker, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd < 0)
            return; /* fired before */
        close(fd);
    }
    fprintf(stderr, "dtrain: rank %d: DTRAIN_TEST_KILL: killing this rank after step %lld\n", rank,
            (long long)step);
    fflush(stderr);
    raise(SIGKILL);
}
