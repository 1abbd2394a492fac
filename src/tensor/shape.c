/* shape.c — per-sample shapes (tensor.h). */
#include <stdio.h>

#include "dtrain/tensor.h"

int64_t dt_shape_numel(const dt_shape *s)
{
    DT_ASSERT(s != NULL && s->ndim >= 0 && s->ndim <= DT_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= s->d[i];
    return n;
}

const char *dt_shape_str(const dt_shape *s, char *buf, size_t nbytes)
{
    DT_ASSERT(s != NULL && buf != NULL && nbytes > 0);
    DT_ASSERT(s->ndim >= 0 && s->ndim <= DT_MAX_DIMS);
    size_t used = 0;
    buf[0] = '\0';
    int n = snprintf(buf, nbytes, "(");
    used = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < s->ndim && used < nbytes; i++) {
        n = snprintf(buf + used, nbytes - used, "%s%lld", i > 0 ? ", " : "", (long long)s->d[i]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used < nbytes)
        snprintf(buf + used, nbytes - used, ")");
    return buf;
}
