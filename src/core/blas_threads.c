/* blas_threads.c — sets OpenBLAS's thread count through a weak symbol, so that dtrain
 * links against any CBLAS and simply skips the call where the function does not exist. */
#include "dtrain/train.h"

#if defined(__GNUC__)
extern void openblas_set_num_threads(int num_threads) __attribute__((weak));

int dt_blas_set_threads(int n)
{
    if (openblas_set_num_threads == NULL || n < 1)
        return 0;
    openblas_set_num_threads(n);
    return 1;
}
#else
int dt_blas_set_threads(int n)
{
    (void)n;
    return 0;
}
#endif
