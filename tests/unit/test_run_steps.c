/* test_run_steps.c — what each step of a run takes, as train.h and config.h define it:
 *  - its samples: epoch e takes the permutation dt_rng_permutation(seed, e) (file order
 *    with data.shuffle off), step k of it the positions [kG, kG + G) of that order; the
 *    last, partial batch is the rest (last_batch uneven), dropped (drop) or filled from the
 *    epoch's first positions (pad). Read from the model's input after each step: every
 *    sample of the synthetic set has its own features, so a row names its sample;
 *  - its learning rate: a cosine schedule with total_steps 0 decays over the run's steps
 *    after the warm-up (schedule.total_steps' help), written out here.
 *
 * Loss curves and the layouts' comparisons with one process cannot see either: both sides
 * of those take the same samples and rates whatever the trainer picks. A run that reused
 * the first epoch's order every epoch, padded past the epoch's end, kept drop's short batch
 * or counted the warm-up into the cosine passed them all (make mutants: shuffle-same-
 * every-epoch, pad-no-wrap, drop-as-pad, cosine-total-warmup). */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/rng.h"
#include "dtrain/train.h"

enum { BATCH = 5, EPOCHS = 3, MAX_STEPS = 64 };

typedef struct order_log {
    dt_trainer *t;
    const float *table; /* [n][numel]: sample i's features as the trainer gathers them */
    int64_t n, numel;
    int64_t steps;
    int64_t epoch[MAX_STEPS], count[MAX_STEPS];
    int64_t sample[MAX_STEPS][BATCH];
    int bad; /* a row that matched no sample, or two */
} order_log;

/* The sample whose features row x holds, or -1 (none or several). */
static int64_t sample_of(const order_log *g, const float *x)
{
    int64_t found = -1;
    for (int64_t i = 0; i < g->n; i++)
        if (memcmp(g->table + i * g->numel, x, (size_t)g->numel * sizeof(float)) == 0) {
            if (found >= 0)
                return -1;
            found = i;
        }
    return found;
}

static dt_status record(void *ctx, const dt_step_info *s)
{
    order_log *g = ctx;
    if (g->steps == MAX_STEPS || s->samples > BATCH) {
        g->bad = 1;
        return DT_OK;
    }
    const float *x = dt_model_input(dt_trainer_model(g->t));
    int64_t k = g->steps++;
    g->epoch[k] = s->epoch;
    g->count[k] = s->samples;
    for (int64_t r = 0; r < s->samples; r++) {
        g->sample[k][r] = sample_of(g, x + r * g->numel);
        g->bad |= g->sample[k][r] < 0;
    }
    return DT_OK;
}

static dt_config order_config(const char *shuffle, const char *last_batch)
{
    dt_config c = dt_config_default();
    dt_test_set(&c, "data.kind=synthetic");
    dt_test_set(&c, "data.synth_samples=26");
    dt_test_set(&c, "data.test_samples=3"); /* 23 training samples: G = 5 leaves 3 */
    dt_test_set(&c, "model.layers=linear 4");
    dt_test_set(&c, "loss.kind=mse");
    dt_test_set(&c, "train.eval=off");
    dt_test_set(&c, "train.seed=11");
    dt_test_set_int(&c, "train.batch", BATCH);
    dt_test_set_int(&c, "train.epochs", EPOCHS);
    char kv[64];
    snprintf(kv, sizeof kv, "data.shuffle=%s", shuffle);
    dt_test_set(&c, kv);
    snprintf(kv, sizeof kv, "parallel.last_batch=%s", last_batch);
    dt_test_set(&c, kv);
    return c;
}

/* Trains the config and logs each step's samples. */
static void run_logged(const dt_config *cfg, order_log *g)
{
    memset(g, 0, sizeof *g);
    DT_ASSERT_OK(dt_trainer_create(cfg, NULL, &g->t));
    const dt_dataset *ds = dt_trainer_train_set(g->t);
    g->n = ds->n;
    g->numel = dt_dataset_sample_numel(ds);
    float *table = malloc((size_t)(g->n * g->numel) * sizeof(float));
    float *y = malloc((size_t)(ds->target_width > 0 ? ds->target_width : 1) * sizeof(float));
    assert_non_null(table);
    assert_non_null(y);
    for (int64_t i = 0; i < g->n; i++)
        dt_dataset_gather(ds, &i, 1, table + i * g->numel, NULL, y);
    g->table = table;
    dt_train_callbacks cb = {.ctx = g, .on_step = record};
    DT_ASSERT_OK(dt_trainer_run(g->t, &cb));
    dt_trainer_free(g->t);
    g->t = NULL;
    free(table);
    free(y);
    g->table = NULL;
}

/* The log against train.h's order: `steps` steps per epoch of G = BATCH, the last one of
 * `last` samples starting at position (steps - 1) G, wrapped modulo n (pad). */
static int check_order(const char *name, const order_log *g, int shuffle, int64_t steps,
                       int64_t last)
{
    int64_t *perm = malloc((size_t)g->n * sizeof(int64_t));
    assert_non_null(perm);
    int ok = !g->bad && g->steps == EPOCHS * steps;
    if (!ok)
        fprintf(stderr, "FAIL %s: %lld steps logged (expected %lld), unmatched rows: %d\n", name,
                (long long)g->steps, (long long)(EPOCHS * steps), g->bad);
    for (int64_t k = 0; ok && k < g->steps; k++) {
        const int64_t e = k / steps, j = k % steps;
        const int64_t count = j == steps - 1 ? last : BATCH;
        if (shuffle)
            dt_rng_permutation(11, (uint64_t)e, g->n, perm);
        else
            for (int64_t i = 0; i < g->n; i++)
                perm[i] = i;
        if (g->epoch[k] != e || g->count[k] != count) {
            fprintf(stderr,
                    "FAIL %s: step %lld: epoch %lld with %lld samples, expected epoch "
                    "%lld with %lld\n",
                    name, (long long)k, (long long)g->epoch[k], (long long)g->count[k],
                    (long long)e, (long long)count);
            ok = 0;
        }
        for (int64_t r = 0; ok && r < count; r++) {
            const int64_t want = perm[(j * BATCH + r) % g->n];
            if (g->sample[k][r] != want) {
                fprintf(stderr,
                        "FAIL %s: epoch %lld step %lld row %lld: sample %lld, expected "
                        "%lld\n",
                        name, (long long)e, (long long)j, (long long)r, (long long)g->sample[k][r],
                        (long long)want);
                ok = 0;
            }
        }
    }
    free(perm);
    return ok;
}

/* Shuffled, the last batch uneven: each epoch its own permutation (and the first two
 * differ where the steps read them, so reusing one would be seen). */
static void test_each_epoch_its_own_order(void **state)
{
    (void)state;
    dt_config c = order_config("on", "uneven");
    order_log g;
    run_logged(&c, &g);
    assert_int_equal(g.n, 23);
    assert_true(check_order("shuffle, uneven", &g, 1, 5, 3));
    int64_t p0[23], p1[23];
    dt_rng_permutation(11, 0, 23, p0);
    dt_rng_permutation(11, 1, 23, p1);
    assert_true(memcmp(p0, p1, sizeof p0) != 0);
}

static void test_drop_and_pad(void **state)
{
    (void)state;
    dt_config c = order_config("on", "drop");
    order_log g;
    run_logged(&c, &g);
    assert_true(check_order("shuffle, drop", &g, 1, 4, BATCH));
    c = order_config("on", "pad");
    run_logged(&c, &g);
    /* positions 20 .. 24 mod 23: the epoch's last three, then its first two */
    assert_true(check_order("shuffle, pad", &g, 1, 5, BATCH));
}

static void test_file_order(void **state)
{
    (void)state;
    dt_config c = order_config("off", "uneven");
    order_log g;
    run_logged(&c, &g);
    assert_true(check_order("file order", &g, 0, 5, 3));
}

typedef struct lr_log {
    int64_t steps;
    double lr[MAX_STEPS];
} lr_log;

static dt_status record_lr(void *ctx, const dt_step_info *s)
{
    lr_log *g = ctx;
    if (g->steps < MAX_STEPS)
        g->lr[g->steps++] = s->lr;
    return DT_OK;
}

/* Cosine over the whole run (total_steps 0) after 3 warm-up steps: 3 epochs of 5 steps, so
 * the decay spans the 12 steps after the warm-up; then the same with train.max_steps 9
 * (6 after the warm-up). */
static void test_cosine_over_the_run(void **state)
{
    (void)state;
    const double lr = 0.1, min_lr = 0.01, start = 0.2, pi = 3.14159265358979323846;
    for (int capped = 0; capped < 2; capped++) {
        dt_config c = order_config("on", "uneven");
        dt_test_set(&c, "schedule.kind=cosine");
        dt_test_set(&c, "optim.lr=0.1");
        dt_test_set(&c, "schedule.min_lr=0.01");
        dt_test_set(&c, "schedule.warmup_steps=3");
        dt_test_set(&c, "schedule.warmup_start=0.2");
        if (capped)
            dt_test_set(&c, "train.max_steps=9");
        const int64_t total = capped ? 9 : EPOCHS * 5, decay = total - 3;
        dt_trainer *t = NULL;
        lr_log g = {0};
        DT_ASSERT_OK(dt_trainer_create(&c, NULL, &t));
        dt_train_callbacks cb = {.ctx = &g, .on_step = record_lr};
        DT_ASSERT_OK(dt_trainer_run(t, &cb));
        dt_trainer_free(t);
        assert_int_equal(g.steps, total);
        for (int64_t s = 0; s < total; s++) {
            const double want =
                s < 3 ? lr * (start + (1.0 - start) * (double)s / 3.0)
                      : min_lr +
                            (lr - min_lr) * 0.5 * (1.0 + cos(pi * (double)(s - 3) / (double)decay));
            if (fabs(g.lr[s] - want) > 1e-12 * lr) {
                print_error("%s: step %lld: learning rate %.12g, expected %.12g (cosine over %lld "
                            "steps after 3 of warm-up)\n",
                            capped ? "max_steps 9" : "3 epochs", (long long)s, g.lr[s], want,
                            (long long)decay);
                fail();
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_epoch_its_own_order),
        cmocka_unit_test(test_drop_and_pad),
        cmocka_unit_test(test_file_order),
        cmocka_unit_test(test_cosine_over_the_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
