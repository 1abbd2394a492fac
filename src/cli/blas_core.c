/* blas_core.c — see blas_core.h. OpenBLAS chooses its kernels in a constructor that runs
 * before main(), reading OPENBLAS_CORETYPE; changing the choice means starting again. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/blas_core.h"
#include "dtrain/train.h"

void dt_cli_blas_reexec(char **argv)
{
    const char *core = dt_blas_better_core();
    const char *detected = dt_blas_core();
    if (core == NULL || detected == NULL)
        return;
    /* OPENBLAS_CORETYPE set makes dt_blas_better_core() NULL in the new image: no loop. */
    if (setenv("DT_BLAS_DETECTED", detected, 1) != 0 || setenv("OPENBLAS_CORETYPE", core, 1) != 0)
        return;
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* The exec failed (no /proc, say): go on with OpenBLAS's choice, which the start-up
     * line names. */
    unsetenv("OPENBLAS_CORETYPE");
}

void dt_cli_blas_describe(char *buf, unsigned long n)
{
    const char *core = dt_blas_core(), *detected = getenv("DT_BLAS_DETECTED");
    if (core == NULL)
        snprintf(buf, n, "%s", "");
    else if (detected != NULL && getenv("OPENBLAS_CORETYPE") != NULL)
        snprintf(buf, n, "OpenBLAS %s kernels (it detected %s)", core, detected);
    else
        snprintf(buf, n, "OpenBLAS %s kernels", core);
}
