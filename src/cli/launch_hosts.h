/* launch_hosts.h — the hosts of `dtrain launch --hostfile`: read from an Open MPI or an MPICH
 * (Hydra) hostfile, probed after a failed run (which of them still starts a process), and
 * written back without the ones that did not answer, in the launcher's own format, so that
 * the restart runs on the hosts left. */
#ifndef DT_LAUNCH_HOSTS_H
#define DT_LAUNCH_HOSTS_H

#include <stddef.h>

#define DT_LAUNCH_MAX_HOSTS 1024

typedef struct dt_launch_host {
    char name[256];
    int slots; /* the line's slots=N or host:N; 0 when it gives none (the launcher decides) */
    int alive; /* 1 until a probe finds it silent */
} dt_launch_host;

/* Reads `path`: one host per line, its first word, either Open MPI's "NAME slots=N" (slots=N
 * among the words after the name) or Hydra's "NAME:N"; '#' starts a comment. Returns the
 * count, or -1 with a message naming the file and line in err. */
int dt_launch_hosts_read(const char *path, dt_launch_host *hosts, int max, char *err,
                         size_t errlen);

/* Writes the live hosts, with their slots, to `path`: "NAME:N" lines for Hydra (MPICH's
 * mpiexec), else Open MPI's "NAME slots=N". Returns 0 or -1 (errno set). */
int dt_launch_hosts_write(const char *path, const dt_launch_host *hosts, int n, int hydra);

/* Starts `launcher` (argv, NULL-ended) followed by "-n 1 --host NAME EXE --version" for every
 * live host at once and waits up to timeout_s: a host whose probe did not exit 0 in time is
 * marked dead (a machine that is gone makes ssh wait: the timeout is what says so). A probe
 * that fails at once is started again while the time allows (a launcher still tearing down
 * the failed job can refuse a live host: seen once in 3 runs on 2 loaded cores); a host is
 * dead when it fails twice or stays silent. Returns the number marked dead. */
int dt_launch_hosts_probe(char *const *launcher, const char *exe, dt_launch_host *hosts, int n,
                          double timeout_s);

#endif
