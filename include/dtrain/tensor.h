/* tensor.h — the shape of one sample, shared by the data sets (data.h) and the layers
 * (nn.h). Kernels themselves take raw pointers and shape integers (src/tensor). */
#ifndef DTRAIN_TENSOR_H
#define DTRAIN_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_MAX_DIMS 4

/* A per-sample shape: ndim in 1..3 (F), (C, H, W). */
typedef struct dt_shape {
    int ndim;
    int64_t d[DT_MAX_DIMS];
} dt_shape;

/* Elements in one sample of this shape. */
DT_API int64_t dt_shape_numel(const dt_shape *s);
/* "(1, 28, 28)" into buf; returns buf. */
DT_API const char *dt_shape_str(const dt_shape *s, char *buf, size_t nbytes);

#ifdef __cplusplus
}
#endif
#endif
