/* test_ps_codec.c — top-k pushes cut into server shards (src/parallel/ps_codec.c), without
 * MPI: a worker's parameters (17) split over 2 servers as ps.c splits them (9 and 8), top-k
 * at ratio 0.25 (3 and 2 entries) with error feedback. Each shard's encoding must take its
 * own part of the residual (parameters [off, off + cnt)):
 *   - after encoding both shards of a known gradient, the whole residual is the gradient
 *     with each shard's own top-k zeroed, and each payload holds that shard's top-k;
 *   - a second gradient is sent as the top-k of (gradient + that shard's residual), and the
 *     residual keeps the rest, shard by shard;
 *   - each server decodes its payload to the values sent, at their places in its shard.
 * The reference selection is written here: a plain scan for the largest magnitudes, the
 * lower index first among equals (dt_topk_select's rule). */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parallel/compress.h"
#include "parallel/ps.h"
#include "parallel/strategy_impl.h"

enum { N = 17, SERVERS = 2, MAXK = 3 };

static const dt_compress_options topk = {
    .kind = DT_COMPRESS_TOPK, .ratio = 0.25, .error_feedback = 1};

/* A worker's codec state for N parameters over SERVERS shards: what ps.c sets up. */
typedef struct worker {
    dt_ps ps;
    size_t off[SERVERS], cnt[SERVERS];
    float resid[N];
    uint32_t scratch[N];
} worker;

static void worker_init(worker *w)
{
    memset(w, 0, sizeof *w);
    for (int s = 0; s < SERVERS; s++) {
        int64_t o, c;
        dt_strategy_part(N, SERVERS, s, &o, &c);
        w->off[s] = (size_t)o;
        w->cnt[s] = (size_t)c;
    }
    w->ps.base.opt.compress = topk;
    w->ps.servers = SERVERS;
    w->ps.server = -1;
    w->ps.shard_off = w->off;
    w->ps.shard_cnt = w->cnt;
    w->ps.resid = w->resid;
    w->ps.scratch = w->scratch;
}

/* The reference: in x[off, off + cnt), the k indices (shard-relative, ascending) of the
 * largest magnitudes. */
static void ref_topk(const float *x, size_t off, size_t cnt, size_t k, uint32_t *idx)
{
    int taken[N] = {0};
    for (size_t j = 0; j < k; j++) {
        size_t best = cnt;
        for (size_t i = 0; i < cnt; i++)
            if (!taken[i] && (best == cnt || fabsf(x[off + i]) > fabsf(x[off + best])))
                best = i;
        taken[best] = 1;
    }
    for (size_t i = 0, j = 0; i < cnt; i++)
        if (taken[i])
            idx[j++] = (uint32_t)i;
}

/* Encodes every shard of g; checks each payload and the residual against the reference:
 * acc = g + the residual before (what the worker owes), its top-k per shard sent and
 * zeroed. Then each server decodes its payload. `round` names the check. */
static void encode_and_check(worker *w, const float *g, const char *round)
{
    float acc[N], want_resid[N];
    for (int i = 0; i < N; i++)
        acc[i] = g[i] + w->resid[i];
    memcpy(want_resid, acc, sizeof acc);
    uint8_t payload[SERVERS][MAXK * (sizeof(uint32_t) + sizeof(float))];
    for (int s = 0; s < SERVERS; s++) {
        assert_true(dt_ps_payload_bytes(&w->ps, s) <= sizeof payload[s]);
        dt_ps_encode(&w->ps, s, g, payload[s]);
    }
    for (int s = 0; s < SERVERS; s++) {
        const size_t k = dt_topk_count(w->cnt[s], topk.ratio);
        uint32_t want_idx[MAXK], got_idx[MAXK];
        float got_val[MAXK];
        ref_topk(acc, w->off[s], w->cnt[s], k, want_idx);
        memcpy(got_idx, payload[s], k * sizeof(uint32_t));
        memcpy(got_val, payload[s] + k * sizeof(uint32_t), k * sizeof(float));
        for (size_t j = 0; j < k; j++) {
            const size_t i = w->off[s] + want_idx[j];
            if (got_idx[j] != want_idx[j] || got_val[j] != acc[i])
                fail_msg("%s: shard %d's entry %zu: expected index %u value %g (gradient + the "
                         "shard's own residual), got index %u value %g",
                         round, s, j, want_idx[j], acc[i], got_idx[j], got_val[j]);
            want_resid[i] = 0.0f;
        }
        /* The server's side: its shard, dense, holds what was sent where it belongs. */
        float dense[N], want_dense[N] = {0};
        for (size_t j = 0; j < k; j++)
            want_dense[want_idx[j]] = acc[w->off[s] + want_idx[j]];
        w->ps.server = s;
        dt_ps_decode(&w->ps, payload[s], dense);
        w->ps.server = -1;
        char name[96];
        snprintf(name, sizeof name, "%s: server %d's decoded shard", round, s);
        assert_true(dt_check_equal_bits(name, dense, want_dense, w->cnt[s]));
    }
    char name[96];
    snprintf(name, sizeof name, "%s: the residual after both shards", round);
    assert_true(dt_check_equal_bits(name, w->resid, want_resid, N));
}

static void test_topk_residual_per_shard(void **state)
{
    (void)state;
    worker w;
    worker_init(&w);
    assert_true(w.cnt[0] == 9 && w.cnt[1] == 8 && w.off[1] == 9);
    /* Distinct magnitudes 0.5, 1, ..., 8.5 in a scrambled order, alternating signs; exact in
     * float, and so are their sums below. */
    float g[N], g2[N];
    for (int i = 0; i < N; i++) {
        g[i] = (float)((i * 7) % N + 1) * (i % 2 ? -0.5f : 0.5f);
        g2[i] = (float)((i * 5 + 3) % N + 1) * (i % 3 ? 0.25f : -0.25f);
    }
    encode_and_check(&w, g, "first push");
    /* Shard 1's residual is not shard 0's: a second push starts from each one's own. */
    encode_and_check(&w, g2, "second push");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk_residual_per_shard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
