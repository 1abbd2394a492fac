/* train_hooks.c — the progress file, the stop signal and the test faults of `dtrain train`
 * (train_hooks.h). */
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
static int64_t signal_step = -1; /* DTRAIN_TEST_SIGNAL: this rank raises stop_sig then */
static int stop_sig;             /* train.stop_signal's signal number, or 0 */
static dt_trainer *volatile stop_trainer;
static volatile sig_atomic_t stop_pending; /* the signal came before the trainer existed */

/* train.stop_signal's values (dt_stop_signal) as signals. */
static const struct {
    int number;
    const char *name;
} stop_signals[DT_STOP_SIGNAL_COUNT] = {[DT_STOP_SIGNAL_NONE] = {0, NULL},
                                        [DT_STOP_SIGNAL_USR1] = {SIGUSR1, "SIGUSR1"},
                                        [DT_STOP_SIGNAL_USR2] = {SIGUSR2, "SIGUSR2"},
                                        [DT_STOP_SIGNAL_TERM] = {SIGTERM, "SIGTERM"},
                                        [DT_STOP_SIGNAL_INT] = {SIGINT, "SIGINT"}};

const char *dt_cli_stop_signal_name(const dt_config *cfg)
{
    const int v = cfg->train.stop_signal;
    return v >= 0 && v < DT_STOP_SIGNAL_COUNT ? stop_signals[v].name : NULL;
}

/* SA_RESETHAND has put the default action back: a second signal ends the process. */
static void on_stop_signal(int sig)
{
    (void)sig;
    if (stop_trainer != NULL)
        dt_trainer_request_stop(stop_trainer);
    else
        stop_pending = 1;
}

void dt_cli_stop_install(const dt_config *cfg)
{
    const int v = cfg->train.stop_signal;
    stop_sig = v > 0 && v < DT_STOP_SIGNAL_COUNT ? stop_signals[v].number : 0;
    if (stop_sig == 0)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigaction(stop_sig, &sa, NULL);
}

void dt_cli_hooks_close(void)
{
    stop_trainer = NULL;
}

void dt_cli_hooks_setup(dt_trainer *t, int rank)
{
    /* Set before the pending flag is read: a signal between the two asks the trainer. */
    stop_trainer = t;
    if (stop_pending)
        dt_trainer_request_stop(t);
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
    const char *s = getenv("DTRAIN_TEST_SIGNAL");
    if (s != NULL && sscanf(s, "%d:%lld", &who, &step) == 2 && who == rank)
        signal_step = step;
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
    if (step == signal_step && stop_sig != 0) {
        fprintf(stderr, "dtrain: rank %d: DTRAIN_TEST_SIGNAL: raising signal %d after step %lld\n",
                rank, stop_sig, (long long)step);
        fflush(stderr);
        raise(stop_sig);
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
