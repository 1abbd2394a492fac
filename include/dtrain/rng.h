/* rng.h — counter-based random numbers (Philox4x32-10 from Random123).
 *
 * Nothing here has state: every random number is a pure function of (seed, a stream and
 * a position), so a shuffle depends only on (seed, epoch), a dropout mask only on (seed,
 * epoch, the sample's position in the epoch's permutation, layer, element) and an
 * initial weight only on (seed, layer, element). Resumed runs, accumulation and any
 * number of ranks therefore draw exactly the same numbers as one uninterrupted process.
 * Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011. */
#ifndef DTRAIN_RNG_H
#define DTRAIN_RNG_H

#include <stdint.h>

#include "dtrain/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Streams keep the uses of one seed apart. */
typedef enum dt_rng_stream {
    DT_RNG_STREAM_SHUFFLE = 1,
    DT_RNG_STREAM_DROPOUT = 2,
    DT_RNG_STREAM_INIT = 3,
    DT_RNG_STREAM_DATA = 4, /* synthetic data sets */
    DT_RNG_STREAM_TEST = 5  /* reserved for tests and benchmarks */
    /* 6: PowerSGD's first factors (src/parallel/compress.c); 7: federated partitions and
     * client sampling (fed.h, DT_RNG_STREAM_FED); 8: the trainer's step jitter
     * (dt_trainer_set_jitter); 9: text training windows (text.h, DT_RNG_STREAM_TEXT); 10:
     * sampling in generation (generate.h, DT_RNG_STREAM_SAMPLE). */
} dt_rng_stream;

/* Four independent 32-bit words for the counter (c0, c1, c2, c3) under key `seed`. */
DT_API void dt_philox(uint64_t seed, uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                      uint32_t out[4]);

/* Maps a word to a float in [0, 1) with 24 random bits (every value exactly a float). */
static inline float dt_u01f(uint32_t x)
{
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}

/* Maps a word to a double in [0, 1) with 32 random bits. */
static inline double dt_u01d(uint32_t x)
{
    return (double)x * (1.0 / 4294967296.0);
}

/* Fills out[0..n) with the permutation of 0..n-1 for (seed, epoch): Fisher-Yates driven
 * by Philox. The same arguments give the same permutation on every rank and machine. */
DT_API void dt_rng_permutation(uint64_t seed, uint64_t epoch, int64_t n, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
