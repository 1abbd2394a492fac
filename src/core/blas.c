/* blas.c — control of the BLAS library through weak symbols, so that dtrain links against
 * any CBLAS and simply skips what the library does not offer: the thread count, and the
 * name of the kernel set OpenBLAS picked for this CPU.
 *
 * Why the kernel matters: OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels from
 * the CPU model when it loads. A model newer than the library falls back to an old kernel
 * set: OpenBLAS 0.3.21 runs Emerald Rapids (family 6, model 207) with "Prescott" (SSE3)
 * kernels, and the ConvNet trained 3.8x slower than with the SkylakeX kernels the CPU can
 * run (206 against 784 samples/s at 1 thread, measured here). The choice is made before
 * main() runs, from OPENBLAS_CORETYPE; dt_blas_better_core() tells a program which value to
 * set before starting itself again (cli/blas_core.c does that for dtrain). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dtrain/blas.h"

#if defined(__GNUC__)
extern void openblas_set_num_threads(int num_threads) __attribute__((weak));
extern char *openblas_get_corename(void) __attribute__((weak));

int dt_blas_set_threads(int n)
{
    if (openblas_set_num_threads == NULL || n < 1)
        return 0;
    openblas_set_num_threads(n);
    return 1;
}

const char *dt_blas_core(void)
{
    return openblas_get_corename != NULL ? openblas_get_corename() : NULL;
}
#else
int dt_blas_set_threads(int n)
{
    (void)n;
    return 0;
}

const char *dt_blas_core(void)
{
    return NULL;
}
#endif

/* OpenBLAS's x86-64 kernel sets that use neither AVX2 nor AVX-512: what its detection
 * falls back to on a model it does not know. */
static int pre_avx2(const char *core)
{
    static const char *const old[] = {
        "prescott",     "core2",     "penryn",     "dunnington", "nehalem",    "sandybridge",
        "atom",         "katmai",    "coppermine", "northwood",  "banias",     "opteron",
        "opteron_sse3", "barcelona", "bobcat",     "bulldozer",  "piledriver", "steamroller",
        "excavator",    "nano",      "generic",    "unknown"};
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
        if (strcasecmp(core, old[i]) == 0)
            return 1;
    return 0;
}

const char *dt_blas_better_core(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    const char *core = dt_blas_core();
    if (core == NULL || getenv("OPENBLAS_CORETYPE") != NULL || !pre_avx2(core))
        return NULL;
    /* __builtin_cpu_supports also checks that the OS saves the vector registers. */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}
