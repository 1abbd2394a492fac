/* blas.h — the few things dtrain asks of the BLAS library beyond CBLAS itself: its thread
 * count and, for OpenBLAS, which kernels it runs. Part of the core layer (src/core/blas.c):
 * any CBLAS links, and these degrade to "not available" without OpenBLAS. */
#ifndef DTRAIN_BLAS_H
#define DTRAIN_BLAS_H

#include "dtrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the BLAS library's thread count when it exposes one (OpenBLAS); returns 1 if it did. */
DT_API int dt_blas_set_threads(int n);
/* The kernel set OpenBLAS chose for this CPU ("SkylakeX", "Haswell", "Prescott"...), or NULL
 * when the BLAS is not OpenBLAS. Static string, owned by OpenBLAS. */
DT_API const char *dt_blas_core(void);
/* The OPENBLAS_CORETYPE this process should have been started with, or NULL when OpenBLAS's
 * own choice is right. Non-NULL only when OpenBLAS fell back to a kernel set without AVX2 on
 * a CPU that has AVX2 and FMA ("Haswell") or AVX-512 ("SkylakeX"), which happens on CPU
 * models newer than the installed OpenBLAS (0.3.21 runs Emerald Rapids with its SSE3
 * kernels, 2-4x slower), and never when OPENBLAS_CORETYPE is set. OpenBLAS reads that
 * variable only when it loads: a program sets it and starts itself again (the dtrain command
 * does, before anything else), or its user exports it. Static string. */
DT_API const char *dt_blas_better_core(void);

#ifdef __cplusplus
}
#endif
#endif
