/* launch_hosts.c — hostfile hosts for dtrain launch (launch_hosts.h). */
#include "launch_hosts.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* A slot count, 1 to 1000000, the whole of `text`; 0 or -1. */
static int parse_slots(const char *text, int *slots)
{
    long long s = 0;
    if (!dt_cli_whole(text, 1, 1000000, &s))
        return -1;
    *slots = (int)s;
    return 0;
}

/* One line of a hostfile into *h; returns 1 for a host, 0 for a blank or comment line, -1
 * for a bad name or slots count, -2 for a word other than slots=N (copied to `word_out`):
 * the probed hostfile dtrain launch writes for the MPI launcher holds the host and its
 * slots only, so anything else (Open MPI's max_slots=N, say) would be dropped unseen. */
static int parse_line(char *line, dt_launch_host *h, char *word_out, size_t nword)
{
    line[strcspn(line, "#\n")] = '\0';
    char *save = NULL, *word = strtok_r(line, " \t", &save);
    if (word == NULL)
        return 0;
    h->slots = 0;
    h->alive = 1;
    /* Hydra's NAME:N; a name with more than one colon is an IPv6 address, whole */
    char *colon = strchr(word, ':');
    if (colon != NULL && colon == strrchr(word, ':')) {
        *colon = '\0';
        if (parse_slots(colon + 1, &h->slots) != 0)
            return -1;
    }
    if (strlen(word) >= sizeof h->name || word[0] == '\0')
        return -1;
    snprintf(h->name, sizeof h->name, "%s", word);
    while ((word = strtok_r(NULL, " \t", &save)) != NULL) {
        if (strncmp(word, "slots=", 6) != 0) {
            snprintf(word_out, nword, "%s", word);
            return -2;
        }
        if (parse_slots(word + 6, &h->slots) != 0)
            return -1;
    }
    return 1;
}

int dt_launch_hosts_read(const char *path, dt_launch_host *hosts, int max, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "--hostfile %s: %s", path, strerror(errno));
        return -1;
    }
    char line[1024];
    int n = 0, lineno = 0, bad = 0;
    while (!bad && fgets(line, sizeof line, f) != NULL) {
        lineno++;
        if (n == max) {
            snprintf(err, errlen, "--hostfile %s: more than %d hosts", path, max);
            bad = 1;
        } else {
            char word[64];
            int got = parse_line(line, &hosts[n], word, sizeof word);
            if (got == -2) {
                snprintf(err, errlen,
                         "--hostfile %s line %d: '%s' is not understood: a line holds a host "
                         "and slots=N (Open MPI) or NAME:N (MPICH), nothing else",
                         path, lineno, word);
                bad = 1;
            } else if (got < 0) {
                snprintf(err, errlen,
                         "--hostfile %s line %d: a host name of 255 characters at most, and "
                         "slots=N (Open MPI) or NAME:N (MPICH) with N >= 1",
                         path, lineno);
                bad = 1;
            }
            n += got > 0;
        }
    }
    fclose(f);
    return bad ? -1 : n;
}

int dt_launch_hosts_write(const char *path, const dt_launch_host *hosts, int n, int hydra)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    for (int i = 0; i < n; i++) {
        if (!hosts[i].alive)
            continue;
        if (hosts[i].slots > 0)
            fprintf(f, hydra ? "%s:%d\n" : "%s slots=%d\n", hosts[i].name, hosts[i].slots);
        else
            fprintf(f, "%s\n", hosts[i].name);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* One probe, its output thrown away; returns its pid or -1. */
static pid_t start_probe(char *const *launcher, const char *exe, const char *host)
{
    int words = 0;
    while (launcher[words] != NULL)
        words++;
    char **args = malloc(((size_t)words + 7) * sizeof *args);
    if (args == NULL)
        return -1;
    memcpy(args, launcher, (size_t)words * sizeof *args);
    char *tail[] = {"-n", "1", "--host", (char *)host, (char *)exe, "--version", NULL};
    memcpy(args + words, tail, sizeof tail);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
        }
        setpgid(0, 0); /* so that a probe left hanging is killed with what it started */
        execvp(args[0], args);
        _exit(127);
    }
    free(args);
    return pid;
}

int dt_launch_hosts_probe(char *const *launcher, const char *exe, dt_launch_host *hosts, int n,
                          double timeout_s)
{
    pid_t *pid = calloc((size_t)(n > 0 ? n : 1), sizeof *pid);
    int *tries = calloc((size_t)(n > 0 ? n : 1), sizeof *tries);
    if (pid == NULL || tries == NULL) {
        free(pid);
        free(tries);
        return 0;
    }
    int waiting = 0, dead = 0;
    for (int i = 0; i < n; i++)
        if (hosts[i].alive && (pid[i] = start_probe(launcher, exe, hosts[i].name)) > 0)
            waiting++;
    const struct timespec tick = {0, 50 * 1000 * 1000};
    for (double waited = 0; waiting > 0 && waited < timeout_s; waited += 0.05) {
        nanosleep(&tick, NULL);
        for (int i = 0; i < n; i++) {
            int status = 0;
            if (pid[i] <= 0 || waitpid(pid[i], &status, WNOHANG) != pid[i])
                continue;
            pid[i] = 0, waiting--;
            if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                continue;
            /* Once more after a fast failure, a second after it, with time left to answer. */
            if (tries[i]++ == 0 && waited + 1.5 < timeout_s) {
                const struct timespec pause = {1, 0};
                nanosleep(&pause, NULL);
                waited += 1.0;
                if ((pid[i] = start_probe(launcher, exe, hosts[i].name)) > 0) {
                    waiting++;
                    continue;
                }
            }
            hosts[i].alive = 0, dead++;
        }
    }
    for (int i = 0; i < n; i++) { /* still running at the deadline: silent */
        if (pid[i] <= 0)
            continue;
        kill(-pid[i], SIGKILL);
        kill(pid[i], SIGKILL);
        waitpid(pid[i], NULL, 0);
        hosts[i].alive = 0, dead++;
    }
    free(pid);
    free(tries);
    return dead;
}
