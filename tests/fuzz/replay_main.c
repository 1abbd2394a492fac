/* replay_main.c — runs a fuzz harness on saved inputs without libFuzzer, so that every
 * build (gcc included) replays the committed corpus and its crash reproducers as a ctest
 * test, under the sanitizers in the ASan pass.
 *
 *     fuzz_<reader>_replay PATH...   each PATH a file, or a directory whose regular files
 *                                    (not dotfiles) are replayed in name order
 *
 * Each input is copied into a buffer of exactly its size, as libFuzzer does, so reading
 * past it is a sanitizer report. Exits 1 when a path cannot be read or no input was
 * found, so a wrong corpus path fails the test instead of passing it empty. */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Runs the harness on one file; returns 0, or 1 when the file cannot be read. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: %s: cannot open: %s\n", path, strerror(errno));
        return 1;
    }
    struct stat sb;
    uint8_t *data = NULL;
    size_t size = 0;
    if (fstat(fileno(f), &sb) == 0) {
        size = (size_t)sb.st_size;
        data = malloc(size > 0 ? size : 1);
    }
    if (data == NULL || fread(data, 1, size, f) != size) {
        fprintf(stderr, "replay: %s: cannot read\n", path);
        fclose(f);
        free(data);
        return 1;
    }
    fclose(f);
    printf("replay: %s (%zu bytes)\n", path, size);
    fflush(stdout); /* the name is out before a crash in the harness */
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int not_hidden(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

/* Replays a directory's regular files in name order; adds to *count. */
static int replay_dir(const char *dir, int *count)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, not_hidden, alphasort);
    if (n < 0) {
        fprintf(stderr, "replay: %s: cannot list: %s\n", dir, strerror(errno));
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (rc == 0 && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            rc = replay_file(path);
            *count += rc == 0;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    int count = 0;
    for (int a = 1; a < argc; a++) {
        struct stat sb;
        if (stat(argv[a], &sb) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[a], strerror(errno));
            return 1;
        }
        int rc = S_ISDIR(sb.st_mode) ? replay_dir(argv[a], &count) : replay_file(argv[a]);
        if (rc != 0)
            return 1;
        count += !S_ISDIR(sb.st_mode);
    }
    if (count == 0) {
        fprintf(stderr, "replay: no inputs (usage: %s FILE_OR_DIR...)\n", argv[0]);
        return 1;
    }
    printf("replay: %d inputs, no crash\n", count);
    return 0;
}
