/* test_fed_partition.c — federated partitions and round sampling (include/dtrain/fed.h):
 * the partition spec's text, every sample on exactly one client, each kind's shape (iid
 * balanced, shards few labels, Dirichlet skew growing as alpha falls), purity in the seed,
 * the gamma sampler's distribution, and the clients of a round.
 *
 * Everything is deterministic given the seeds below, so no test can flake; each
 * statistical bound is also chosen loose enough (about 5 or more standard deviations, or
 * checked over thousands of other seeds) that another seed would pass it too. */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/fed.h"
#include "dtrain/rng.h"

enum { K = 10 };                        /* classes in every labelled test set */
enum { N_EVEN = 10000, N_ODD = 10007 }; /* 10 x 1000, and a prime with unequal classes */

/* 10 classes of 1000, interleaved (sample i has label i mod 10). */
static int32_t *labels_even(void)
{
    int32_t *lab = malloc(N_EVEN * sizeof *lab);
    assert_non_null(lab);
    for (int64_t i = 0; i < N_EVEN; i++)
        lab[i] = (int32_t)(i % K);
    return lab;
}

/* 10007 samples, class k holding about (k + 1)/55 of them (181 .. 1820), scattered: sample
 * i's rank (7919 i mod 10007, a permutation since 10007 is prime) picks its class. */
static int32_t *labels_odd(void)
{
    int32_t *lab = malloc(N_ODD * sizeof *lab);
    assert_non_null(lab);
    int64_t cum[K], s = 0;
    for (int k = 0; k < K; k++) {
        s += (int64_t)N_ODD * (k + 1) / 55;
        cum[k] = s;
    }
    cum[K - 1] = N_ODD;
    for (int64_t i = 0; i < N_ODD; i++) {
        const int64_t r = i * 7919 % N_ODD;
        int k = 0;
        while (r >= cum[k])
            k++;
        lab[i] = (int32_t)k;
    }
    return lab;
}

static void class_sizes(const int32_t *lab, int64_t n, int64_t *nk)
{
    memset(nk, 0, K * sizeof *nk);
    for (int64_t i = 0; i < n; i++)
        nk[lab[i]]++;
}

/* Every sample on one client in range, counts that recount client_of and add to n, and
 * no client empty. Prints the first violation. */
static void check_assignment(const char *what, const int64_t *client_of, const int64_t *counts,
                             int64_t n, int clients)
{
    int64_t *recount = calloc((size_t)clients, sizeof *recount);
    assert_non_null(recount);
    for (int64_t i = 0; i < n; i++) {
        if (client_of[i] < 0 || client_of[i] >= clients) {
            print_error("%s: sample %lld on client %lld, expected [0, %d)\n", what, (long long)i,
                        (long long)client_of[i], clients);
            fail();
        }
        recount[client_of[i]]++;
    }
    int64_t total = 0;
    for (int c = 0; c < clients; c++) {
        if (counts[c] != recount[c] || counts[c] < 1) {
            print_error("%s: client %d: counts says %lld, client_of holds %lld (expected >= 1)\n",
                        what, c, (long long)counts[c], (long long)recount[c]);
            fail();
        }
        total += counts[c];
    }
    free(recount);
    if (total != n) {
        print_error("%s: counts add to %lld, expected n = %lld\n", what, (long long)total,
                    (long long)n);
        fail();
    }
}

/* Runs dt_fed_assign on `spec` and checks the result; returns client_of (caller frees),
 * fills counts (clients) and *moved, or with moved NULL requires that nothing moved. */
static int64_t *assign(const char *spec, const int32_t *lab, int64_t n, int clients, uint64_t seed,
                       int64_t *counts, int64_t *moved)
{
    dt_fed_partition p;
    DT_ASSERT_OK(dt_fed_partition_parse(spec, &p));
    int64_t *client_of = malloc((size_t)n * sizeof *client_of);
    assert_non_null(client_of);
    int64_t mv = -1;
    DT_ASSERT_OK(dt_fed_assign(&p, lab, n, K, clients, seed, client_of, counts, &mv));
    check_assignment(spec, client_of, counts, n, clients);
    if (moved != NULL)
        *moved = mv;
    else
        assert_int_equal(mv, 0);
    return client_of;
}

/* ---- the spec ------------------------------------------------------------------------ */

static void test_parse_format(void **state)
{
    (void)state;
    static const char *const texts[] = {"iid",
                                        "shards:1",
                                        "shards:2",
                                        "shards:300",
                                        "dirichlet:0.1",
                                        "dirichlet:0.5",
                                        "dirichlet:100",
                                        "dirichlet:1e-3",
                                        "dirichlet:1e-300",
                                        "dirichlet:.25",
                                        "dirichlet:3.0000000000000004"};
    static const char *const canonical[] = {"iid",
                                            "shards:1",
                                            "shards:2",
                                            "shards:300",
                                            "dirichlet:0.1",
                                            "dirichlet:0.5",
                                            "dirichlet:100",
                                            "dirichlet:0.001",
                                            "dirichlet:1e-300",
                                            "dirichlet:0.25",
                                            "dirichlet:3.0000000000000004"};
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        dt_fed_partition p, q;
        char buf[DT_FED_PARTITION_TEXT_MAX];
        DT_ASSERT_OK(dt_fed_partition_parse(texts[t], &p));
        dt_fed_partition_format(&p, buf, sizeof buf);
        if (strcmp(buf, canonical[t]) != 0) {
            print_error("format(parse(\"%s\")): expected \"%s\", got \"%s\"\n", texts[t],
                        canonical[t], buf);
            fail();
        }
        DT_ASSERT_OK(dt_fed_partition_parse(buf, &q));
        assert_int_equal(q.kind, p.kind);
        assert_int_equal(q.shards_per_client, p.shards_per_client);
        assert_true(q.alpha == p.alpha);
    }
    dt_fed_partition p;
    DT_ASSERT_OK(dt_fed_partition_parse("shards:7", &p));
    assert_int_equal(p.kind, DT_FED_SHARDS);
    assert_int_equal(p.shards_per_client, 7);
    DT_ASSERT_OK(dt_fed_partition_parse("dirichlet:0.3", &p));
    assert_int_equal(p.kind, DT_FED_DIRICHLET);
    assert_true(p.alpha == 0.3);
    /* A 17-digit alpha with a 3-digit exponent, the longest text a valid alpha gives,
     * fits DT_FED_PARTITION_TEXT_MAX and reads back exactly; a short buffer truncates. */
    p.alpha = 1.2345678901234567e-300;
    char buf[DT_FED_PARTITION_TEXT_MAX], tiny[5];
    dt_fed_partition_format(&p, buf, sizeof buf);
    assert_int_equal(strlen(buf), strlen("dirichlet:1.2345678901234567e-300"));
    dt_fed_partition q;
    DT_ASSERT_OK(dt_fed_partition_parse(buf, &q));
    assert_true(q.alpha == p.alpha);
    dt_fed_partition_format(&p, tiny, sizeof tiny);
    assert_string_equal(tiny, "diri");
}

static void test_parse_refusals(void **state)
{
    (void)state;
    static const char *const bad[] = {"shards:0",
                                      "shards:-1",
                                      "shards:",
                                      "shards:2x",
                                      "shards: 2",
                                      "shards:+2",
                                      "shards:99999999999",
                                      "dirichlet:-1",
                                      "dirichlet:0",
                                      "dirichlet:nan",
                                      "dirichlet:inf",
                                      "dirichlet:",
                                      "dirichlet:1e-400",
                                      "dirichlet:0.5 ",
                                      "iid:3",
                                      "random",
                                      "",
                                      "IID"};
    for (size_t t = 0; t < sizeof bad / sizeof bad[0]; t++) {
        dt_fed_partition p = {.kind = DT_FED_SHARDS, .shards_per_client = 42, .alpha = 4.2};
        dt_error_clear();
        DT_ASSERT_STATUS(dt_fed_partition_parse(bad[t], &p), DT_ERR_INVALID);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[t]);
        DT_ASSERT_ERROR_HAS(quoted);
        DT_ASSERT_ERROR_HAS("iid, shards:N");
        DT_ASSERT_ERROR_HAS("dirichlet:ALPHA");
        /* A refused text leaves *out as it was. */
        assert_int_equal(p.kind, DT_FED_SHARDS);
        assert_int_equal(p.shards_per_client, 42);
        assert_true(p.alpha == 4.2);
    }
}

static void test_assign_errors(void **state)
{
    (void)state;
    int32_t lab[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    int64_t client_of[8], counts[9];
    const dt_fed_partition iid = {DT_FED_IID, 0, 0.0}, sh = {DT_FED_SHARDS, 3, 0.0},
                           dir = {DT_FED_DIRICHLET, 0, 0.5};
    DT_ASSERT_STATUS(dt_fed_assign(&iid, lab, 8, 3, 0, 1, client_of, counts, NULL), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("0 clients for 8 samples: every client needs a sample");
    DT_ASSERT_STATUS(dt_fed_assign(&iid, NULL, 8, 0, 9, 1, client_of, counts, NULL),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("9 clients for 8 samples: every client needs a sample");
    DT_ASSERT_STATUS(dt_fed_assign(&sh, NULL, 8, 3, 2, 1, client_of, counts, NULL), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("needs class labels");
    DT_ASSERT_STATUS(dt_fed_assign(&dir, NULL, 8, 3, 2, 1, client_of, counts, NULL),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("needs class labels");
    DT_ASSERT_STATUS(dt_fed_assign(&sh, lab, 8, 3, 3, 1, client_of, counts, NULL), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("9 shards for 8 samples");
    DT_ASSERT_STATUS(dt_fed_assign(&dir, lab, 8, 2, 2, 1, client_of, counts, NULL), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("label 2 of sample 2 is not in [0, 2)");
    DT_ASSERT_STATUS(dt_fed_assign(&dir, lab, 8, 0, 2, 1, client_of, counts, NULL), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("num_classes");
    const dt_fed_partition bad_alpha = {DT_FED_DIRICHLET, 0, NAN},
                           bad_shards = {DT_FED_SHARDS, 0, 0.0},
                           bad_kind = {(dt_fed_partition_kind)7, 0, 0.0};
    DT_ASSERT_STATUS(dt_fed_assign(&bad_alpha, lab, 8, 3, 2, 1, client_of, counts, NULL),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("alpha");
    DT_ASSERT_STATUS(dt_fed_assign(&bad_shards, lab, 8, 3, 2, 1, client_of, counts, NULL),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("shards per client");
    DT_ASSERT_STATUS(dt_fed_assign(&bad_kind, lab, 8, 3, 2, 1, client_of, counts, NULL),
                     DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("unknown partition kind 7");
    /* Edge sizes that are allowed: one client, and as many clients as samples. */
    DT_ASSERT_OK(dt_fed_assign(&iid, NULL, 8, 0, 1, 1, client_of, counts, NULL));
    check_assignment("iid, 1 client", client_of, counts, 8, 1);
    DT_ASSERT_OK(dt_fed_assign(&dir, lab, 8, 3, 8, 1, client_of, counts, NULL));
    check_assignment("dirichlet, 8 clients for 8 samples", client_of, counts, 8, 8);
    const dt_fed_partition sh1 = {DT_FED_SHARDS, 1, 0.0};
    DT_ASSERT_OK(dt_fed_assign(&sh1, lab, 8, 3, 8, 1, client_of, counts, NULL));
    check_assignment("shards:1, 8 clients for 8 samples", client_of, counts, 8, 8);
}

/* ---- iid --------------------------------------------------------------------------------- */

/* Sizes differ by at most 1 (the first n mod C larger), and each client's class counts are
 * near its share of the global ones. A client of m samples drawn without replacement from
 * n holds a hypergeometric count of class k: mean m n_k / n, variance
 * m p (1 - p) (n - m) / (n - 1) with p = n_k / n. The bound is 6 standard deviations plus
 * 1 for the mean's fraction: at most ~2e-9 per (client, class) cell for any seed. */
static void check_iid(const char *what, const int32_t *lab, int64_t n, int clients, uint64_t seed)
{
    int64_t counts[64], nk[K], hist[64 * K];
    int64_t *client_of = assign("iid", lab, n, clients, seed, counts, NULL);
    for (int c = 0; c < clients; c++) {
        const int64_t want = n / clients + (c < n % clients ? 1 : 0);
        if (counts[c] != want) {
            print_error("%s: client %d has %lld samples, expected %lld\n", what, c,
                        (long long)counts[c], (long long)want);
            fail();
        }
    }
    if (lab != NULL) {
        class_sizes(lab, n, nk);
        dt_fed_histogram(client_of, lab, n, K, clients, hist);
        for (int c = 0; c < clients; c++)
            for (int k = 0; k < K; k++) {
                const double m = (double)counts[c], p = (double)nk[k] / (double)n;
                const double mean = m * p;
                const double sd = sqrt(m * p * (1 - p) * ((double)n - m) / ((double)n - 1));
                const double got = (double)hist[c * K + k];
                if (fabs(got - mean) > 6 * sd + 1) {
                    print_error("%s: client %d class %d: %g samples, expected %g +- %g\n", what, c,
                                k, got, mean, 6 * sd + 1);
                    fail();
                }
            }
    }
    free(client_of);
}

static void test_iid(void **state)
{
    (void)state;
    int32_t *even = labels_even(), *odd = labels_odd();
    check_iid("iid 10x1000 / 10", even, N_EVEN, 10, 11);
    check_iid("iid 10007 / 7", odd, N_ODD, 7, 12);
    check_iid("iid 10007 / 64", odd, N_ODD, 64, 13);
    check_iid("iid without labels", NULL, N_ODD, 7, 12);
    /* The labels do not enter an iid split. */
    int64_t c1[7], c2[7];
    int64_t *a = assign("iid", odd, N_ODD, 7, 12, c1, NULL);
    int64_t *b = assign("iid", NULL, N_ODD, 7, 12, c2, NULL);
    assert_memory_equal(a, b, N_ODD * sizeof *a);
    free(a);
    free(b);
    free(even);
    free(odd);
}

/* The iid order is not a training epoch's shuffle under the same seed: with n clients of
 * one sample, client_of is the inverse of the order, which must match no early epoch's. */
static void test_iid_not_training_shuffle(void **state)
{
    (void)state;
    enum { N = 64 };
    int64_t counts[N], perm[N];
    int64_t *client_of = assign("iid", NULL, N, N, 5, counts, NULL);
    for (uint64_t epoch = 0; epoch < 16; epoch++) {
        dt_rng_permutation(5, epoch, N, perm);
        int same = 1;
        for (int64_t pos = 0; pos < N; pos++)
            same &= client_of[perm[pos]] == pos;
        if (same) {
            print_error("the iid order equals the shuffle of epoch %llu\n",
                        (unsigned long long)epoch);
            fail();
        }
    }
    free(client_of);
}

/* ---- shards ---------------------------------------------------------------------------- */

/* The samples ordered by (label, index), as the shards are cut from. */
static int64_t *sorted_by_label(const int32_t *lab, int64_t n)
{
    int64_t *s = malloc((size_t)n * sizeof *s), pos = 0;
    assert_non_null(s);
    for (int k = 0; k < K; k++)
        for (int64_t i = 0; i < n; i++)
            if (lab[i] == k)
                s[pos++] = i;
    return s;
}

/* Shards of m or m - 1 consecutive positions of the label order: client c holds exactly
 * N shards, so N floor(n/S) <= count <= N ceil(n/S) and its positions form at most N runs.
 * Labels: a shard of m positions contains a whole class only when that class has <= m - 2
 * samples; when every class has >= m - 1 a shard spans at most 2 labels, so a client holds
 * at most 2N, and the (client, label) pairs number at most S + K - 1 (each of the K - 1
 * class boundaries adds a label to at most one shard). Returns the most labels a client
 * holds. */
static int check_shards(const char *what, const int32_t *lab, int64_t n, int clients, int per)
{
    int64_t counts[128], nk[K], hist[128 * K];
    char spec[32];
    snprintf(spec, sizeof spec, "shards:%d", per);
    int64_t *client_of = assign(spec, lab, n, clients, 21, counts, NULL);
    const int64_t shards = (int64_t)clients * per, m = (n + shards - 1) / shards;
    class_sizes(lab, n, nk);
    for (int k = 0; k < K; k++)
        assert_true(nk[k] >= m - 1); /* the 2N bound's condition holds for these data */
    int64_t *order = sorted_by_label(lab, n), runs[128] = {0}, pairs = 0;
    for (int64_t pos = 0; pos < n; pos++)
        if (pos == 0 || client_of[order[pos]] != client_of[order[pos - 1]])
            runs[client_of[order[pos]]]++;
    dt_fed_histogram(client_of, lab, n, K, clients, hist);
    int most = 0;
    for (int c = 0; c < clients; c++) {
        int held = 0;
        for (int k = 0; k < K; k++)
            held += hist[c * K + k] > 0;
        pairs += held;
        most = held > most ? held : most;
        if (counts[c] < per * (n / shards) || counts[c] > per * m || runs[c] > per ||
            held > 2 * per) {
            print_error("%s: client %d: %lld samples (expected [%lld, %lld]), %lld runs "
                        "(expected <= %d), %d labels (expected <= %d)\n",
                        what, c, (long long)counts[c], (long long)(per * (n / shards)),
                        (long long)(per * m), (long long)runs[c], per, held, 2 * per);
            fail();
        }
    }
    if (pairs > shards + K - 1) {
        print_error("%s: %lld (client, label) pairs, expected <= %lld\n", what, (long long)pairs,
                    (long long)(shards + K - 1));
        fail();
    }
    free(order);
    free(client_of);
    return most;
}

static void test_shards(void **state)
{
    (void)state;
    int32_t *even = labels_even(), *odd = labels_odd();
    /* The FedAvg paper's split in small: 200 shards of 50; every class is 20 whole shards,
     * so no shard straddles a boundary and a client holds at most N = 2 labels. */
    int most = check_shards("shards:2 over 100, 10x1000", even, N_EVEN, 100, 2);
    if (most > 2) {
        print_error("shards:2 on whole-shard classes: a client holds %d labels, expected <= 2\n",
                    most);
        fail();
    }
    check_shards("shards:3 over 30, 10007 unequal", odd, N_ODD, 30, 3);
    check_shards("shards:1 over 100, 10007 unequal", odd, N_ODD, 100, 1);
    free(even);
    free(odd);
}

/* ---- the documented formulas ----------------------------------------------------------- */

/* The epoch fed_partition.c's header gives each of its permutations, written out again. */
static uint64_t formula_epoch(uint64_t use, uint64_t index)
{
    return (uint64_t)DT_RNG_STREAM_FED << 56 | use << 48 | index;
}

/* iid, shards and Dirichlet recomputed from the header's definitions with the public
 * Philox permutation and dt_fed_gamma, and compared sample by sample: this pins the exact
 * rule (which shard goes to which client, which part is larger), not only its statistics. */
static void test_formulas(void **state)
{
    (void)state;
    enum { N = 203, C = 4, S = 3 * C, NK = 3 };
    int32_t lab[N];
    int64_t want[N], counts[C], perm[N], moved = -1;
    for (int i = 0; i < N; i++)
        lab[i] = (int32_t)(i * i % 7 % NK); /* unequal classes, mixed order */
    /* iid: client c takes positions [c*50 + min(c, 3), ...) of the permutation. */
    dt_rng_permutation(9, formula_epoch(1, 0), N, perm);
    for (int64_t c = 0, pos = 0; c < C; c++)
        for (int64_t j = 0; j < N / C + (c < N % C); j++)
            want[perm[pos++]] = c;
    dt_fed_partition p = {DT_FED_IID, 0, 0.0};
    int64_t got[N];
    DT_ASSERT_OK(dt_fed_assign(&p, lab, N, NK, C, 9, got, counts, &moved));
    assert_memory_equal(got, want, sizeof got);
    /* shards:3: shard s is positions [s*16 + min(s, 11), ...) of the label order; client
     * c gets shards perm[3c .. 3c + 3). */
    int64_t order[N], pos = 0, shard_of_pos[N];
    for (int k = 0; k < NK; k++)
        for (int i = 0; i < N; i++)
            if (lab[i] == k)
                order[pos++] = i;
    for (int64_t s = 0, q = 0; s < S; s++)
        for (int64_t j = 0; j < N / S + (s < N % S); j++)
            shard_of_pos[q++] = s;
    dt_rng_permutation(9, formula_epoch(2, 0), S, perm);
    for (int64_t q = 0; q < N; q++)
        for (int64_t j = 0; j < S; j++)
            if (perm[j] == shard_of_pos[q])
                want[order[q]] = j / 3;
    p = (dt_fed_partition){DT_FED_SHARDS, 3, 0.0};
    DT_ASSERT_OK(dt_fed_assign(&p, lab, N, NK, C, 9, got, counts, &moved));
    assert_memory_equal(got, want, sizeof got);
    /* dirichlet:5 (no client ends empty here): class k's members, in the order of
     * permutation (3, k), are cut at floor(cumulative proportion * n_k), the proportions
     * the gamma variates of indices k*C + c over their sum. */
    for (int64_t k = 0, start = 0; k < NK; k++) {
        int64_t nk = 0;
        while (start + nk < N && lab[order[start + nk]] == k)
            nk++;
        double g[C], sum = 0.0, cum = 0.0;
        for (int c = 0; c < C; c++)
            sum += g[c] = dt_fed_gamma(5.0, 9, (uint64_t)(k * C + c));
        dt_rng_permutation(9, formula_epoch(3, (uint64_t)k), nk, perm);
        for (int64_t c = 0, lo = 0; c < C; c++) {
            cum += g[c] / sum;
            const int64_t hi = c == C - 1 ? nk : (int64_t)floor(cum * (double)nk);
            for (int64_t j = lo; j < hi; j++)
                want[order[start + perm[j]]] = c;
            lo = hi;
        }
        start += nk;
    }
    p = (dt_fed_partition){DT_FED_DIRICHLET, 0, 5.0};
    DT_ASSERT_OK(dt_fed_assign(&p, lab, N, NK, C, 9, got, counts, &moved));
    assert_int_equal(moved, 0);
    assert_memory_equal(got, want, sizeof got);
}

/* ---- Dirichlet ------------------------------------------------------------------------- */

typedef struct skew {
    double top1, top2; /* means over clients of the largest and two largest class shares */
    double max_rel;    /* max over (client, class) of |share / global share - 1| */
} skew;

static skew measure_skew(const int32_t *lab, int64_t n, const int64_t *client_of,
                         const int64_t *counts, int clients)
{
    int64_t nk[K], hist[64 * K];
    class_sizes(lab, n, nk);
    dt_fed_histogram(client_of, lab, n, K, clients, hist);
    skew s = {0.0, 0.0, 0.0};
    for (int c = 0; c < clients; c++) {
        int64_t a = 0, b = 0;
        for (int k = 0; k < K; k++) {
            const int64_t v = hist[c * K + k];
            if (v > a) {
                b = a;
                a = v;
            } else if (v > b) {
                b = v;
            }
            const double rel =
                fabs((double)v / (double)counts[c] / ((double)nk[k] / (double)n) - 1.0);
            s.max_rel = rel > s.max_rel ? rel : s.max_rel;
        }
        s.top1 += (double)a / (double)counts[c] / clients;
        s.top2 += (double)(a + b) / (double)counts[c] / clients;
    }
    return s;
}

/* alpha 100: q_kc has mean 1/C and relative standard deviation sqrt((C-1)/(C alpha + 1))
 * = 0.095 for C = 10, so a client's share of class k is its global share within about
 * 0.1 relative; the floor moves a cell by at most 1 sample, 1/18 relative for the smallest
 * class here (181 samples over 10 clients). Bound: 6 sd + 1/18 = 0.6. Over seeds 1000 ..
 * 1299 the largest deviation seen was 0.45 (10007 unequal) and 0.39 (10 x 1000). The
 * same statistic for alpha 0.1 exceeds it many times over (checked below), so the bound
 * does tell the two apart. */
static void test_dirichlet_large_alpha(void **state)
{
    (void)state;
    int32_t *even = labels_even(), *odd = labels_odd();
    const int32_t *sets[2] = {even, odd};
    const int64_t ns[2] = {N_EVEN, N_ODD};
    for (int t = 0; t < 2; t++) {
        int64_t counts[10], moved;
        int64_t *client_of = assign("dirichlet:100", sets[t], ns[t], 10, 31, counts, &moved);
        assert_int_equal(moved, 0);
        const skew s = measure_skew(sets[t], ns[t], client_of, counts, 10);
        if (s.max_rel > 0.6) {
            print_error("dirichlet:100, set %d: a client's class share is %.3f relative from "
                        "the global one, expected <= 0.6\n",
                        t, s.max_rel);
            fail();
        }
        free(client_of);
    }
    free(even);
    free(odd);
}

/* alpha 0.1 over 20 clients: a class's proportion on one client is Beta(0.1, 1.9), mostly
 * near 0 with a rare large value, so a client's ten class amounts are dominated by one or
 * two. Over seeds 1000 .. 2999 the mean over clients of the largest class share ranged
 * 0.49 .. 0.80 (10 x 1000) and 0.50 .. 0.80 (10007 unequal), of the two largest 0.75 ..;
 * a near-iid split gives 0.12 and 0.22 (alpha 100). Bounds 0.4 and 0.6. */
static void test_dirichlet_small_alpha(void **state)
{
    (void)state;
    int32_t *even = labels_even(), *odd = labels_odd();
    const int32_t *sets[2] = {even, odd};
    const int64_t ns[2] = {N_EVEN, N_ODD};
    for (int t = 0; t < 2; t++) {
        int64_t counts[20], moved;
        int64_t *client_of = assign("dirichlet:0.1", sets[t], ns[t], 20, 32, counts, &moved);
        assert_true(moved >= 0 && moved < 20);
        const skew s = measure_skew(sets[t], ns[t], client_of, counts, 20);
        if (s.top1 <= 0.4 || s.top2 <= 0.6 || s.max_rel <= 0.6) {
            print_error("dirichlet:0.1, set %d: mean top-1 share %.3f (expected > 0.4), top-2 "
                        "%.3f (expected > 0.6), max relative deviation %.3f (expected > 0.6)\n",
                        t, s.top1, s.top2, s.max_rel);
            fail();
        }
        free(client_of);
    }
    free(even);
    free(odd);
}

/* Tiny alpha puts each class wholly on one client: the proportions are
 * exp((log u_c - max log u) / alpha) up to factors near 1, exactly 0 in double unless two
 * clients' log u agree within about 1e-3 alpha, which has probability about 1e-9 per pair.
 * So the fill-up rule is visible and its result predictable. */
static void test_dirichlet_fill_empty(void **state)
{
    (void)state;
    int64_t counts[50], moved;
    /* One class of 5 on 3 clients: L holds 0..4; the lower empty client e1 takes sample 4
     * (the largest's last), then e2 takes 3 (L, with 4 samples, is still the largest). */
    int32_t one[5] = {0, 0, 0, 0, 0};
    dt_fed_partition p = {DT_FED_DIRICHLET, 0, 1e-6};
    int64_t c5[5];
    DT_ASSERT_OK(dt_fed_assign(&p, one, 5, 1, 3, 41, c5, counts, &moved));
    check_assignment("dirichlet:1e-6, 5 samples of one class", c5, counts, 5, 3);
    assert_int_equal(moved, 2);
    const int64_t big = c5[0];
    const int64_t e1 = big == 0 ? 1 : 0, e2 = big == 2 ? 1 : 2;
    assert_true(c5[1] == big && c5[2] == big);
    assert_int_equal(c5[3], e2);
    assert_int_equal(c5[4], e1);
    /* Two classes of 2 on 3 clients, each class on its own client (this seed's draw: the
     * first assert says so): the empty client takes the last sample of the lower-numbered
     * of the two tied clients. */
    int32_t two[4] = {0, 0, 1, 1};
    int64_t c4[4];
    DT_ASSERT_OK(dt_fed_assign(&p, two, 4, 2, 3, 43, c4, counts, &moved));
    check_assignment("dirichlet:1e-6, 2 + 2 samples", c4, counts, 4, 3);
    assert_int_equal(moved, 1);
    assert_true(c4[0] != c4[2]);
    const int64_t a = c4[0], b = c4[2], e = 3 - a - b;
    if (a < b) {
        assert_true(c4[1] == e && c4[3] == b);
    } else {
        assert_true(c4[1] == a && c4[3] == e);
    }
    /* 50 clients for 10 classes at alpha 0.01: a class reaches only the few clients whose
     * proportion exceeds about 1/1000, so many clients start empty. Over seeds 1000 ..
     * 2999 19 were filled on average, never fewer than 9: bound 5. A filled client ends
     * with exactly one sample (the donor, the largest, always has more). */
    int32_t *even = labels_even();
    int64_t *client_of = assign("dirichlet:0.01", even, N_EVEN, 50, 44, counts, &moved);
    int ones = 0;
    for (int c = 0; c < 50; c++)
        ones += counts[c] == 1;
    if (moved < 5 || ones < moved) {
        print_error("dirichlet:0.01 over 50: %lld moved (expected >= 5), %d clients of one "
                    "sample (expected >= moved)\n",
                    (long long)moved, ones);
        fail();
    }
    free(client_of);
    free(even);
}

/* ---- purity ---------------------------------------------------------------------------- */

static void test_same_seed_same_bytes(void **state)
{
    (void)state;
    int32_t *odd = labels_odd();
    static const char *const specs[] = {"iid", "shards:2", "dirichlet:0.5"};
    for (int t = 0; t < 3; t++) {
        int64_t c1[25], c2[25], c3[25], m1, m2, m3;
        int64_t *a = assign(specs[t], odd, N_ODD, 25, 77, c1, &m1);
        int64_t *b = assign(specs[t], odd, N_ODD, 25, 77, c2, &m2);
        int64_t *d = assign(specs[t], odd, N_ODD, 25, 78, c3, &m3);
        assert_memory_equal(a, b, N_ODD * sizeof *a);
        assert_memory_equal(c1, c2, sizeof c1);
        assert_int_equal(m1, m2);
        int64_t differ = 0;
        for (int64_t i = 0; i < N_ODD; i++)
            differ += a[i] != d[i];
        /* Independent splits agree on a sample with probability about 1/25 for iid and
         * Dirichlet, and for shards about 1/25 too (a random other deal). */
        if (differ < N_ODD / 2) {
            print_error("%s: seeds 77 and 78 differ on %lld of %d samples, expected >= %d\n",
                        specs[t], (long long)differ, N_ODD, N_ODD / 2);
            fail();
        }
        free(a);
        free(b);
        free(d);
    }
    free(odd);
}

/* ---- gamma ----------------------------------------------------------------------------- */

/* Gamma(alpha, 1) has mean alpha and variance alpha, and excess kurtosis 6/alpha, so over
 * N draws the sample mean has standard deviation sqrt(alpha/N) and the sample variance
 * about alpha sqrt((2 + 6/alpha)/N). Bounds: 5 of each (6e-7 two-sided per check). */
static void test_gamma_moments(void **state)
{
    (void)state;
    enum { N = 200000 };
    static const double alphas[] = {0.1, 0.5, 1.0, 5.0};
    for (int t = 0; t < 4; t++) {
        const double a = alphas[t];
        double sum = 0.0, sum2 = 0.0;
        for (uint64_t i = 0; i < N; i++) {
            const double g = dt_fed_gamma(a, 2024, i);
            if (!(g >= 0.0) || !isfinite(g)) {
                print_error("gamma(%g) draw %llu = %g, expected finite >= 0\n", a,
                            (unsigned long long)i, g);
                fail();
            }
            sum += g;
            sum2 += g * g;
        }
        const double mean = sum / N, var = sum2 / N - mean * mean;
        const double tol_mean = 5 * sqrt(a / N), tol_var = 5 * a * sqrt((2 + 6 / a) / N);
        if (fabs(mean - a) > tol_mean || fabs(var - a) > tol_var) {
            print_error("gamma(%g): mean %.5f (expected %g +- %.5f), variance %.5f (expected "
                        "%g +- %.5f)\n",
                        a, mean, a, tol_mean, var, a, tol_var);
            fail();
        }
    }
}

/* The distribution itself at a few points: Gamma(1) is Exp(1), P(G <= x) = 1 - e^-x (the
 * direct method); Gamma(0.5) is chi-square(1)/2, P(G <= x) = erf(sqrt x) (the boost). An
 * empirical fraction over N draws has standard deviation <= 0.5/sqrt(N) = 0.0011: bound
 * 0.006. */
static void test_gamma_cdf(void **state)
{
    (void)state;
    enum { N = 200000 };
    static const double xs[] = {0.01, 0.1, 0.5, 1.0, 2.0, 4.0};
    for (int t = 0; t < 2; t++) {
        const double a = t == 0 ? 1.0 : 0.5;
        int64_t below[6] = {0};
        for (uint64_t i = 0; i < N; i++) {
            const double g = dt_fed_gamma(a, 99, i);
            for (int j = 0; j < 6; j++)
                below[j] += g <= xs[j];
        }
        for (int j = 0; j < 6; j++) {
            const double want = t == 0 ? 1.0 - exp(-xs[j]) : erf(sqrt(xs[j]));
            const double got = (double)below[j] / N;
            if (fabs(got - want) > 0.006) {
                print_error("gamma(%g): P(G <= %g) = %.5f, expected %.5f +- 0.006\n", a, xs[j], got,
                            want);
                fail();
            }
        }
    }
}

/* ---- rounds ---------------------------------------------------------------------------- */

static void check_round(int clients, int per, uint64_t seed, int64_t round, int *out)
{
    int again[128];
    dt_fed_sample(clients, per, seed, round, out);
    dt_fed_sample(clients, per, seed, round, again);
    for (int j = 0; j < per; j++) {
        if (out[j] < 0 || out[j] >= clients || (j > 0 && out[j] <= out[j - 1]) ||
            out[j] != again[j]) {
            print_error("sample(%d, %d, seed %llu, round %lld)[%d] = %d (previous %d, again %d): "
                        "expected ascending, distinct, in [0, %d), repeatable\n",
                        clients, per, (unsigned long long)seed, (long long)round, j, out[j],
                        j > 0 ? out[j - 1] : -1, again[j], clients);
            fail();
        }
    }
}

static void test_sample_basic(void **state)
{
    (void)state;
    static const int cases[][2] = {{1, 1}, {7, 7}, {10, 3}, {50, 49}, {100, 10}, {128, 1}};
    int out[128];
    for (int t = 0; t < 6; t++)
        for (int64_t r = 0; r < 50; r++)
            check_round(cases[t][0], cases[t][1], 3, r, out);
    for (int c = 1; c <= 128; c *= 2)
        for (int64_t r = 0; r < 5; r++) {
            check_round(c, c, 8, r, out);
            for (int j = 0; j < c; j++)
                assert_int_equal(out[j], j);
        }
    check_round(100, 10, 3, INT64_MAX, out); /* the round's high word reaches Philox */
}

/* Floyd's algorithm with the header's counters, written out again naively: step j draws
 * t = (64 bits of Philox(seed, j, round)) mod (j + 1) and takes t, or j if t is taken. */
static void test_sample_formula(void **state)
{
    (void)state;
    enum { C = 37, P = 9 };
    for (int64_t r = 0; r < 20; r++) {
        int want[P], got[P], have = 0;
        for (int j = C - P; j < C; j++) {
            uint32_t w[4];
            dt_philox(6, (uint32_t)j, (uint32_t)r, 0, (uint32_t)DT_RNG_STREAM_FED << 24 | 5, w);
            int t = (int)((((uint64_t)w[0] << 32) | w[1]) % (uint64_t)(j + 1));
            for (int i = 0; i < have; i++)
                if (want[i] == t)
                    t = j;
            want[have++] = t;
        }
        for (int i = 1; i < P; i++) /* insertion sort */
            for (int m = i; m > 0 && want[m - 1] > want[m]; m--) {
                const int x = want[m];
                want[m] = want[m - 1];
                want[m - 1] = x;
            }
        dt_fed_sample(C, P, 6, r, got);
        assert_memory_equal(got, want, sizeof got);
    }
}

/* 100 clients, 10 a round: two independent rounds coincide with probability 1/C(100, 10)
 * = 5.8e-14, so all 200 rounds differ pairwise, and from the same rounds of another seed. */
static void test_sample_rounds_and_seeds(void **state)
{
    (void)state;
    enum { R = 200, C = 100, P = 10 };
    static int a[R][P], b[R][P];
    for (int64_t r = 0; r < R; r++) {
        check_round(C, P, 1, r, a[r]);
        check_round(C, P, 2, r, b[r]);
        assert_memory_not_equal(a[r], b[r], sizeof a[r]);
    }
    for (int r = 0; r < R; r++)
        for (int s = r + 1; s < R; s++)
            if (memcmp(a[r], a[s], sizeof a[r]) == 0) {
                print_error("rounds %d and %d sample the same clients\n", r, s);
                fail();
            }
    /* Rounds whose numbers differ only in the high word differ too. */
    int hi[P];
    check_round(C, P, 1, (int64_t)1 << 32, hi);
    assert_memory_not_equal(a[0], hi, sizeof hi);
}

/* Each client's frequency is per_round/clients, and (Floyd's correctness, beyond the
 * marginals) each subset equally likely. 20 clients, 5 a round, 4000 rounds: a client's
 * count is Binomial(4000, 1/4), 1000 +- 27.4: bound 140 (5.1 sd). 5 clients, 2 a round,
 * 20000 rounds: each of the 10 pairs Binomial(20000, 1/10), 2000 +- 42.4: bound 215. */
static void test_sample_frequency(void **state)
{
    (void)state;
    int64_t seen[20] = {0}, pairs[5][5] = {{0}};
    int out[5];
    for (int64_t r = 0; r < 4000; r++) {
        dt_fed_sample(20, 5, 17, r, out);
        for (int j = 0; j < 5; j++)
            seen[out[j]]++;
    }
    for (int c = 0; c < 20; c++)
        if (llabs(seen[c] - 1000) > 140) {
            print_error("client %d sampled in %lld of 4000 rounds, expected 1000 +- 140\n", c,
                        (long long)seen[c]);
            fail();
        }
    for (int64_t r = 0; r < 20000; r++) {
        dt_fed_sample(5, 2, 18, r, out);
        pairs[out[0]][out[1]]++;
    }
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (llabs(pairs[i][j] - 2000) > 215) {
                print_error("pair {%d, %d} sampled in %lld of 20000 rounds, expected 2000 +- "
                            "215\n",
                            i, j, (long long)pairs[i][j]);
                fail();
            }
}

/* A client's samples per round: 10 samples in batches of 4 are 3 batches an epoch (4, 4, 2):
 * 2 steps train 8, 3 steps a whole epoch (10), 4 steps 10 + 4, 7 steps 2 epochs and 4;
 * 2 local epochs 20; none without samples. */
static void test_local_samples(void **state)
{
    (void)state;
    static const struct {
        int64_t samples, batch;
        int epochs;
        int64_t steps, want;
    } cases[] = {{10, 4, 1, 2, 8},  {10, 4, 1, 3, 10},  {10, 4, 1, 4, 14}, {10, 4, 1, 7, 24},
                 {10, 4, 2, 0, 20}, {10, 16, 1, 3, 30}, {0, 4, 1, 3, 0},   {10, 4, 0, 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t got =
            dt_fed_local_samples(cases[i].samples, cases[i].batch, cases[i].epochs, cases[i].steps);
        if (got != cases[i].want)
            fail_msg("%lld samples, batch %lld, %d epochs, %lld steps: expected %lld, got %lld",
                     (long long)cases[i].samples, (long long)cases[i].batch, cases[i].epochs,
                     (long long)cases[i].steps, (long long)cases[i].want, (long long)got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_format),
        cmocka_unit_test(test_parse_refusals),
        cmocka_unit_test(test_assign_errors),
        cmocka_unit_test(test_iid),
        cmocka_unit_test(test_iid_not_training_shuffle),
        cmocka_unit_test(test_shards),
        cmocka_unit_test(test_formulas),
        cmocka_unit_test(test_dirichlet_large_alpha),
        cmocka_unit_test(test_dirichlet_small_alpha),
        cmocka_unit_test(test_dirichlet_fill_empty),
        cmocka_unit_test(test_same_seed_same_bytes),
        cmocka_unit_test(test_gamma_moments),
        cmocka_unit_test(test_gamma_cdf),
        cmocka_unit_test(test_sample_basic),
        cmocka_unit_test(test_sample_formula),
        cmocka_unit_test(test_sample_rounds_and_seeds),
        cmocka_unit_test(test_sample_frequency),
        cmocka_unit_test(test_local_samples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
