/* test_pipe_plan.c — the pipeline's orders of forwards and backwards (src/parallel/
 * pipe_plan.c), compared as text (pipe_text.c, docs/PIPELINE.md): for a contiguous split
 * they are the textbook GPipe (all forwards, then all backwards) and 1F1B (P - 1 - s
 * forwards to warm up, then one forward and one backward in turn), written out for a few
 * layouts and built for every P <= 4, M <= 8; the text form parses back; for the round-robin
 * placement, at every world size and micro-batch count, the orders run to the end when every op
 * waits for what pipe.c waits for (no deadlock), each virtual stage takes its micro-batches in
 * order, and no stage holds more micro-batches than its slots. Layouts that break the rules are
 * refused. */
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

/* Fails naming `what` unless got == want. */
static void expect_text(const char *what, const char *want, const char *got)
{
    if (strcmp(want, got) != 0) {
        fprintf(stderr, "%s:\n  expected \"%s\"\n  got      \"%s\"\n", what, want, got);
        fail();
    }
}

/* Stage s's planned order as text. */
static void order_text(const plan *pl, int s, char *buf, size_t len)
{
    DT_ASSERT_OK(dt_pipe_order_format(pl->ops[s], pl->nops[s], buf, len));
}

/* The textbook orders written out (docs/PIPELINE.md's notation), through what
 * --explain-layout prints: each stage two layers of a contiguous split. */
static void test_textbook_orders(void **state)
{
    (void)state;
    static const struct {
        int p, m;
        dt_pp_schedule sched;
        const char *order[MAXP];
    } cases[] = {
        {2, 4, DT_PP_GPIPE, {"0F0 0F1 0F2 0F3 0B0 0B1 0B2 0B3", "1F0 1F1 1F2 1F3 1B0 1B1 1B2 1B3"}},
        {2, 4, DT_PP_1F1B, {"0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3", "1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3"}},
        {3, 2, DT_PP_GPIPE, {"0F0 0F1 0B0 0B1", "1F0 1F1 1B0 1B1", "2F0 2F1 2B0 2B1"}},
        {3,
         3,
         DT_PP_1F1B,
         {"0F0 0F1 0F2 0B0 0B1 0B2", "1F0 1F1 1B0 1F2 1B1 1B2", "2F0 2B0 2F1 2B1 2F2 2B2"}},
        /* More micro-batches than stages: warm-up, steady one-and-one, cool-down. */
        {4,
         6,
         DT_PP_1F1B,
         {"0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0B3 0B4 0B5",
          "1F0 1F1 1F2 1B0 1F3 1B1 1F4 1B2 1F5 1B3 1B4 1B5",
          "2F0 2F1 2B0 2F2 2B1 2F3 2B2 2F4 2B3 2F5 2B4 2B5",
          "3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5"}},
        /* Fewer: the warm-up takes every micro-batch on the first stages. */
        {4,
         2,
         DT_PP_1F1B,
         {"0F0 0F1 0B0 0B1", "1F0 1F1 1B0 1B1", "2F0 2F1 2B0 2B1", "3F0 3B0 3F1 3B1"}},
        {4, 1, DT_PP_GPIPE, {"0F0 0B0", "1F0 1B0", "2F0 2B0", "3F0 3B0"}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int stage_of[2 * MAXP];
        for (int i = 0; i < 2 * cases[c].p; i++)
            stage_of[i] = i / 2;
        for (int s = 0; s < cases[c].p; s++) {
            char got[1024], what[96];
            DT_ASSERT_OK(dt_pp_order_text(stage_of, 2 * cases[c].p, cases[c].p, cases[c].m,
                                          cases[c].sched, s, got, sizeof got));
            snprintf(what, sizeof what, "%s P %d M %d stage %d",
                     dt_pp_schedule_name(cases[c].sched), cases[c].p, cases[c].m, s);
            expect_text(what, cases[c].order[s], got);
        }
    }
}

/* Every P <= 4 and M <= 8: GPipe is all forwards, then all backwards; 1F1B is
 * min(P - 1 - s, M) forwards to warm up, then one forward and one backward in turn, then
 * the backwards left. */
static void test_contiguous_is_textbook(void **state)
{
    (void)state;
    static plan pl;
    int owner[MAXP];
    for (int p = 2; p <= MAXP; p++) {
        for (int v = 0; v < p; v++)
            owner[v] = v;
        for (int m = 1; m <= MAXM; m++) {
            for (int k = 0; k < 2; k++) {
                const dt_pp_schedule sched = k ? DT_PP_1F1B : DT_PP_GPIPE;
                make(&pl, owner, p, p, m, sched);
                for (int s = 0; s < p; s++) {
                    char want[512], got[512], what[96];
                    size_t o = 0;
                    const int warm = !k ? m : p - 1 - s < m ? p - 1 - s : m;
#define OP(c, j)                                                                                   \
    (o += (size_t)snprintf(want + o, sizeof want - o, o ? " %d%c%d" : "%d%c%d", s, c, j))
                    for (int j = 0; j < warm; j++)
                        OP('F', j);
                    for (int i = 0; i < m - warm; i++) {
                        OP('F', warm + i);
                        OP('B', i);
                    }
                    for (int j = m - warm; j < m; j++)
                        OP('B', j);
#undef OP
                    order_text(&pl, s, got, sizeof got);
                    snprintf(what, sizeof what, "%s P %d M %d stage %d", k ? "1f1b" : "gpipe", p, m,
                             s);
                    expect_text(what, want, got);
                    assert_int_equal(pl.slots[s], !k ? m : p - s < m ? p - s : m);
                }
            }
        }
    }
}

/* The text form: what is parsed formats back to the same text, and a bad text is refused
 * naming the character where it goes wrong. */
static void test_order_text(void **state)
{
    (void)state;
    static const char *const good[] = {"", "0F0", "0F0 0F1 0B0 0F2 0B1 0B2",
                                       "12F103 3B7 0B10 2147483647F0"};
    dt_pipe_op ops[8];
    char back[256];
    int n;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        DT_ASSERT_OK(dt_pipe_order_parse(good[i], ops, 8, &n));
        DT_ASSERT_OK(dt_pipe_order_format(ops, n, back, sizeof back));
        expect_text("format(parse(s))", good[i], back);
    }
    DT_ASSERT_OK(dt_pipe_order_parse("3B7 0F10", ops, 8, &n));
    assert_int_equal(n, 2);
    assert_true(ops[0].backward == 1 && ops[0].vs == 3 && ops[0].micro == 7);
    assert_true(ops[1].backward == 0 && ops[1].vs == 0 && ops[1].micro == 10);
    static const struct {
        const char *text, *error;
    } bad[] = {
        {"0F0 0X1", "at character 6 of \"0F0 0X1\": expected F or B, got 'X'"},
        {"0F0  0B0", "at character 5 of \"0F0  0B0\": expected a virtual stage"},
        {"01F0", "at character 1 of \"01F0\": expected a virtual stage (a number without "
                 "leading zeros), got '0'"},
        {"0F01", "at character 3 of \"0F01\": expected a micro-batch"},
        {"0F", "at character 3 of \"0F\": expected a micro-batch (a number without leading "
               "zeros), got the end"},
        {"0F0 ", "at character 4 of \"0F0 \": expected one space and the next op, got a space at "
                 "the end"},
        {" 0F0", "at character 1 of \" 0F0\": expected a virtual stage"},
        {"0F0,0B0", "at character 4 of \"0F0,0B0\": expected one space and the next op, got ','"},
        {"0F2147483648", "at character 3 of \"0F2147483648\": expected a micro-batch"},
        {"0F0 0F1 0F2", "at character 9 of \"0F0 0F1 0F2\": more than 2 ops"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        DT_ASSERT_STATUS(dt_pipe_order_parse(bad[i].text, ops, 2, &n), DT_ERR_INVALID);
        DT_ASSERT_ERROR_HAS(bad[i].error);
    }
    DT_ASSERT_STATUS(dt_pipe_order_format(ops, 2, back, 4), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("2 ops do not fit in 4 bytes");
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
        cmocka_unit_test(test_textbook_orders), cmocka_unit_test(test_contiguous_is_textbook),
        cmocka_unit_test(test_order_text),      cmocka_unit_test(test_round_robin_runs),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
