/* fed_partition.c — federated partitions of a training set and the clients of a round
 * (include/dtrain/fed.h): pure functions of their arguments and a seed.
 *
 * Every random number is Philox under the tag DT_RNG_STREAM_FED (7), with a "use" number
 * beside it so that no two draws share a counter:
 *
 *   permutations   dt_rng_permutation(seed, epoch = 7 << 56 | use << 48 | index, ...)
 *                  use 1: the iid order of the samples (index 0); use 2: the deal of the
 *                  shards (index 0); use 3: class k's order in the Dirichlet split (index
 *                  k). dt_rng_permutation tags its counters with the shuffle stream; a
 *                  training epoch (below 2^56) has 0 in the top byte of the epoch's high
 *                  word, where these have 7, so no training shuffle draws the same numbers.
 *   gamma variates dt_philox(seed, index mod 2^32, index div 2^32, attempt, 7 << 24 | 4)
 *   round sampling dt_philox(seed, step, round mod 2^32, round div 2^32, 7 << 24 | 5)
 *
 * Gamma variates follow Marsaglia and Tsang, "A simple method for generating gamma
 * variables", ACM TOMS 26(3), 2000: for shape a >= 1, d = a - 1/3, c = 1/sqrt(9d); draw
 * x ~ N(0, 1) and u ~ U(0, 1]; with v = (1 + c x)^3 > 0, accept d v when
 * u < 1 - 0.0331 x^4 (the squeeze) or log u < x^2/2 + d (1 - v + log v); otherwise try
 * again. For a < 1 the boost the paper gives: Gamma(a) = Gamma(a + 1) U^(1/a). Each
 * attempt takes one Philox call: words 0 and 1 give x by Box and Muller ("A note on the
 * generation of random normal deviates", Ann. Math. Statist. 29, 1958; the cosine half),
 * word 2 gives u, and word 3 of attempt 0 gives the boost's U. Acceptance is above 0.95 for
 * every a >= 1, so the attempt counter never wraps in practice. The sampler returns the
 * logarithm, in which the Dirichlet normalises: a class's proportions are
 * exp(lg_c - max lg) / sum, so the largest is never 0 however small alpha makes the
 * variates (U^(1/a) underflows to 0 in double for a below about 0.03).
 *
 * Round sampling is Floyd's algorithm (Bentley and Floyd, "Programming pearls: a sample of
 * brilliance", CACM 30(9), 1987), the set-valued form of a partial Fisher-Yates shuffle:
 * every per_round-subset is equally likely, as with Fisher-Yates, but it needs no scratch
 * array of all clients, so dt_fed_sample allocates nothing and can run every round. */
#include "dtrain/fed.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/rng.h"

enum {
    FED_USE_IID = 1,
    FED_USE_SHARDS = 2,
    FED_USE_CLASS = 3,
    FED_USE_GAMMA = 4,
    FED_USE_SAMPLE = 5
};

static const char fed_allowed[] =
    "iid, shards:N (an integer N >= 1) or dirichlet:ALPHA (a finite ALPHA >= 1e-300)";

/* ---- the partition spec ---------------------------------------------------------------- */

/* Reads the whole of `s` as an integer >= 1 that fits an int; 0 when it is not one. */
static int parse_count(const char *s)
{
    if (*s < '0' || *s > '9')
        return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || errno != 0 || v < 1 || v > INT32_MAX)
        return 0;
    return (int)v;
}

/* Reads the whole of `s` as a finite alpha >= DT_FED_ALPHA_MIN; 0 when it is not one. */
static double parse_alpha(const char *s)
{
    if (!((*s >= '0' && *s <= '9') || *s == '.'))
        return 0.0;
    char *end;
    double v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v) || !(v >= DT_FED_ALPHA_MIN))
        return 0.0;
    return v;
}

dt_status dt_fed_partition_parse(const char *text, dt_fed_partition *out)
{
    DT_ASSERT(text != NULL && out != NULL);
    dt_fed_partition p = {.kind = DT_FED_IID, .shards_per_client = 0, .alpha = 0.0};
    if (strcmp(text, "iid") == 0) {
        *out = p;
        return DT_OK;
    }
    if (strncmp(text, "shards:", 7) == 0) {
        p.kind = DT_FED_SHARDS;
        p.shards_per_client = parse_count(text + 7);
        if (p.shards_per_client >= 1) {
            *out = p;
            return DT_OK;
        }
    } else if (strncmp(text, "dirichlet:", 10) == 0) {
        p.kind = DT_FED_DIRICHLET;
        p.alpha = parse_alpha(text + 10);
        if (p.alpha > 0.0) {
            *out = p;
            return DT_OK;
        }
    }
    return dt_fail(DT_ERR_INVALID, "fed: partition \"%s\" is not one of %s", text, fed_allowed);
}

void dt_fed_partition_format(const dt_fed_partition *p, char *buf, size_t nbytes)
{
    DT_ASSERT(p != NULL && buf != NULL && nbytes >= 1);
    switch (p->kind) {
    case DT_FED_SHARDS:
        snprintf(buf, nbytes, "shards:%d", p->shards_per_client);
        return;
    case DT_FED_DIRICHLET: {
        /* The shortest %g that reads back as the same double (17 digits always do),
         * starting from the integer part's digits so that 100 prints as "100", not
         * "1e+02". */
        const double mag = fabs(p->alpha);
        int digits = mag >= 1.0 && mag < 1e17 ? (int)floor(log10(mag)) + 1 : 1;
        for (; digits <= 17; digits++) {
            char num[32];
            snprintf(num, sizeof num, "%.*g", digits, p->alpha);
            if (strtod(num, NULL) == p->alpha || digits == 17) {
                snprintf(buf, nbytes, "dirichlet:%s", num);
                return;
            }
        }
        return;
    }
    case DT_FED_IID:
    default:
        snprintf(buf, nbytes, "iid");
        return;
    }
}

/* ---- random numbers -------------------------------------------------------------------- */

/* The epoch under which dt_rng_permutation draws the permutation (use, index). */
static uint64_t fed_epoch(uint32_t use, uint64_t index)
{
    return (uint64_t)DT_RNG_STREAM_FED << 56 | (uint64_t)use << 48 | index;
}

/* A word as a double in (0, 1], so that its logarithm is finite (>= -32 ln 2). */
static double open_u01(uint32_t w)
{
    return ((double)w + 1.0) * (1.0 / 4294967296.0);
}

/* log of a Gamma(alpha, 1) variate for (seed, index); the method is in the file's header. */
static double gamma_log(double alpha, uint64_t seed, uint64_t index)
{
    const int boost = alpha < 1.0;
    const double a = boost ? alpha + 1.0 : alpha;
    const double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    const uint32_t c3 = (uint32_t)DT_RNG_STREAM_FED << 24 | FED_USE_GAMMA;
    const double two_pi = 6.283185307179586476925286766559;
    double boost_log = 0.0;
    for (uint32_t attempt = 0;; attempt++) {
        uint32_t w[4];
        dt_philox(seed, (uint32_t)index, (uint32_t)(index >> 32), attempt, c3, w);
        if (attempt == 0 && boost)
            boost_log = log(open_u01(w[3])) / alpha;
        const double x = sqrt(-2.0 * log(open_u01(w[0]))) * cos(two_pi * dt_u01d(w[1]));
        const double t = 1.0 + c * x;
        if (t <= 0.0)
            continue;
        const double v = t * t * t, u = open_u01(w[2]), x2 = x * x;
        if (u < 1.0 - 0.0331 * x2 * x2 || log(u) < 0.5 * x2 + d * (1.0 - v + log(v)))
            return log(d) + log(v) + boost_log;
    }
}

double dt_fed_gamma(double alpha, uint64_t seed, uint64_t index)
{
    DT_ASSERT(alpha > 0.0 && isfinite(alpha));
    return exp(gamma_log(alpha, seed, index));
}

/* q (clients) = class k's proportions ~ Dir(alpha, ..., alpha): the normalised gamma
 * variates of indices k * clients + c, normalised in logarithms (see the header). */
static void dirichlet_draw(double alpha, uint64_t seed, int64_t k, int clients, double *q)
{
    double top = -DBL_MAX;
    for (int c = 0; c < clients; c++) {
        q[c] = gamma_log(alpha, seed, (uint64_t)k * (uint64_t)clients + (uint64_t)c);
        if (q[c] > top)
            top = q[c];
    }
    double sum = 0.0;
    for (int c = 0; c < clients; c++) {
        q[c] = exp(q[c] - top);
        sum += q[c];
    }
    for (int c = 0; c < clients; c++)
        q[c] /= sum;
}

/* ---- partitions ------------------------------------------------------------------------ */

/* Where part `part` of `total` items cut into `parts` starts: sizes differ by at most 1,
 * the first total mod parts one larger. */
static int64_t part_start(int64_t total, int64_t parts, int64_t part)
{
    const int64_t q = total / parts, r = total % parts;
    return part * q + (part < r ? part : r);
}

static dt_status alloc_i64(int64_t count, const char *what, int64_t **out)
{
    size_t nbytes;
    dt_status st = dt_mul_size((size_t)count, sizeof(int64_t), &nbytes);
    if (st != DT_OK)
        return dt_fail(st, "fed: %s: %lld entries overflow the address space", what,
                       (long long)count);
    void *mem = NULL;
    st = dt_alloc(nbytes, what, &mem);
    *out = mem;
    return st;
}

/* sorted (n) = the samples ordered by (label, index), a counting sort; start (K + 1) =
 * where each class begins in it, start[K] = n. */
static void sort_by_label(const int32_t *labels, int64_t n, int64_t num_classes, int64_t *sorted,
                          int64_t *start)
{
    memset(start, 0, (size_t)(num_classes + 1) * sizeof *start);
    for (int64_t i = 0; i < n; i++)
        start[labels[i] + 1]++;
    for (int64_t k = 0; k < num_classes; k++)
        start[k + 1] += start[k];
    /* Placing advances start[k] to class k's end, which is class k+1's start: shift back. */
    for (int64_t i = 0; i < n; i++)
        sorted[start[labels[i]]++] = i;
    for (int64_t k = num_classes; k > 0; k--)
        start[k] = start[k - 1];
    start[0] = 0;
}

static dt_status assign_iid(int64_t n, int clients, uint64_t seed, int64_t *client_of)
{
    dt_status st = DT_OK;
    int64_t *perm = NULL;
    DT_TRY(alloc_i64(n, "fed: iid order", &perm));
    dt_rng_permutation(seed, fed_epoch(FED_USE_IID, 0), n, perm);
    for (int c = 0; c < clients; c++)
        for (int64_t pos = part_start(n, clients, c); pos < part_start(n, clients, c + 1); pos++)
            client_of[perm[pos]] = c;
fail:
    dt_free(perm);
    return st;
}

static dt_status assign_shards(const int32_t *labels, int64_t n, int64_t num_classes, int clients,
                               int per_client, uint64_t seed, int64_t *client_of)
{
    dt_status st = DT_OK;
    int64_t *sorted = NULL, *start = NULL, *deal = NULL;
    const int64_t shards = (int64_t)clients * per_client;
    DT_TRY(alloc_i64(n, "fed: samples by label", &sorted));
    DT_TRY(alloc_i64(num_classes + 1, "fed: class starts", &start));
    DT_TRY(alloc_i64(shards, "fed: shard deal", &deal));
    sort_by_label(labels, n, num_classes, sorted, start);
    dt_rng_permutation(seed, fed_epoch(FED_USE_SHARDS, 0), shards, deal);
    for (int64_t j = 0; j < shards; j++) {
        const int64_t c = j / per_client, s = deal[j];
        for (int64_t pos = part_start(n, shards, s); pos < part_start(n, shards, s + 1); pos++)
            client_of[sorted[pos]] = c;
    }
fail:
    dt_free(deal);
    dt_free(start);
    dt_free(sorted);
    return st;
}

/* Class k's nk samples, members[order[pos]] for pos in [0, nk), go to the clients by the
 * floors of q's cumulative sums times nk; the last client's end is nk exactly. */
static void split_class(const int64_t *members, const int64_t *order, int64_t nk, const double *q,
                        int clients, int64_t *client_of)
{
    double cum = 0.0;
    int64_t lo = 0;
    for (int c = 0; c < clients; c++) {
        int64_t hi = nk;
        if (c + 1 < clients) {
            cum += q[c];
            const double f = floor(cum * (double)nk);
            hi = f < (double)lo ? lo : f > (double)nk ? nk : (int64_t)f;
        }
        for (int64_t pos = lo; pos < hi; pos++)
            client_of[members[order[pos]]] = c;
        lo = hi;
    }
}

static dt_status assign_dirichlet(const int32_t *labels, int64_t n, int64_t num_classes,
                                  int clients, double alpha, uint64_t seed, int64_t *client_of)
{
    dt_status st = DT_OK;
    int64_t *sorted = NULL, *start = NULL, *order = NULL;
    double *q = NULL;
    DT_TRY(alloc_i64(n, "fed: samples by label", &sorted));
    DT_TRY(alloc_i64(num_classes + 1, "fed: class starts", &start));
    DT_TRY(alloc_i64(n, "fed: class order", &order));
    void *mem = NULL;
    DT_TRY(dt_alloc((size_t)clients * sizeof *q, "fed: dirichlet proportions", &mem));
    q = mem;
    sort_by_label(labels, n, num_classes, sorted, start);
    for (int64_t k = 0; k < num_classes; k++) {
        const int64_t nk = start[k + 1] - start[k];
        if (nk == 0)
            continue;
        dirichlet_draw(alpha, seed, k, clients, q);
        dt_rng_permutation(seed, fed_epoch(FED_USE_CLASS, (uint64_t)k), nk, order);
        split_class(sorted + start[k], order, nk, q, clients, client_of);
    }
fail:
    dt_free(q);
    dt_free(order);
    dt_free(start);
    dt_free(sorted);
    return st;
}

/* Gives every empty client, lowest-numbered first, the last sample of the largest client
 * (lowest-numbered among equals); returns the moves. The donor keeps >= 2 samples: while a
 * client is empty the other clients - 1 hold n >= clients samples. */
static int64_t fill_empty(int64_t n, int clients, int64_t *client_of, int64_t *counts)
{
    int64_t moved = 0;
    for (int e = 0; e < clients; e++) {
        if (counts[e] > 0)
            continue;
        int big = 0;
        for (int c = 1; c < clients; c++)
            if (counts[c] > counts[big])
                big = c;
        int64_t i = n - 1;
        while (client_of[i] != big)
            i--;
        client_of[i] = e;
        counts[big]--;
        counts[e]++;
        moved++;
    }
    return moved;
}

/* The argument checks of dt_fed_assign that concern its inputs' values. */
static dt_status check_assign(const dt_fed_partition *p, const int32_t *labels, int64_t n,
                              int64_t num_classes, int clients)
{
    if (clients < 1 || clients > n)
        return dt_fail(DT_ERR_INVALID,
                       "fed: %d clients for %lld samples: every client needs a sample", clients,
                       (long long)n);
    if (p->kind == DT_FED_IID)
        return DT_OK;
    if (p->kind == DT_FED_SHARDS && p->shards_per_client < 1)
        return dt_fail(DT_ERR_INVALID, "fed: shards:%d: shards per client must be >= 1",
                       p->shards_per_client);
    if (p->kind == DT_FED_DIRICHLET && !(p->alpha >= DT_FED_ALPHA_MIN && isfinite(p->alpha)))
        return dt_fail(DT_ERR_INVALID, "fed: dirichlet:%g: alpha must be finite and >= 1e-300",
                       p->alpha);
    if (p->kind != DT_FED_SHARDS && p->kind != DT_FED_DIRICHLET)
        return dt_fail(DT_ERR_INVALID, "fed: unknown partition kind %d", (int)p->kind);
    const char *name = p->kind == DT_FED_SHARDS ? "shards" : "dirichlet";
    if (labels == NULL)
        return dt_fail(DT_ERR_INVALID, "fed: the %s partition needs class labels", name);
    if (num_classes < 1 || num_classes > (int64_t)INT32_MAX + 1)
        return dt_fail(DT_ERR_INVALID, "fed: %s: num_classes must be in [1, 2^31], got %lld", name,
                       (long long)num_classes);
    for (int64_t i = 0; i < n; i++)
        if (labels[i] < 0 || labels[i] >= num_classes)
            return dt_fail(DT_ERR_INVALID, "fed: %s: label %d of sample %lld is not in [0, %lld)",
                           name, (int)labels[i], (long long)i, (long long)num_classes);
    if (p->kind == DT_FED_SHARDS && (int64_t)clients * p->shards_per_client > n)
        return dt_fail(DT_ERR_INVALID,
                       "fed: shards:%d over %d clients makes %lld shards for %lld samples: "
                       "every shard needs a sample",
                       p->shards_per_client, clients, (long long)clients * p->shards_per_client,
                       (long long)n);
    return DT_OK;
}

dt_status dt_fed_assign(const dt_fed_partition *p, const int32_t *labels, int64_t n,
                        int64_t num_classes, int clients, uint64_t seed, int64_t *client_of,
                        int64_t *counts, int64_t *moved)
{
    DT_ASSERT(p != NULL && n >= 0 && client_of != NULL && counts != NULL);
    dt_status st = DT_OK;
    DT_TRY(check_assign(p, labels, n, num_classes, clients));
    if (p->kind == DT_FED_IID)
        DT_TRY(assign_iid(n, clients, seed, client_of));
    else if (p->kind == DT_FED_SHARDS)
        DT_TRY(
            assign_shards(labels, n, num_classes, clients, p->shards_per_client, seed, client_of));
    else
        DT_TRY(assign_dirichlet(labels, n, num_classes, clients, p->alpha, seed, client_of));
    memset(counts, 0, (size_t)clients * sizeof *counts);
    for (int64_t i = 0; i < n; i++)
        counts[client_of[i]]++;
    /* Only the Dirichlet split can leave a client empty: iid parts and shards are >= 1. */
    const int64_t fills = fill_empty(n, clients, client_of, counts);
    if (moved != NULL)
        *moved = fills;
fail:
    return st;
}

void dt_fed_histogram(const int64_t *client_of, const int32_t *labels, int64_t n,
                      int64_t num_classes, int clients, int64_t *hist)
{
    DT_ASSERT(client_of != NULL && labels != NULL && hist != NULL);
    DT_ASSERT(n >= 0 && num_classes >= 1 && clients >= 1);
    memset(hist, 0, (size_t)clients * (size_t)num_classes * sizeof *hist);
    for (int64_t i = 0; i < n; i++) {
        DT_ASSERT(client_of[i] >= 0 && client_of[i] < clients);
        DT_ASSERT(labels[i] >= 0 && labels[i] < num_classes);
        hist[client_of[i] * num_classes + labels[i]]++;
    }
}

/* ---- sampling a round ------------------------------------------------------------------ */

void dt_fed_sample(int clients, int per_round, uint64_t seed, int64_t round, int *out)
{
    DT_ASSERT(out != NULL && per_round >= 1 && per_round <= clients && round >= 0);
    const uint32_t c3 = (uint32_t)DT_RNG_STREAM_FED << 24 | FED_USE_SAMPLE;
    /* Floyd: for j = clients - per_round .. clients - 1, t uniform in [0, j]; take t, or j
     * when t is taken already. out[0..have) stays sorted, so membership is a binary search
     * and j, larger than everything taken, always goes at the end. */
    int have = 0;
    for (int j = clients - per_round; j < clients; j++) {
        uint32_t w[4];
        dt_philox(seed, (uint32_t)j, (uint32_t)(uint64_t)round, (uint32_t)((uint64_t)round >> 32),
                  c3, w);
        /* 64 random bits modulo j + 1: the bias is below 2^-32. */
        const int t = (int)((((uint64_t)w[0] << 32) | w[1]) % ((uint64_t)j + 1));
        int lo = 0, hi = have;
        while (lo < hi) {
            const int mid = lo + (hi - lo) / 2;
            if (out[mid] < t)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < have && out[lo] == t) {
            out[have++] = j;
        } else {
            memmove(out + lo + 1, out + lo, (size_t)(have - lo) * sizeof *out);
            out[lo] = t;
            have++;
        }
    }
}

int64_t dt_fed_local_samples(int64_t samples, int64_t batch, int local_epochs, int64_t local_steps)
{
    if (samples <= 0 || batch <= 0)
        return 0;
    if (local_steps <= 0)
        return local_epochs > 0 ? (int64_t)local_epochs * samples : 0;
    const int64_t per_epoch = (samples + batch - 1) / batch;
    /* Whole epochs, then `rest` full batches (fewer than an epoch's: never its short one). */
    const int64_t rest = local_steps % per_epoch;
    return local_steps / per_epoch * samples + rest * batch;
}
