/* cmd_launch.c — `dtrain launch -n N [options] -- <train arguments>`: runs `dtrain train`
 * under mpirun and supervises it. When the job fails (a rank killed, a host lost) it starts
 * the job again with --resume on the train arguments' --checkpoint-dir, so that the train
 * command goes on from the newest checkpoint there, up to --max-restarts times. With
 * --min-ranks below -n, a restart that fails again before it writes a new checkpoint (a
 * rank or a host that keeps failing) drops to one rank fewer, with --global-batch fixed to
 * the checkpoint's, so that every step still sums the same samples.
 *
 * With --hostfile, every failure is followed by a probe of each host (launch_hosts.h): one
 * that does not start a process within --probe-timeout is named in the cause and left out of
 * the restart's hostfile (DIR/.hostfile), and the ranks drop to the slots left.
 *
 * The launcher is Open MPI's mpirun or MPICH's mpiexec (Hydra, which Intel MPI and MVAPICH
 * share): `LAUNCHER --version` says which, and its own options carry the progress file's
 * name to rank 0 (Open MPI's -x VAR, Hydra's -genvlist VAR) and write the restart's hostfile
 * (NAME slots=N, NAME:N).
 *
 * launch is a supervisor only: it never initialises MPI. What it knows of the job comes
 * from outside it: mpirun's exit status, the lines on mpirun's stderr that name a rank, the
 * step that rank 0 writes to DTRAIN_PROGRESS_FILE, the checkpoint directory (read with the
 * library's finder, the one `dtrain train --resume` uses), and the probes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dtrain/checkpoint.h"
#include "dtrain/core.h"
#include "launch_hosts.h"

enum { PATH_LEN = 4096 };
#define PROGRESS_ENV "DTRAIN_PROGRESS_FILE"

/* The shared option table (cli.h) drives both the parser and --help; launch reads its
 * values (all STRING slots) and checks the counts itself. */
static const dt_cli_option options[] = {
    {"-n", "N", DT_OPT_STRING, "ranks", "ranks to start (required)"},
    {"--max-restarts", "R", DT_OPT_STRING, "max-restarts",
     "restarts after a failure before giving up (default 3)"},
    {"--min-ranks", "M", DT_OPT_STRING, "min-ranks",
     "one rank fewer per restart that fails before a new checkpoint, down to M (default N; "
     "not with --max-restarts 0)"},
    {"--hostfile", "F", DT_OPT_STRING, "hostfile",
     "passed to mpirun; after a failure each host is probed, and one that does not answer is "
     "named and left out of the restart"},
    {"--probe-timeout", "S", DT_OPT_STRING, "probe-timeout",
     "seconds a host has to start a probe process (default 10; with --hostfile, not with "
     "--max-restarts 0)"},
    {"--mpirun", "CMD", DT_OPT_STRING, "mpirun",
     "the launcher, split on spaces (default $DTRAIN_MPIRUN, else mpirun)"},
};
#define N_OPTIONS ((int)(sizeof options / sizeof options[0]))

typedef struct launch_opts {
    int ranks, max_restarts, min_ranks, probe_timeout;
    int probe_given; /* --probe-timeout was given: it needs --hostfile */
    const char *hostfile, *mpirun;
    char **train; /* the train arguments, after "--" */
    int ntrain;
    const char *dir;        /* their --checkpoint-dir */
    long long global_batch; /* their explicit --global-batch, or 0 */
    int stop_as;            /* their --stop-on usr1 or usr2 as a signal number, or 0 */
} launch_opts;

static void usage(FILE *out)
{
    dt_cli_print_help(
        out, "dtrain launch -n N [options] -- [CONFIG] [train options] --checkpoint-dir DIR",
        "Runs `mpirun -n N -x " PROGRESS_ENV " dtrain train ... --resume DIR` and, when the "
        "job\nfails (a non-zero exit or a signal), starts it again: the train command resumes "
        "from\nthe newest checkpoint in DIR, the one launch names (the same finder: the newest "
        "set\nwhose every file checks out). Each restart is logged on stderr with its cause "
        "(mpirun's\nstatus and the rank its messages name), the step reached and the "
        "checkpoint resumed\nfrom; at the end a report on stdout counts restarts and the "
        "steps recomputed. With\n--min-ranks, a restart that fails again before a new "
        "checkpoint runs on one rank\nfewer, with --global-batch set to the checkpoint's. With "
        "--hostfile, each failure is\nfollowed by a probe of every host (mpirun -n 1 --host H "
        "dtrain --version): a host\nthat does not answer is named, left out of the restart "
        "(DIR/.hostfile), and the\nranks drop to the slots left. SIGINT and SIGTERM are "
        "passed to mpirun and end the\nsupervision (as the train command's --stop-on usr1 or "
        "usr2 when it has one, so that\nthe job stops after a step with its checkpoint); "
        "SIGUSR1 and SIGUSR2 are passed on\nwhile it goes on. A train command that refused its "
        "arguments (exit status 2),\nstopped on a NaN or Inf (3) or on its --stop-on signal "
        "(4) is not restarted.\nEverything after the first '--' is the train command's.",
        options, N_OPTIONS, 0);
    fprintf(out, "\nexit status: 0 the job ended well, 1 it failed after the last restart "
                 "(or launch\nwas stopped), 2 a usage error, 4 the job stopped on its --stop-on "
                 "signal.\n");
}

/* ---- arguments ---- */

/* Option `name`'s value (slot `slot`) as a count >= lo into *out, which keeps its default
 * when the option was not given. 0 (and the message) when it is not one. */
static int take_count(const dt_cli_values *v, const char *name, const char *slot, int lo, int *out)
{
    const char *s = dt_cli_string(v, slot);
    if (s == NULL)
        return 1;
    long long n = 0;
    if (!dt_cli_whole(s, lo, 100000, &n)) {
        fprintf(stderr, "dtrain launch: %s '%s' is not a valid count\n", name, s);
        return 0;
    }
    *out = (int)n;
    return 1;
}

/* The value of train option `name` at train[*i] (`--name V` or `--name=V`, as the train
 * parser reads them; *i steps over V), or NULL. */
static const char *train_value(const launch_opts *o, int *i, const char *name)
{
    const char *a = o->train[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] == '\0' && *i + 1 < o->ntrain)
        return o->train[++*i];
    return NULL;
}

/* `value` without "KEY=" when it sets config key KEY (a --set value), else NULL. */
static const char *set_value(const char *value, const char *key)
{
    size_t n = strlen(key);
    return value != NULL && strncmp(value, key, n) == 0 && value[n] == '=' ? value + n + 1 : NULL;
}

/* The checkpoint directory (--checkpoint-dir D or --set checkpoint.dir=D), an explicit
 * global batch (--global-batch G or --set parallel.global_batch=G) and the stop signal
 * (--stop-on S or --set train.stop_signal=S) in the train arguments; the last one wins, as
 * in the train parser. A config file's are not seen. */
static void scan_train_args(launch_opts *o)
{
    for (int i = 0; i < o->ntrain; i++) {
        const char *v = train_value(o, &i, "--checkpoint-dir"), *g = NULL, *set = NULL, *s = NULL;
        if (v == NULL && (g = train_value(o, &i, "--global-batch")) == NULL &&
            (s = train_value(o, &i, "--stop-on")) == NULL &&
            (set = train_value(o, &i, "--set")) != NULL) {
            v = set_value(set, "checkpoint.dir");
            g = set_value(set, "parallel.global_batch");
            s = set_value(set, "train.stop_signal");
        }
        if (s != NULL)
            o->stop_as = strcmp(s, "usr1") == 0 ? SIGUSR1 : strcmp(s, "usr2") == 0 ? SIGUSR2 : 0;
        if (v != NULL)
            o->dir = v;
        long long n = 0;
        if (g != NULL)
            o->global_batch = dt_cli_whole(g, 1, LLONG_MAX, &n) ? n : 0;
    }
}

static int check_opts(launch_opts *o)
{
    if (o->ranks == 0) {
        fprintf(stderr, "dtrain launch: -n N is required: the ranks to start\n");
        return DT_EXIT_USAGE;
    }
    /* Both act on restarts only: with none, each would be accepted and change nothing. */
    if (o->max_restarts == 0 && (o->min_ranks != 0 || o->probe_given)) {
        fprintf(stderr,
                "dtrain launch: %s has no effect with --max-restarts 0: it acts on a "
                "restart, and none will run\n",
                o->min_ranks != 0 ? "--min-ranks" : "--probe-timeout");
        return DT_EXIT_USAGE;
    }
    if (o->min_ranks == 0)
        o->min_ranks = o->ranks;
    if (o->min_ranks > o->ranks) {
        fprintf(stderr, "dtrain launch: --min-ranks %d is more than -n %d\n", o->min_ranks,
                o->ranks);
        return DT_EXIT_USAGE;
    }
    if (o->mpirun[strspn(o->mpirun, " ")] == '\0') {
        fprintf(stderr, "dtrain launch: --mpirun names no command\n");
        return DT_EXIT_USAGE;
    }
    if (o->probe_given && o->hostfile == NULL) {
        fprintf(stderr, "dtrain launch: --probe-timeout has no effect without --hostfile: only "
                        "a hostfile's hosts are probed\n");
        return DT_EXIT_USAGE;
    }
    scan_train_args(o);
    if (o->dir == NULL || o->dir[0] == '\0') {
        fprintf(stderr, "dtrain launch: the train arguments have no --checkpoint-dir DIR: launch "
                        "restarts the job from the checkpoints written there\n");
        return DT_EXIT_USAGE;
    }
    return DT_EXIT_OK;
}

/* Returns DT_EXIT_OK, DT_EXIT_USAGE, or -1 after --help. launch's own options end at the
 * first "--"; the shared parser reads them (no config: every option is a STRING slot). */
static int parse_args(int argc, char **argv, launch_opts *o)
{
    const char *env = getenv("DTRAIN_MPIRUN");
    *o = (launch_opts){
        .max_restarts = 3, .probe_timeout = 10, .mpirun = env != NULL && env[0] ? env : "mpirun"};
    int dashes = 1;
    while (dashes < argc && strcmp(argv[dashes], "--") != 0)
        dashes++;
    dt_cli_values v;
    const int rc = dt_cli_parse("launch", options, N_OPTIONS, dashes, argv, NULL, &v, 0);
    if (rc != DT_EXIT_OK)
        return rc;
    if (!take_count(&v, "-n", "ranks", 1, &o->ranks) ||
        !take_count(&v, "--max-restarts", "max-restarts", 0, &o->max_restarts) ||
        !take_count(&v, "--min-ranks", "min-ranks", 1, &o->min_ranks) ||
        !take_count(&v, "--probe-timeout", "probe-timeout", 1, &o->probe_timeout))
        return DT_EXIT_USAGE;
    o->probe_given = dt_cli_string(&v, "probe-timeout") != NULL;
    if (dt_cli_string(&v, "hostfile") != NULL)
        o->hostfile = dt_cli_string(&v, "hostfile");
    if (dt_cli_string(&v, "mpirun") != NULL)
        o->mpirun = dt_cli_string(&v, "mpirun");
    if (dashes >= argc) {
        fprintf(stderr, "dtrain launch: no '--' before the train arguments (see dtrain launch "
                        "--help)\n");
        return DT_EXIT_USAGE;
    }
    o->train = argv + dashes + 1;
    o->ntrain = argc - dashes - 1;
    return check_opts(o);
}

/* ---- the checkpoint directory ---- */

typedef struct ckpt_info {
    long long step; /* -1: no checkpoint */
    long long global_batch;
} ckpt_info;

static void warn_skipped(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "dtrain launch: %s\n", msg);
}

/* The newest checkpoint in DIR, found as `dtrain train --resume DIR` finds it: the library's
 * finder (dt_ckpt_find, the trainer's own), which verifies every byte of a set (its
 * manifest's checksum, each file's size and CRC-32) and passes over newer sets that are
 * incomplete or corrupt (each named on stderr when `warn` is set), so that launch never
 * names a set that train then rejects. It needs no MPI. */
static ckpt_info newest_checkpoint(const char *dir, int warn)
{
    ckpt_info best = {-1, 0};
    char set[PATH_LEN];
    static dt_ckpt_manifest m; /* 10 KB: not on the stack */
    int found = 0;
    if (dt_ckpt_find(dir, set, sizeof set, &m, &found, warn ? warn_skipped : NULL, NULL) != DT_OK) {
        /* The train command meets the same error when it resumes, and reports it. */
        if (warn)
            fprintf(stderr, "dtrain launch: no checkpoint to name: %s\n", dt_last_error());
        return best;
    }
    if (found)
        best = (ckpt_info){m.step, m.global_batch};
    return best;
}

/* The step that rank 0 last wrote to the progress file (space-padded decimal), or -1. */
static long long read_progress(const char *path)
{
    char *text = NULL;
    size_t n = 0;
    if (dt_read_file(path, "progress", &text, &n) != DT_OK)
        return -1; /* none yet: the run failed before its first step */
    char *end = NULL;
    const long long v = strtoll(text, &end, 10);
    const int ok = end != text && v >= 0 && end[strspn(end, " \t\r\n")] == '\0';
    dt_free(text);
    return ok ? v : -1;
}

/* ---- one run of the job ---- */

static volatile sig_atomic_t stop_signal; /* SIGINT or SIGTERM received: no more restarts */
static volatile sig_atomic_t to_forward;  /* a signal to pass on to the launcher */
/* The train command's --stop-on usr1 or usr2: SIGTERM and SIGINT aimed at launch (a
 * scheduler's preemption) are passed on as it, so that the job stops after a step with its
 * checkpoint, where Open MPI's mpirun would kill the ranks about a second after passing
 * SIGTERM on. 0: passed on as they came. */
static int stop_as;

static void on_stop(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    stop_signal = sig;
    /* A terminal's Ctrl-C already reaches mpirun, which is in our process group: a second
     * SIGINT would make it kill the ranks at once. Only a kill() aimed at us is passed on. */
    if (info == NULL || info->si_code == SI_USER || info->si_code == SI_QUEUE)
        to_forward = stop_as != 0 ? stop_as : sig;
}

/* SIGUSR1 and SIGUSR2, passed on to the launcher (which passes them to the ranks: a run
 * with train.stop_signal stops on one, with exit status 4) while supervision goes on. */
static void on_pass(int sig, siginfo_t *info, void *uctx)
{
    (void)info;
    (void)uctx;
    to_forward = sig;
}

static void install_stop_handlers(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
        struct sigaction sa, old;
        /* A signal that whoever started us ignores (SIGINT in a background job) stays so. */
        if (sigaction(sigs[k], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        memset(&sa, 0, sizeof sa);
        sigemptyset(&sa.sa_mask);
        sa.sa_sigaction = k < 2 ? on_stop : on_pass;
        sa.sa_flags = SA_SIGINFO; /* no SA_RESTART: poll() and waitpid() return to forward it */
        sigaction(sigs[k], &sa, NULL);
    }
}

static void forward_stop(pid_t pid)
{
    int sig = to_forward;
    if (sig != 0) {
        to_forward = 0;
        kill(pid, sig);
    }
}

/* The rank that mpirun's or the ranks' stderr names, from the last line that names one.
 * Open MPI's own lines (ompi_rank) win over dtrain's (dtrain_rank): they name the process
 * that ended the job, while any rank may report a problem it saw in another. */
typedef struct err_scan {
    char buf[1024];
    size_t len;
    /* The lines that name a rank, by kind (-1: none seen): Open MPI's of a rank killed or
     * gone, dtrain's "rank N:", Open MPI's others (MPI_Abort, the first non-zero exit);
     * and dtrain's last error line without a rank (a one-rank run's, a refusal's). */
    int rank[3];
    char line[3][256];
    char plain[256];
    char host[128]; /* the node of a daemon Open MPI lost ("Remote daemon: ... on node X") */
    int stopped;    /* rank 0 said the run stopped on its --stop-on signal */
} err_scan;

/* The number at p ("N", then anything), or -1. */
static long number_at(const char *p, char **end)
{
    if (p == NULL || *p < '0' || *p > '9')
        return -1;
    return strtol(p, end, 10);
}

/* The rank that a line of Open MPI's names: "process rank N" (a rank killed, or gone
 * without MPI_Finalize: *mark 0), "invoked on rank N" (MPI_Abort: 1), or "Process name:
 * [[JOB,STEP],N]" (the first rank to exit non-zero: 2); -1 when it names none. */
static long ompi_rank(const char *line, int *mark)
{
    static const char *const marks[] = {"process rank ", "invoked on rank ", "Process name: [["};
    char *end = NULL;
    for (int k = 0; k < 3; k++) {
        const char *p = strstr(line, marks[k]);
        if (p == NULL)
            continue;
        p += strlen(marks[k]);
        if (k == 2 && (p = strstr(p, "],")) != NULL)
            p += 2;
        long r = number_at(p, &end);
        *mark = k;
        if (r >= 0)
            return r;
    }
    return -1;
}

/* The rank of dtrain's own "dtrain: rank N: ..." (or "dtrain CMD: rank N: ..."), or -1. */
static long dtrain_rank(const char *line)
{
    const char *p = strncmp(line, "dtrain", 6) == 0 ? strstr(line, ": rank ") : NULL;
    char *end = NULL;
    long r = number_at(p != NULL ? p + 7 : NULL, &end);
    return r >= 0 && *end == ':' ? r : -1;
}

static void scan_line(err_scan *s)
{
    const char *line = s->buf + strspn(s->buf, " \t");
    if (strncmp(line, "dtrain: stopped on SIG", 22) == 0) {
        s->stopped = 1;
        return;
    }
    /* A host gone: Open MPI names the node of the daemon it lost. */
    const char *node = strncmp(line, "Remote daemon:", 14) == 0 ? strstr(line, " on node ") : NULL;
    if (node != NULL) {
        node += 9;
        snprintf(s->host, sizeof s->host, "%.*s", (int)strcspn(node, " \t"), node);
    }
    int mark = 0;
    long r = ompi_rank(line, &mark);
    int kind = mark == 0 ? 0 : 2;
    if (r < 0) {
        r = dtrain_rank(line);
        kind = 1;
    }
    if (r < 0 && strncmp(line, "dtrain: ", 8) == 0 && strncmp(line, "dtrain: warning:", 16) != 0)
        snprintf(s->plain, sizeof s->plain, "%s", line);
    if (r < 0 || r > 1000000000)
        return;
    s->rank[kind] = (int)r;
    size_t n = strlen(line) < sizeof s->line[kind] ? strlen(line) : sizeof s->line[kind] - 1;
    memcpy(s->line[kind], line, n);
    s->line[kind][n] = '\0';
}

static void scan_bytes(err_scan *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n' || p[i] == '\r') {
            s->buf[s->len] = '\0';
            scan_line(s);
            s->len = 0;
        } else if (s->len + 1 < sizeof s->buf) {
            s->buf[s->len++] = p[i];
        }
    }
}

typedef struct run_result {
    int status;       /* waitpid's */
    int rank;         /* the rank named on stderr, or -1 */
    char line[256];   /* the line that named it */
    int own;          /* 1: that line is dtrain's own message */
    char host[128];   /* a host whose daemon Open MPI lost, or "" */
    char silent[512]; /* the hosts that did not answer the probe after it, or "" */
    int exec_errno;   /* the launcher could not be started */
    int stopped;      /* the run stopped on its --stop-on signal (train said so) */
} run_result;

/* Passes the launcher's stderr through unchanged, byte for byte, and scans its lines, until
 * it ends and the launcher has exited. Ranks left behind by a killed mpirun may hold the
 * pipe open: 2 s after the launcher's exit, reading stops. */
static void supervise(pid_t pid, int fd, run_result *r)
{
    err_scan s = {.len = 0, .rank = {-1, -1, -1}};
    int done = 0;
    double done_at = 0;
    for (;;) {
        if (!done) /* once reaped, the pid may be another process's */
            forward_stop(pid);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, 200);
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0) {
            char buf[4096];
            ssize_t got = read(fd, buf, sizeof buf);
            if (got == 0 || (got < 0 && errno != EINTR))
                break;
            if (got > 0) {
                fwrite(buf, 1, (size_t)got, stderr);
                scan_bytes(&s, buf, (size_t)got);
            }
        }
        if (!done && waitpid(pid, &r->status, WNOHANG) == pid) {
            done = 1;
            done_at = dt_now();
        }
        if (done && dt_now() - done_at > 2.0)
            break;
    }
    scan_bytes(&s, "\n", 1); /* a last line without its newline */
    close(fd);
    while (!done) { /* the pipe closed first: wait for the exit, still passing signals on */
        forward_stop(pid);
        pid_t w = waitpid(pid, &r->status, 0);
        done = w == pid || (w < 0 && errno != EINTR);
    }
    /* The cause, best first: a rank killed, dtrain's message naming a rank, dtrain's own
     * message (with the rank Open MPI names, if any), Open MPI's line alone. */
    const int k = s.rank[0] >= 0 ? 0 : s.rank[1] >= 0 ? 1 : s.plain[0] != '\0' ? -1 : 2;
    r->rank = s.rank[k >= 0 ? k : 2];
    r->own = k == 1 || k < 0;
    snprintf(r->line, sizeof r->line, "%s", k < 0 ? s.plain : s.rank[k] >= 0 ? s.line[k] : "");
    snprintf(r->host, sizeof r->host, "%s", s.host);
    r->stopped = s.stopped;
}

/* Starts the launcher with its stderr into a pipe (*errfd). An exec failure comes back as
 * errno through a close-on-exec pipe: a launcher that cannot start is not a failed job. */
static pid_t start_child(char **args, int *errfd, int *exec_errno)
{
    int err[2], ex[2];
    if (pipe(err) != 0)
        return -1;
    if (pipe(ex) != 0) {
        close(err[0]);
        close(err[1]);
        return -1;
    }
    fcntl(err[0], F_SETFD, FD_CLOEXEC);
    fcntl(ex[0], F_SETFD, FD_CLOEXEC);
    fcntl(ex[1], F_SETFD, FD_CLOEXEC);
    fflush(NULL);
    pid_t pid = fork();
    const int fork_errno = errno;
    if (pid == 0) {
        close(err[0]);
        close(ex[0]);
        if (dup2(err[1], STDERR_FILENO) >= 0) {
            if (err[1] != STDERR_FILENO) /* stderr was closed when launch started */
                close(err[1]);
            execvp(args[0], args);
        }
        int e = errno;
        ssize_t w = write(ex[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(err[1]);
    close(ex[1]);
    ssize_t got = -1;
    *exec_errno = 0;
    while (pid > 0 && (got = read(ex[0], exec_errno, sizeof *exec_errno)) < 0 && errno == EINTR)
        ;
    if (got != (ssize_t)sizeof *exec_errno)
        *exec_errno = 0;
    close(ex[0]);
    if (pid < 0) {
        close(err[0]);
        errno = fork_errno;
    }
    *errfd = err[0];
    return pid;
}

/* ---- the restarts ---- */

typedef struct restart_rec {
    char cause[1024];
    long long reached; /* the progress step at the failure, -1 unknown */
    long long from;    /* the checkpoint resumed from, -1 none */
    int ranks;         /* of the restart */
} restart_rec;

typedef struct launch_state {
    const launch_opts *o;
    int ranks;              /* of the next start */
    long long global_batch; /* --global-batch appended once fewer ranks run, else 0 */
    long long start_step;   /* the newest checkpoint when the current run started, -1 none */
    restart_rec *recs;      /* one per restart */
    int nrecs;
    long long recomputed;    /* steps done again: progress at each failure - its checkpoint */
    char exe[PATH_LEN];      /* this dtrain */
    char progress[PATH_LEN]; /* DIR/.progress */
    char hostfile[PATH_LEN]; /* the runs' hostfile: --hostfile, then DIR/.hostfile; or "" */
    dt_launch_host *hosts;   /* --hostfile's hosts, each alive until a probe finds it silent */
    int nhosts;
    int hydra; /* the launcher is MPICH's Hydra (else Open MPI's options) */
} launch_state;

/* Splits `words` in place on spaces into args; returns the count. */
static size_t split_words(char *words, char **args)
{
    size_t n = 0;
    char *save = NULL;
    for (char *w = strtok_r(words, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save))
        args[n++] = w;
    return n;
}

/* mpirun's words, then -n N -x DTRAIN_PROGRESS_FILE [--hostfile F] EXE train ARGS...
 * --resume DIR [--global-batch G]. -x carries the progress file's name to rank 0 on
 * another host (Open MPI passes only the variables it is told to; Hydra's -genvlist says
 * the same). `words` (split in place) and `num` hold strings the result points into.
 * Returns NULL when out of memory. */
static char **build_args(const launch_state *st, char *words, char num[2][32])
{
    const launch_opts *o = st->o;
    /* At most (length + 1) / 2 words, 13 pointers of our own with the NULL. */
    size_t cap = (strlen(words) + 1) / 2 + 13 + (size_t)o->ntrain;
    char **args = malloc(cap * sizeof *args);
    if (args == NULL)
        return NULL;
    size_t n = split_words(words, args);
    snprintf(num[0], 32, "%d", st->ranks);
    args[n++] = "-n";
    args[n++] = num[0];
    args[n++] = st->hydra ? "-genvlist" : "-x";
    args[n++] = PROGRESS_ENV;
    if (st->hostfile[0] != '\0') {
        args[n++] = "--hostfile";
        args[n++] = (char *)st->hostfile;
    }
    args[n++] = (char *)st->exe;
    args[n++] = "train";
    for (int i = 0; i < o->ntrain; i++)
        args[n++] = o->train[i];
    args[n++] = "--resume";
    args[n++] = (char *)o->dir;
    if (st->global_batch > 0) {
        snprintf(num[1], 32, "%lld", st->global_batch);
        args[n++] = "--global-batch";
        args[n++] = num[1];
    }
    args[n] = NULL;
    return args;
}

static void print_command(char **args)
{
    fprintf(stderr, "dtrain launch: running");
    for (int i = 0; args[i] != NULL; i++)
        fprintf(stderr, " %s", args[i]);
    fputc('\n', stderr);
}

/* One run of the job. Returns DT_EXIT_FAIL when the launcher could not be started at all
 * (the message said why), DT_EXIT_OK once it ran, whatever its status (in *r). */
static int run_once(launch_state *st, run_result *r)
{
    char *words = strdup(st->o->mpirun), num[2][32];
    char **args = words != NULL ? build_args(st, words, num) : NULL;
    if (args == NULL) {
        free(words);
        fprintf(stderr, "dtrain launch: out of memory\n");
        return DT_EXIT_FAIL;
    }
    if (st->nrecs == 0)
        print_command(args);
    /* A progress file left by the last run would count its steps again. */
    unlink(st->progress);
    int fd = -1;
    *r = (run_result){.rank = -1};
    pid_t pid = start_child(args, &fd, &r->exec_errno);
    int rc = DT_EXIT_OK;
    if (pid < 0) {
        fprintf(stderr, "dtrain launch: cannot start %s: %s\n", args[0], strerror(errno));
        rc = DT_EXIT_FAIL;
    } else {
        supervise(pid, fd, r);
        if (r->exec_errno != 0) {
            fprintf(stderr, "dtrain launch: cannot run '%s': %s\n", args[0],
                    strerror(r->exec_errno));
            rc = DT_EXIT_FAIL;
        }
    }
    free(args);
    free(words);
    return rc;
}

static void describe(const run_result *r, char *out, size_t n)
{
    char what[128];
    if (WIFEXITED(r->status))
        snprintf(what, sizeof what, "mpirun exited with status %d", WEXITSTATUS(r->status));
    else if (WIFSIGNALED(r->status))
        snprintf(what, sizeof what, "mpirun was killed by signal %d (%s)", WTERMSIG(r->status),
                 strsignal(WTERMSIG(r->status)));
    else
        snprintf(what, sizeof what, "mpirun ended with wait status %d", r->status);
    char host[800] = "";
    if (r->host[0] != '\0')
        snprintf(host, sizeof host, "; host %s lost (its daemon stopped answering)", r->host);
    if (r->silent[0] != '\0')
        snprintf(host + strlen(host), sizeof host - strlen(host),
                 "; host%s %s did not answer the probe", strchr(r->silent, ',') ? "s" : "",
                 r->silent);
    if (r->rank >= 0)
        snprintf(out, n, "%s%s; rank %d: \"%s\"", what, host, r->rank, r->line);
    else if (r->line[0] != '\0')
        snprintf(out, n, "%s%s; \"%s\"", what, host, r->line);
    else
        snprintf(out, n, "%s%s", what, host);
}

static void reached_text(long long step, char *out, size_t n)
{
    if (step >= 0)
        snprintf(out, n, "step %lld", step);
    else
        snprintf(out, n, "%s", "an unknown step (no progress file)");
}

static void from_text(long long step, char *out, size_t n)
{
    if (step >= 0)
        snprintf(out, n, "step-%09lld (step %lld)", step, step);
    else
        snprintf(out, n, "%s", "the start (no checkpoint yet)");
}

/* Runs on `target` ranks (not below --min-ranks) from now on, with the global batch fixed so
 * that the run stays the same computation: the checkpoint's, or else the train arguments'.
 * `why` says what made it drop. */
static void shrink_to(launch_state *st, const ckpt_info *c, int target, const char *why)
{
    const launch_opts *o = st->o;
    if (target < o->min_ranks)
        target = o->min_ranks;
    if (st->ranks <= target) {
        if (o->min_ranks < o->ranks && st->ranks == o->min_ranks)
            fprintf(stderr, "dtrain launch: staying at %d ranks (--min-ranks %d)\n", st->ranks,
                    o->min_ranks);
        return;
    }
    long long g = c->step >= 0 ? c->global_batch : o->global_batch;
    if (g <= 0) {
        fprintf(stderr,
                "dtrain launch: not dropping to %d ranks: no checkpoint yet to take the "
                "global batch from, and no --global-batch in the train arguments to keep "
                "it the same\n",
                target);
        return;
    }
    st->ranks = target;
    st->global_batch = g;
    fprintf(stderr,
            "dtrain launch: dropping to %d rank%s: %s; --global-batch %lld (%s) keeps the "
            "global batch\n",
            st->ranks, st->ranks == 1 ? "" : "s", why, g,
            c->step >= 0 ? "the checkpoint's" : "the train arguments'");
}

/* A restart that failed again before writing a checkpoint: a rank or a host that keeps
 * failing. Runs on one rank fewer, down to --min-ranks. */
static void maybe_shrink(launch_state *st, const ckpt_info *c)
{
    char from[80], why[160];
    from_text(c->step, from, sizeof from);
    snprintf(why, sizeof why, "the restart from %s failed before writing a new checkpoint", from);
    shrink_to(st, c, st->ranks - 1, why);
}

/* The slots of the live hosts, or 0 when one of them gives none (Open MPI then counts the
 * host's cores, which launch cannot see). */
static int live_slots(const launch_state *st)
{
    int sum = 0;
    for (int i = 0; i < st->nhosts; i++) {
        if (st->hosts[i].alive && st->hosts[i].slots == 0)
            return 0;
        sum += st->hosts[i].alive ? st->hosts[i].slots : 0;
    }
    return sum;
}

/* After a failed run with a hostfile: every live host is probed; the silent ones are named
 * in r->silent and left out of DIR/.hostfile, which the next run uses. Returns the number of
 * hosts still alive (-1: the new hostfile could not be written). */
static int probe_hosts(launch_state *st, run_result *r)
{
    char *words = strdup(st->o->mpirun);
    char **args = words != NULL ? calloc(strlen(words) / 2 + 2, sizeof *args) : NULL;
    int *was = calloc((size_t)st->nhosts, sizeof *was), alive = 0;
    if (args != NULL && was != NULL) {
        split_words(words, args);
        for (int i = 0; i < st->nhosts; i++)
            was[i] = st->hosts[i].alive;
        dt_launch_hosts_probe(args, st->exe, st->hosts, st->nhosts, st->o->probe_timeout);
    }
    r->silent[0] = '\0';
    for (int i = 0; i < st->nhosts; i++) {
        const dt_launch_host *h = &st->hosts[i];
        alive += h->alive;
        if (was != NULL && was[i] && !h->alive) {
            size_t used = strlen(r->silent);
            snprintf(r->silent + used, sizeof r->silent - used, "%s%s", used ? ", " : "", h->name);
        }
    }
    free(was);
    free(args);
    free(words);
    if (r->silent[0] == '\0' || alive == 0)
        return alive;
    char written[PATH_LEN];
    snprintf(written, sizeof written, "%s/.hostfile", st->o->dir);
    if (dt_launch_hosts_write(written, st->hosts, st->nhosts, st->hydra) != 0) {
        fprintf(stderr, "dtrain launch: cannot write %s: %s\n", written, strerror(errno));
        return -1;
    }
    snprintf(st->hostfile, sizeof st->hostfile, "%s", written);
    return alive;
}

/* After a failure that will be restarted: records and logs it, and decides the ranks. */
static void plan_restart(launch_state *st, const run_result *r)
{
    const ckpt_info c = newest_checkpoint(st->o->dir, 1);
    restart_rec *rec = &st->recs[st->nrecs];
    describe(r, rec->cause, sizeof rec->cause);
    rec->reached = read_progress(st->progress);
    rec->from = c.step;
    const long long base = c.step >= 0 ? c.step : 0;
    if (rec->reached > base)
        st->recomputed += rec->reached - base;
    const int slots = r->silent[0] != '\0' ? live_slots(st) : 0;
    if (slots > 0) {
        char why[640];
        snprintf(why, sizeof why, "the hosts left have %d slot%s", slots, slots == 1 ? "" : "s");
        shrink_to(st, &c, slots, why);
    } else if (st->nrecs > 0 && c.step == st->start_step) {
        maybe_shrink(st, &c);
    }
    rec->ranks = st->ranks;
    st->nrecs++;
    st->start_step = c.step; /* where the next run starts: nothing writes a set till then */
    char reached[64], from[80];
    reached_text(rec->reached, reached, sizeof reached);
    from_text(c.step, from, sizeof from);
    fprintf(stderr,
            "dtrain launch: restart %d of %d: %s; reached %s; resuming from %s on %d "
            "rank%s\n",
            st->nrecs, st->o->max_restarts, rec->cause, reached, from, st->ranks,
            st->ranks == 1 ? "" : "s");
}

static void report(const launch_state *st, const char *outcome)
{
    printf("dtrain launch: %s\n", outcome);
    printf("dtrain launch: restarts: %d\n", st->nrecs);
    for (int i = 0; i < st->nrecs; i++) {
        const restart_rec *rec = &st->recs[i];
        char reached[64], from[80];
        reached_text(rec->reached, reached, sizeof reached);
        from_text(rec->from, from, sizeof from);
        printf("dtrain launch:   restart %d: %s; reached %s, resumed from %s on %d rank%s\n", i + 1,
               rec->cause, reached, from, rec->ranks, rec->ranks == 1 ? "" : "s");
    }
    printf("dtrain launch: ranks at the end: %d (of %d)\n", st->ranks, st->o->ranks);
    printf("dtrain launch: steps recomputed: %lld\n", st->recomputed);
    fflush(stdout);
}

/* Which launcher the words run, by what `LAUNCHER --version` prints: "HYDRA" (MPICH's
 * mpiexec), "Open MPI" or "OpenRTE" (Open MPI's mpirun), or neither (LAUNCHER_OTHER: the
 * launcher cannot be run, does not answer within 10 s, or is another program; Open MPI's
 * options are used, and prepare says so). */
enum { LAUNCHER_OPENMPI, LAUNCHER_HYDRA, LAUNCHER_OTHER };

static int launcher_kind(const char *mpirun)
{
    char *words = strdup(mpirun);
    char **args = words != NULL ? calloc(strlen(words) / 2 + 3, sizeof *args) : NULL;
    int out[2] = {-1, -1}, kind = LAUNCHER_OTHER;
    if (args == NULL || pipe(out) != 0) {
        free(args);
        free(words);
        return kind;
    }
    size_t n = split_words(words, args);
    args[n++] = "--version";
    args[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(out[1], STDOUT_FILENO);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDERR_FILENO);
        }
        setpgid(0, 0);
        execvp(args[0], args);
        _exit(127);
    }
    close(out[1]);
    if (pid > 0) {
        char buf[4096];
        size_t got = 0;
        struct pollfd p = {.fd = out[0], .events = POLLIN};
        const double end = dt_now() + 10.0;
        while (got < sizeof buf - 1 && dt_now() < end && poll(&p, 1, 100) >= 0) {
            if (!(p.revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t r = read(out[0], buf + got, sizeof buf - 1 - got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        buf[got] = '\0';
        kind = strstr(buf, "HYDRA") != NULL ? LAUNCHER_HYDRA
               : strstr(buf, "Open MPI") != NULL || strstr(buf, "OpenRTE") != NULL
                   ? LAUNCHER_OPENMPI
                   : LAUNCHER_OTHER;
        kill(-pid, SIGKILL); /* done, or stuck past the deadline */
        waitpid(pid, NULL, 0);
    }
    close(out[0]);
    free(args);
    free(words);
    return kind;
}

/* The paths and the environment the runs share. */
static int prepare(const launch_opts *o, launch_state *st)
{
    const int kind = launcher_kind(o->mpirun);
    *st = (launch_state){
        .o = o, .ranks = o->ranks, .start_step = -1, .hydra = kind == LAUNCHER_HYDRA};
    if (kind == LAUNCHER_OTHER)
        fprintf(stderr,
                "dtrain launch: '%s --version' names neither Open MPI nor MPICH's Hydra: "
                "passing Open MPI's options (-x, a hostfile of 'host slots=N')\n",
                o->mpirun);
    ssize_t n = readlink("/proc/self/exe", st->exe, sizeof st->exe - 1);
    if (n <= 0) {
        fprintf(stderr, "dtrain launch: cannot find this executable: /proc/self/exe: %s\n",
                strerror(errno));
        return DT_EXIT_FAIL;
    }
    st->exe[n] = '\0';
    if (snprintf(st->progress, sizeof st->progress, "%s/" DT_LAUNCH_PROGRESS_NAME, o->dir) >=
        (int)sizeof st->progress) {
        fprintf(stderr, "dtrain launch: --checkpoint-dir %s: path too long\n", o->dir);
        return DT_EXIT_USAGE;
    }
    if (o->hostfile != NULL) {
        char err[512];
        st->hosts = calloc(DT_LAUNCH_MAX_HOSTS, sizeof *st->hosts);
        if (st->hosts == NULL) {
            fprintf(stderr, "dtrain launch: out of memory\n");
            return DT_EXIT_FAIL;
        }
        st->nhosts =
            dt_launch_hosts_read(o->hostfile, st->hosts, DT_LAUNCH_MAX_HOSTS, err, sizeof err);
        if (st->nhosts < 0) {
            fprintf(stderr, "dtrain launch: %s\n", err);
            return DT_EXIT_USAGE;
        }
        snprintf(st->hostfile, sizeof st->hostfile, "%s", o->hostfile);
    }
    /* The directory must exist for rank 0 to write its progress there from the first step;
     * one that cannot be made is left to the train command to report. */
    mkdir(o->dir, 0777);
    if (setenv(PROGRESS_ENV, st->progress, 1) != 0 ||
        (st->recs = calloc((size_t)o->max_restarts + 1, sizeof *st->recs)) == NULL) {
        fprintf(stderr, "dtrain launch: out of memory\n");
        return DT_EXIT_FAIL;
    }
    return DT_EXIT_OK;
}

/* Ends the supervision that did not succeed: the message on stderr, the report. */
static int give_up(const launch_state *st, const char *cause)
{
    char why[1200];
    if (stop_signal != 0)
        snprintf(why, sizeof why, "stopped by signal %d (%s), not restarting: %s", (int)stop_signal,
                 strsignal(stop_signal), cause);
    else
        snprintf(why, sizeof why, "giving up after %d restart%s: %s", st->o->max_restarts,
                 st->o->max_restarts == 1 ? "" : "s", cause);
    fprintf(stderr, "dtrain launch: %s\n", why);
    report(st, stop_signal != 0 ? "stopped" : "failed");
    return DT_EXIT_FAIL;
}

/* Runs the job until it succeeds, fails after the last restart, or is stopped. */
static int supervise_job(launch_state *st)
{
    char cause[1024] = "";
    /* Each later start is the checkpoint plan_restart found (reading every byte of a set
     * once per restart, not twice). */
    st->start_step = newest_checkpoint(st->o->dir, 0).step;
    for (;;) {
        if (stop_signal != 0) /* received between two runs */
            return give_up(st, cause);
        run_result r;
        if (run_once(st, &r) != DT_EXIT_OK)
            return DT_EXIT_FAIL;
        const int code = WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1;
        /* MPICH's mpiexec, once it has passed a signal on, may exit 0 where the ranks
         * exited 4: the train command's own line says which. */
        if (code == DT_EXIT_STOPPED || (code == 0 && r.stopped)) {
            fprintf(stderr, "dtrain launch: not restarting: the run stopped on its --stop-on "
                            "signal (exit status 4) and wrote its checkpoint; run this command "
                            "again to go on from it\n");
            report(st, "stopped");
            return DT_EXIT_STOPPED;
        }
        if (code == 0) {
            char outcome[64];
            snprintf(outcome, sizeof outcome, "done after %d restart%s", st->nrecs,
                     st->nrecs == 1 ? "" : "s");
            report(st, outcome);
            return DT_EXIT_OK;
        }
        /* The train command's own verdicts that a restart would reach again: its exit
         * status, its message the cause, no rank killed and no host lost. */
        if ((code == DT_EXIT_USAGE || code == DT_EXIT_NONFINITE) && r.own && r.host[0] == '\0') {
            describe(&r, cause, sizeof cause);
            fprintf(stderr, "dtrain launch: not restarting: %s; %s\n", cause,
                    code == DT_EXIT_USAGE
                        ? "the train command refused its arguments (exit status 2), as it "
                          "would on every restart"
                        : "the run stopped on a NaN or Inf (exit status 3: train.on_nonfinite "
                          "stop, or train.skip_limit), which a restart from the checkpoint "
                          "would compute again");
            report(st, "failed");
            return DT_EXIT_FAIL;
        }
        const int alive = stop_signal == 0 && st->nhosts > 0 ? probe_hosts(st, &r) : 1;
        describe(&r, cause, sizeof cause);
        const int slots = st->nhosts > 0 ? live_slots(st) : 0;
        if (alive <= 0 || (slots > 0 && slots < st->o->min_ranks)) {
            fprintf(stderr, "dtrain launch: not restarting: %s; %s\n", cause,
                    alive < 0    ? "the hostfile of the hosts left could not be written"
                    : alive == 0 ? "no host of the hostfile answers"
                                 : "the hosts left have fewer slots than --min-ranks");
            report(st, "failed");
            return DT_EXIT_FAIL;
        }
        if (stop_signal != 0 || st->nrecs >= st->o->max_restarts)
            return give_up(st, cause);
        plan_restart(st, &r);
    }
}

int dt_cmd_launch(int argc, char **argv)
{
    launch_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc == -1) {
        usage(stdout);
        return DT_EXIT_OK;
    }
    if (rc != DT_EXIT_OK)
        return rc;
    launch_state st;
    rc = prepare(&o, &st);
    if (rc == DT_EXIT_OK) {
        stop_as = o.stop_as;
        install_stop_handlers();
        rc = supervise_job(&st);
    }
    free(st.recs);
    free(st.hosts);
    return rc;
}
