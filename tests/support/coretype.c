/* coretype.c — dt_coretype CORE COMMAND [ARG...]: runs COMMAND under one of OpenBLAS's kernel
 * sets, or says why it cannot, for the tests that must hold whichever kernels OpenBLAS picks
 * (the allocation tests: OpenBLAS's AVX-512 kernels malloc where the others do not,
 * docs/NOTES.md). The test's environment sets OPENBLAS_CORETYPE=CORE, which OpenBLAS reads
 * when it loads, before main (tests/CMakeLists.txt, dt_add_coretype_tests).
 *
 * Exit 77 (CTest's skip, the reason printed) when this CPU cannot execute CORE's kernels
 * (decided from /proc/cpuinfo's flags, which Linux clears for what the OS does not enable:
 * Sandybridge needs avx; Haswell and Zen avx2 and fma; SkylakeX avx512f, bw, dq, vl and cd;
 * Cooperlake those and avx512_bf16; SapphireRapids those and amx_tile, amx_bf16, amx_int8),
 * when this OpenBLAS has no kernel set of that name (0.3.21 lacks SapphireRapids and runs
 * its own choice instead), or when the BLAS is not OpenBLAS. Nothing of OpenBLAS runs here
 * before the check. CORE "native" leaves OpenBLAS its own choice, and is skipped where that
 * choice is one of the named sets, whose own variant runs it. Otherwise execs COMMAND. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cblas.h>

#include "dtrain/blas.h"

enum { SKIP = 77 };

/* A call to the BLAS, never made, so that the linker keeps the library and it loads here as
 * in the test: dt_blas_core asks the loaded OpenBLAS which kernels it runs. */
float dt_coretype_never_called(void);
float dt_coretype_never_called(void)
{
    const float x = 0.0f;
    return cblas_sdot(1, &x, 1, &x, 1);
}

typedef struct core_need {
    const char *core;
    const char *flags[10]; /* /proc/cpuinfo names, NULL-terminated */
} core_need;

#define AVX512 "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"
static const core_need needs[] = {
    {"Sandybridge", {"avx", NULL}},
    {"Haswell", {"avx2", "fma", NULL}},
    {"Zen", {"avx2", "fma", NULL}},
    {"SkylakeX", {AVX512, NULL}},
    {"Cooperlake", {AVX512, "avx512_bf16", NULL}},
    {"SapphireRapids", {AVX512, "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8", NULL}},
};

/* The flags line of /proc/cpuinfo, " flag flag ... " with a space at each end, or NULL. */
static char *cpu_flags(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return NULL;
    char *line = NULL, *out = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "flags", 5) != 0 || strchr(line, ':') == NULL)
            continue;
        const char *v = strchr(line, ':') + 1;
        out = malloc(strlen(v) + 3);
        if (out != NULL) {
            sprintf(out, " %s ", v);
            out[strcspn(out, "\n")] = ' ';
        }
        break;
    }
    free(line);
    fclose(f);
    return out;
}

static int has_flag(const char *flags, const char *name)
{
    char word[64];
    snprintf(word, sizeof word, " %s ", name);
    return strstr(flags, word) != NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: dt_coretype CORE|native COMMAND [ARG...]\n");
        return 2;
    }
    const char *core = argv[1];
    const int native = strcmp(core, "native") == 0;
    const size_t ncores = sizeof needs / sizeof needs[0];
    const core_need *need = NULL;
    for (size_t i = 0; i < ncores; i++)
        if (strcmp(needs[i].core, core) == 0)
            need = &needs[i];
    if (!native && need == NULL) {
        fprintf(stderr, "dt_coretype: unknown kernel set %s\n", core);
        return 2;
    }
    const char *set = getenv("OPENBLAS_CORETYPE");
    if (!native && (set == NULL || strcmp(set, core) != 0)) {
        fprintf(stderr, "dt_coretype: OPENBLAS_CORETYPE must be %s in the environment, is %s\n",
                core, set != NULL ? set : "unset");
        return 2;
    }
    if (!native) {
        char *flags = cpu_flags();
        if (flags == NULL) {
            printf("skipped: %s: no /proc/cpuinfo flags to tell whether this CPU runs it\n", core);
            return SKIP;
        }
        char lacks[256] = "";
        for (int k = 0; need->flags[k] != NULL; k++)
            if (!has_flag(flags, need->flags[k]))
                snprintf(lacks + strlen(lacks), sizeof lacks - strlen(lacks), " %s",
                         need->flags[k]);
        free(flags);
        if (lacks[0] != '\0') {
            printf("skipped: OpenBLAS's %s kernels need what this CPU lacks:%s\n", core, lacks);
            return SKIP;
        }
    }
    const char *runs = dt_blas_core(); /* OpenBLAS loaded with OPENBLAS_CORETYPE already */
    if (runs == NULL) {
        if (!native) {
            printf("skipped: the BLAS is not OpenBLAS: it has no %s kernels\n", core);
            return SKIP;
        }
    } else if (!native && strcasecmp(runs, core) != 0) {
        printf("skipped: this OpenBLAS has no %s kernels (asked for them, it runs %s)\n", core,
               runs);
        return SKIP;
    } else if (native) {
        for (size_t i = 0; i < ncores; i++)
            if (strcasecmp(runs, needs[i].core) == 0) {
                printf("skipped: OpenBLAS picks %s here, which the %s variant runs\n", runs,
                       needs[i].core);
                return SKIP;
            }
    }
    if (runs != NULL)
        printf("OpenBLAS %s kernels%s\n", runs, native ? " (its own choice)" : "");
    fflush(stdout);
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    return 2;
}
