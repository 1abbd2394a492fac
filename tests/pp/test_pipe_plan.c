/* test_pipe_plan.c — the pipeline's orders of forwards and backwards (src/parallel/
 * pipe_plan.c): for a contiguous split they are the textbook GPipe (all forwards, then all
 * backwards) and 1F1B (P - 1 - s forwards to warm up, then one forward and one backward in
 * turn); for the round-robin placement, at every world size and micro-batch count, the
 * orders run to the end when every op waits for what pipe.c waits for (no deadlock), each
 * virtual stage takes its micro-batches in order, and no stage holds more micro-batches
 * than its slots. Layouts that break the rules are refused. */
#include "dt_test.h"

#include <stdio.h>
#include <string.h>

#include "parallel/pipe_plan.h"

enum { MAXV = 16, MAXM = 8, MAXP = 4 };

typedef struct plan {
    dt_pipe_op ops[MAXP][2 * MAXM * MAXV];
    int nops[MAXP], slots[MAXP], depth[MAXP];
} plan;

static void make(plan *pl, const int *owner, int nv, int stages, int micro, dt_pp_schedule sched)
{
    const dt_pipe_layout l = {.stages = stages,
                              .nv = nv,
                              .owner = owner,
                              .micro = micro,
                              .sched = sched,
                              .max_requests = 64,
                              .window = 4};
    for (int s = 0; s < stages; s++)
        DT_ASSERT_OK(dt_pipe_plan(&l, s, pl->ops[s], &pl->nops[s], &pl->slots[s], &pl->depth[s]));
}

static void expect_op(const dt_pipe_op *got, int backward, int vs, int micro, const char *what)
{
    if (got->backward != backward || got->vs != vs || got->micro != micro) {
        fprintf(stderr, "%s: expected %c(%d, %d), got %c(%d, %d)\n", what, backward ? 'B' : 'F', vs,
                micro, got->backward ? 'B' : 'F', got->vs, got->micro);
        fail();
    }
}

static void test_contiguous_is_textbook(void **state)
{
    (void)state;
    static plan pl;
    int owner[MAXP];
    for (int p = 2; p <= MAXP; p++) {
        for (int v = 0; v < p; v++)
            owner[v] = v;
        for (int m = 1; m <= MAXM; m++) {
            char what[96];
            make(&pl, owner, p, p, m, DT_PP_GPIPE);
            for (int s = 0; s < p; s++) {
                snprintf(what, sizeof what, "gpipe P %d M %d stage %d", p, m, s);
                assert_int_equal(pl.nops[s], 2 * m);
                assert_int_equal(pl.slots[s], m);
                for (int j = 0; j < m; j++) {
                    expect_op(&pl.ops[s][j], 0, s, j, what);
                    expect_op(&pl.ops[s][m + j], 1, s, j, what);
                }
            }
            make(&pl, owner, p, p, m, DT_PP_1F1B);
            for (int s = 0; s < p; s++) {
                snprintf(what, sizeof what, "1f1b P %d M %d stage %d", p, m, s);
                const int warm = p - 1 - s < m ? p - 1 - s : m;
                assert_int_equal(pl.slots[s], p - s < m ? p - s : m);
                int n = 0;
                for (int j = 0; j < warm; j++)
                    expect_op(&pl.ops[s][n++], 0, s, j, what);
                for (int i = 0; i < m - warm; i++) {
                    expect_op(&pl.ops[s][n++], 0, s, warm + i, what);
                    expect_op(&pl.ops[s][n++], 1, s, i, what);
                }
                for (int j = m - warm; j < m; j++)
                    expect_op(&pl.ops[s][n++], 1, s, j, what);
                assert_int_equal(pl.nops[s], n);
            }
        }
    }
}

/* Runs every stage's order, each op once what it waits for has run (pipe.c's waits);
 * fails on a deadlock, an op out of micro-batch order, or more micro-batches in flight on
 * a stage than its slots. */
static void run_orders(const plan *pl, const int *owner, int nv, int stages, int micro,
                       const char *what)
{
    static int fdone[MAXV][MAXM], bdone[MAXV][MAXM];
    int at[MAXP] = {0}, inflight[MAXP] = {0}, nextf[MAXV] = {0}, nextb[MAXV] = {0};
    memset(fdone, 0, sizeof fdone);
    memset(bdone, 0, sizeof bdone);
    int vlow[MAXP];
    for (int s = 0; s < stages; s++)
        for (vlow[s] = 0; owner[vlow[s]] != s; vlow[s]++)
            ;
    for (int left = 2 * nv * micro; left > 0;) {
        int moved = 0;
        for (int s = 0; s < stages; s++) {
            if (at[s] == pl->nops[s])
                continue;
            const dt_pipe_op *o = &pl->ops[s][at[s]];
            const int v = o->vs, j = o->micro, d = pl->depth[s];
            assert_int_equal(owner[v], s);
            int ready;
            if (!o->backward)
                ready =
                    (v == 0 || fdone[v - 1][j]) && (v == nv - 1 || j < d || fdone[v + 1][j - d]);
            else
                ready = fdone[v][j] && (v == nv - 1 || bdone[v + 1][j]) &&
                        (v == 0 || j < d || bdone[v - 1][j - d]);
            if (!ready)
                continue;
            if (!o->backward) {
                assert_int_equal(j, nextf[v]++);
                fdone[v][j] = 1;
                if (v == vlow[s] && ++inflight[s] > pl->slots[s]) {
                    fprintf(stderr, "%s: stage %d holds %d micro-batches, slots %d\n", what, s,
                            inflight[s], pl->slots[s]);
                    fail();
                }
            } else {
                assert_int_equal(j, nextb[v]++);
                bdone[v][j] = 1;
                if (v == vlow[s])
                    inflight[s]--;
            }
            at[s]++;
            left--;
            moved = 1;
        }
        if (!moved) {
            fprintf(stderr, "%s: deadlock with %d ops left\n", what, left);
            fail();
        }
    }
}

static void test_round_robin_runs(void **state)
{
    (void)state;
    static plan pl;
    static const dt_pp_schedule scheds[2] = {DT_PP_GPIPE, DT_PP_1F1B};
    int owner[MAXV];
    for (int p = 2; p <= MAXP; p++)
        for (int nv = p + 1; nv <= 12; nv += 3)
            for (int m = 1; m <= MAXM; m++)
                for (int k = 0; k < 2; k++) {
                    for (int v = 0; v < nv; v++)
                        owner[v] = v % p;
                    make(&pl, owner, nv, p, m, scheds[k]);
                    char what[96];
                    snprintf(what, sizeof what, "round robin, %d layers on %d stages, M %d, %s", nv,
                             p, m, k ? "1f1b" : "gpipe");
                    for (int s = 0; s < p; s++) {
                        int chunks = 0;
                        for (int v = 0; v < nv; v++)
                            chunks += owner[v] == s;
                        assert_int_equal(pl.nops[s], 2 * m * chunks);
                        assert_true(pl.depth[s] >= 1 && pl.depth[s] <= pl.slots[s]);
                        if (k == 0)
                            assert_int_equal(pl.slots[s], m);
                    }
                    run_orders(&pl, owner, nv, p, m, what);
                }
}

static void test_refusals(void **state)
{
    (void)state;
    dt_pipe_op ops[64];
    int nops, slots, depth;
    const int twice[3] = {0, 0, 1}, empty[3] = {0, 1, 0}, many[7] = {0, 1, 0, 1, 0, 1, 0};
    dt_pipe_layout l = {
        .stages = 2, .nv = 3, .owner = twice, .micro = 2, .max_requests = 64, .window = 4};
    DT_ASSERT_STATUS(dt_pipe_plan(&l, 0, ops, &nops, &slots, &depth), DT_ERR_INVALID);
    l.stages = 3;
    l.owner = empty;
    DT_ASSERT_STATUS(dt_pipe_plan(&l, 0, ops, &nops, &slots, &depth), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("stage 2 holds no layers");
    l.stages = 2;
    l.nv = 7;
    l.owner = many;
    l.max_requests = 10; /* 4 runs on stage 0: 8 sends and 4 receives do not fit */
    DT_ASSERT_STATUS(dt_pipe_plan(&l, 0, ops, &nops, &slots, &depth), DT_ERR_UNSUPPORTED);
    DT_ASSERT_ERROR_HAS("stage 0 holds 4 runs");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contiguous_is_textbook),
        cmocka_unit_test(test_round_robin_runs),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
