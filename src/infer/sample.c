/* sample.c — the next token from a row of logits (generate.h): greedy at temperature 0,
 * otherwise softmax(logits / temperature) over the top_k largest, drawn by a Philox word
 * keyed by (seed, draw number), so one seed gives the same tokens on every run and machine.
 *
 * The kept ids are sorted by logit (ties to the lower id) with insertion into the first
 * top_k places of `order`, O(V top_k) and no allocation; the probabilities are summed in
 * double in that order and the draw u in [0, 1) (53 bits) picks the first id whose running
 * sum exceeds u times the total. */
#include <math.h>
#include <stdint.h>

#include "dtrain/generate.h"
#include "dtrain/rng.h"

dt_status dt_sample_check(const dt_sample_options *o, int64_t vocab)
{
    if (!(o->temperature >= 0.0) || isinf(o->temperature))
        return dt_fail(DT_ERR_INVALID,
                       "temperature: %g must be a number >= 0 (0 picks the largest logit)",
                       o->temperature);
    if (o->top_k < 1 || o->top_k > vocab)
        return dt_fail(DT_ERR_INVALID, "top_k: %lld must be in [1, %lld] (the vocabulary)",
                       (long long)o->top_k, (long long)vocab);
    return DT_OK;
}

/* a ranks before b: a larger logit, or an equal one with a lower id. */
static int before(const float *l, int32_t a, int32_t b)
{
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

int32_t dt_sample(const float *logits, int64_t V, const dt_sample_options *o, uint64_t draw,
                  int32_t *order)
{
    if (o->temperature == 0.0) {
        int32_t best = 0;
        for (int32_t v = 1; v < (int32_t)V; v++)
            if (logits[v] > logits[best])
                best = v;
        return best;
    }
    /* order[0..k) = the k best ids, best first. */
    const int64_t k = o->top_k;
    int64_t kept = 0;
    for (int32_t v = 0; v < (int32_t)V; v++) {
        if (kept == k && !before(logits, v, order[k - 1]))
            continue;
        int64_t at = kept < k ? kept++ : k - 1;
        while (at > 0 && before(logits, v, order[at - 1])) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = v;
    }
    const double top = logits[order[0]], inv_t = 1.0 / o->temperature;
    double total = 0.0;
    for (int64_t i = 0; i < kept; i++)
        total += exp(((double)logits[order[i]] - top) * inv_t);
    uint32_t w[4];
    dt_philox(o->seed, (uint32_t)draw, (uint32_t)(draw >> 32), (uint32_t)DT_RNG_STREAM_SAMPLE << 24,
              0, w);
    const double u = (double)(((uint64_t)w[0] << 21) | (w[1] >> 11)) * 0x1p-53;
    const double target = u * total;
    double run = 0.0;
    for (int64_t i = 0; i < kept; i++) {
        run += exp(((double)logits[order[i]] - top) * inv_t);
        if (run > target)
            return order[i];
    }
    return order[kept - 1]; /* u * total rounded up to the total */
}
