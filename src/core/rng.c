/* rng.c — Philox4x32-10 wrappers and the (seed, epoch) permutation. */
#include "dtrain/rng.h"

#include <Random123/philox.h>

void dt_philox(uint64_t seed, uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
               uint32_t out[4])
{
    philox4x32_ctr_t ctr = {{c0, c1, c2, c3}};
    philox4x32_key_t key = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    philox4x32_ctr_t r = philox4x32(ctr, key);
    out[0] = r.v[0];
    out[1] = r.v[1];
    out[2] = r.v[2];
    out[3] = r.v[3];
}

void dt_rng_permutation(uint64_t seed, uint64_t epoch, int64_t n, int64_t *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = i;
    /* Fisher-Yates from the top; swap partner j uniform in [0, i] from 64 random bits
     * (the modulo bias is below 2^-32 for any data set that fits in memory). */
    for (int64_t i = n - 1; i > 0; i--) {
        uint32_t w[4];
        dt_philox(seed, (uint32_t)epoch, (uint32_t)(epoch >> 32), (uint32_t)i,
                  ((uint32_t)DT_RNG_STREAM_SHUFFLE << 24) | (uint32_t)((uint64_t)i >> 32), w);
        uint64_t r = ((uint64_t)w[0] << 32) | w[1];
        int64_t j = (int64_t)(r % (uint64_t)(i + 1));
        int64_t t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}
