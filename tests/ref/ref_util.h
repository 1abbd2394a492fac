/* ref_util.h — reading the committed PyTorch reference files (the tests/ref safetensors files,
 * written by gen_refs.py) through dt_st_open, with failures that name the file, the tensor
 * and what was expected. */
#ifndef DT_REF_UTIL_H
#define DT_REF_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/optim.h"
#include "dtrain/safetensors.h"

/* Opens tests/ref/<name> from the source tree; fails the test when it cannot. */
dt_st_file *ru_open(const char *name);

/* The tensor "<prefix>.<suffix>" ("<prefix>" when suffix is NULL), which must exist, hold `dtype`
 * and have exactly the shape shape[0..ndim); fails the test otherwise. */
const dt_st_tensor *ru_tensor(const dt_st_file *f, const char *prefix, const char *suffix,
                              dt_st_dtype dtype, int ndim, const int64_t *shape);
/* Elements of a tensor. */
size_t ru_count(const dt_st_tensor *t);

/* Copies of a tensor's data (malloc'ed; the caller frees). F64 only for the first two;
 * ru_f32 fails the test unless every value is exactly a float (gen_refs.py promises it
 * for inputs, parameters and output gradients). */
double *ru_f64(const dt_st_tensor *t);
float *ru_f32(const dt_st_tensor *t);
/* I64 labels as int32. */
int32_t *ru_i32(const dt_st_tensor *t);

/* The case's __metadata__ description must equal `want` (the C table and gen_refs.py
 * describe the same case). */
void ru_check_meta(const dt_st_file *f, const char *name, const char *want);

/* gen_refs.py's description of a schedule, formatted from a dt_schedule. */
void ru_sched_desc(const dt_schedule *s, char *buf, size_t nbytes);
/* A schedule with every field given. */
dt_schedule ru_sched(dt_sched_kind kind, double lr, int64_t warmup_steps, double warmup_start,
                     int64_t step_size, double gamma, int64_t total_steps, double min_lr);

#endif
