/* blas_core.h — starts the program again with the OpenBLAS kernels its CPU can run, when
 * OpenBLAS's own detection fell back to older ones (dt_blas_better_core in blas.h). Shared
 * by the dtrain command and the benchmark programs, which must measure what dtrain runs. */
#ifndef DT_CLI_BLAS_CORE_H
#define DT_CLI_BLAS_CORE_H

/* Call first in main(), before MPI_Init and before any thread starts. When a better kernel
 * set is known, sets OPENBLAS_CORETYPE to it, records OpenBLAS's own choice in
 * DT_BLAS_DETECTED, and replaces the process with itself (same pid, arguments and
 * environment otherwise, so a launcher still sees its rank). Returns when nothing is to be
 * done or the exec failed; the program then goes on with the kernels it has. */
void dt_cli_blas_reexec(char **argv);

/* "OpenBLAS SkylakeX kernels" or "OpenBLAS SkylakeX kernels (detected: Prescott)" into buf,
 * or "" when the BLAS is not OpenBLAS. */
void dt_cli_blas_describe(char *buf, unsigned long n);

#endif
