/* train_resume.c — `dtrain train --resume PATH`. The newest valid set is loaded (each newer
 * broken one named in a warning); when an existing directory holds none, the run starts
 * from the beginning with a message saying what the directory holds, so that a wrong
 * directory reads differently from dtrain launch's first run. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli/train_resume.h"

static void warn_skipped(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "dtrain: warning: resume: %s\n", msg);
}

/* "step-" and digits: a checkpoint set's directory name (docs/checkpoint-format.md). */
static int is_set_name(const char *name)
{
    if (strncmp(name, "step-", 5) != 0 || name[5] == '\0')
        return 0;
    return strspn(name + 5, "0123456789") == strlen(name + 5);
}

/* Appends ", name" (the first without the comma) while it fits, up to a few names, then
 * "...". */
static void add_name(char *list, size_t n, int *count, const char *name)
{
    const size_t used = strlen(list), len = strlen(name);
    if (*count < 4 && used + len + 8 < n) {
        if (*count > 0)
            strcat(list, ", ");
        strcat(list, name);
    } else if (used + 6 < n && (used < 4 || strcmp(list + used - 3, "...") != 0)) {
        strcat(list, ", ...");
    }
    (*count)++;
}

/* What `path`, an existing directory without a valid set, holds, into buf; returns 1 when
 * that is what a first run looks like (empty, or dtrain launch's progress file alone). */
static int describe(const char *path, char *buf, size_t n)
{
    char sets[256] = "", others[256] = "";
    int nsets = 0, nothers = 0, progress = 0;
    DIR *d = opendir(path);
    for (struct dirent *e = d != NULL ? readdir(d) : NULL; e != NULL; e = readdir(d)) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (strcmp(e->d_name, DT_LAUNCH_PROGRESS_NAME) == 0)
            progress = 1;
        else if (is_set_name(e->d_name))
            add_name(sets, sizeof sets, &nsets, e->d_name);
        else
            add_name(others, sizeof others, &nothers, e->d_name);
    }
    if (d != NULL)
        closedir(d);
    const char *launch = "dtrain launch's progress file (" DT_LAUNCH_PROGRESS_NAME ")";
    if (nsets == 0 && nothers == 0) {
        if (progress)
            snprintf(buf, n, "%s holds only %s, no checkpoint yet", path, launch);
        else
            snprintf(buf, n, "%s is empty", path);
        return 1;
    }
    int used = snprintf(buf, n, "%s holds no complete checkpoint:", path);
    if (nsets > 0 && used > 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, " %d incomplete or corrupt set%s (%s)",
                         nsets, nsets == 1 ? "" : "s", sets);
    if (nothers > 0 && used > 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, "%s %d other entr%s (%s)",
                         nsets > 0 ? "," : "", nothers, nothers == 1 ? "y" : "ies", others);
    if (progress && used > 0 && (size_t)used < n)
        snprintf(buf + used, n - (size_t)used, " and %s", launch);
    return 0;
}

dt_status dt_cli_resume(dt_trainer *t, const char *path, int rank)
{
    int64_t step = -1;
    const double t0 = dt_now();
    dt_status st = dt_trainer_resume(t, path, warn_skipped, NULL, &step);
    const double took = dt_now() - t0;
    if (st != DT_OK || rank != 0)
        return st;
    if (step < 0) {
        char what[1200];
        const int first_run = describe(path, what, sizeof what);
        fprintf(stderr, "dtrain: %sresume: %s: training starts from the beginning\n",
                first_run ? "" : "warning: ", what);
    } else {
        printf("dtrain: resumed from the checkpoint of step %lld in %s (found, verified and "
               "loaded in %.3f s)\n",
               (long long)step, path, took);
    }
    fflush(stdout);
    return DT_OK;
}
