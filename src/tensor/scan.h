/* scan.h — is every float of a buffer finite? The non-finite guard's pass over a step's
 * gradients (internal). */
#ifndef DT_TENSOR_SCAN_H
#define DT_TENSOR_SCAN_H

#include <stddef.h>

#include "core/pool.h"

/* 1 when some g[0..n) is NaN or infinite, else 0; split between `team`'s members from a
 * million elements (NULL: the calling thread). Allocates nothing. */
int dt_any_nonfinite(const float *g, size_t n, dt_pool *team);

#endif
