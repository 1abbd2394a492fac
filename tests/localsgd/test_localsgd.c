/* test_localsgd.c — local SGD (src/parallel/localsgd.c) through the trainer, on 2 ranks (dp 2)
 * and on 4 (dp 2 x tp 2, and dp 2 x pp 2): a small MLP with dropout on synthetic regression
 * data (nothing to load, so that 14 runs on 4 ranks take seconds; cli_localsgd.sh runs the
 * MLP on Fashion-MNIST).
 *
 *   - H = 1 with plain SGD is ddp: after 20 steps every rank's parameters are within 1e-6 of
 *     ddp's on the same layout (averaging parameters after one step is averaging gradients),
 *     and the step losses the trainer reports are ddp's within 1e-6 relative (the loss
 *     crosses the replicas every step); with a global batch of 33 (17/16) too;
 *   - after each step, the replicas (the ranks of one tp and pp place, dp 0 and dp 1) hold
 *     bitwise the same parameters exactly when the step was a warm-up step or ended with an
 *     average, and different ones after a local step: H = 3 after 2 warm-up steps over 10
 *     steps is S S L L A L L A L A (S synchronous, L local, A averaged; the 10th is the
 *     run's last, averaged off the period). The sync count and the bytes per step follow;
 *   - the warm-up is ddp's: after each of the first 4 steps the parameters are ddp's, bit
 *     for bit (two replicas' sums are exact whatever the algorithm);
 *   - a NaN in one rank's gradient makes every rank skip that step, and the period keeps
 *     counting optimizer steps (the averages fall where they would without the skip);
 *   - clipping (optim.clip_norm 0.01, active on every step): the warm-up's steps are ddp's
 *     with clipping, bit for bit, on every layout (the norm summed over tp and pp), and
 *     unlike ddp's without it; a local step moves each replica's parameters by exactly
 *     lr x clip_norm (each replica clips its own gradient by its own norm; 2 ranks). */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/train.h"

/* The value of the run's figure `name` (dt_trainer_describe), or -1 when it has none. */
static double figure(const dt_trainer *t, const char *name)
{
    dt_figure f[DT_FIGURES_MAX];
    const int n = dt_trainer_describe(t, f, DT_FIGURES_MAX);
    for (int i = 0; i < n && i < DT_FIGURES_MAX; i++)
        if (f[i].name != NULL && strcmp(f[i].name, name) == 0)
            return f[i].value;
    return -1.0;
}

static dt_comm *world;
static int rank, size;

#define MAX_STEPS 32

/* The layouts the world size allows: dp 2 alone on 2 ranks; dp 2 x tp 2, dp 2 x pp 2 on 4. */
static int layouts(const char **names)
{
    if (size == 2) {
        names[0] = "parallel.tp=1";
        return 1;
    }
    if (size == 4) {
        names[0] = "parallel.tp=2";
        names[1] = "parallel.pp=2";
        return 2;
    }
    return 0;
}

static dt_config mlp_config(const char *layout, long steps)
{
    dt_config c = dt_config_default();
    dt_test_set(&c, "data.kind=synthetic");
    dt_test_set(&c, "data.synth_samples=2000");
    dt_test_set(&c, "data.synth_features=64");
    dt_test_set(&c, "data.synth_targets=4");
    dt_test_set(&c, "model.layers=linear 32, relu, dropout 0.2, linear 4");
    dt_test_set(&c, "loss.kind=mse");
    dt_test_set(&c, "train.eval=off");
    dt_test_set(&c, "train.threads=1");
    dt_test_set(&c, "train.batch=16");
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.1");
    dt_test_set_int(&c, "train.max_steps", steps);
    dt_test_set(&c, layout);
    if (strcmp(layout, "parallel.tp=2") == 0) /* split the first linear layer too */
        dt_test_set(&c, "parallel.tp_min_weights=0");
    return c;
}

static dt_config localsgd_config(const char *layout, long steps, long h, long warmup)
{
    dt_config c = mlp_config(layout, steps);
    dt_test_set(&c, "parallel.strategy=localsgd");
    dt_test_set_int(&c, "localsgd.sync_every", h);
    dt_test_set_int(&c, "localsgd.warmup", warmup);
    return c;
}

static uint64_t hash_floats(const float *x, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof(float); i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* What the step callback keeps: each step's loss and skip, whether the replicas were
 * bitwise equal after it, and (for the first `copies` steps) this rank's parameters. */
typedef struct record {
    dt_trainer *t;
    int n;
    double loss[MAX_STEPS];
    int skipped[MAX_STEPS];
    char pattern[MAX_STEPS + 1]; /* '=' the replicas equal after the step, 'x' not */
    int copies;
    float *params[MAX_STEPS];
} record;

/* 1 when every rank's parameters equal those of the rank at its tp and pp place with the
 * other dp rank. Collective over the world (every rank calls it after each step). */
static int replicas_equal(dt_trainer *t)
{
    dt_model *m = dt_trainer_model(t);
    dt_train_layout lay;
    dt_trainer_layout(t, &lay);
    uint64_t mine[4] = {hash_floats(dt_model_params(m), dt_model_param_count(m)),
                        (uint64_t)lay.dp_rank, (uint64_t)lay.tp_rank, (uint64_t)lay.pp_rank};
    uint64_t all[4 * 8];
    assert_true(size <= 8);
    MPI_Allgather(mine, 4, MPI_UINT64_T, all, 4, MPI_UINT64_T, MPI_COMM_WORLD);
    int equal = 1;
    for (int a = 0; a < size; a++)
        for (int b = 0; b < size; b++)
            if (all[4 * a + 1] != all[4 * b + 1] && all[4 * a + 2] == all[4 * b + 2] &&
                all[4 * a + 3] == all[4 * b + 3] && all[4 * a] != all[4 * b])
                equal = 0;
    return equal;
}

static dt_status on_step(void *ctx, const dt_step_info *s)
{
    record *r = ctx;
    const int equal = replicas_equal(r->t); /* collective: every step, kept or not */
    if (r->n >= MAX_STEPS) {                /* counted: the caller reports the attempts */
        r->n++;
        return DT_OK;
    }
    r->loss[r->n] = s->loss;
    r->skipped[r->n] = s->skipped;
    r->pattern[r->n] = equal ? '=' : 'x';
    if (r->n < r->copies) {
        dt_model *m = dt_trainer_model(r->t);
        const size_t n = dt_model_param_count(m);
        r->params[r->n] = malloc(n * sizeof(float));
        assert_non_null(r->params[r->n]);
        memcpy(r->params[r->n], dt_model_params(m), n * sizeof(float));
    }
    r->n++;
    r->pattern[r->n] = '\0';
    return DT_OK;
}

/* Trains cfg over the world with the callback recording into *r; returns the trainer (the
 * caller frees it and the copies). */
static dt_trainer *train(const dt_config *cfg, record *r, int copies, int64_t inject)
{
    dt_trainer *t = NULL;
    memset(r, 0, sizeof *r);
    r->copies = copies;
    DT_ASSERT_OK(dt_trainer_create(cfg, world, &t));
    r->t = t;
    if (inject > 0 && rank == size - 1)
        dt_trainer_inject_nonfinite(t, inject);
    dt_train_callbacks cb = {.ctx = r, .on_step = on_step};
    DT_ASSERT_OK(dt_trainer_run(t, &cb));
    return t;
}

static void free_record(record *r)
{
    for (int i = 0; i < r->copies && i < r->n; i++)
        free(r->params[i]);
}

/* The run reported `want` steps (a NaN or Inf makes the trainer attempt a step again). */
static void check_attempts(const char *what, const record *r, int want)
{
    if (r->n != want) {
        fprintf(stderr, "%s (rank %d of %d): %d steps reported, expected %d\n", what, rank, size,
                r->n, want);
        fail();
    }
}

/* Every rank's pattern is the expected one (it is computed from the same hashes on all). */
static void check_pattern(const char *what, const record *r, const char *want)
{
    if (strcmp(r->pattern, want) != 0) {
        fprintf(stderr,
                "%s (rank %d of %d): replicas equal after each step: expected %s, got %s "
                "('=' bitwise equal, 'x' different)\n",
                what, rank, size, want, r->pattern);
        fail();
    }
}

static void test_h1_equals_ddp(void **state)
{
    (void)state;
    const char *lay[2] = {NULL, NULL};
    for (int k = 0, n = layouts(lay); k < n; k++) {
        record a, b;
        dt_config ddp = mlp_config(lay[k], 20), ls = localsgd_config(lay[k], 20, 1, 0);
        dt_trainer *ta = train(&ddp, &a, 0, 0), *tb = train(&ls, &b, 0, 0);
        dt_model *ma = dt_trainer_model(ta), *mb = dt_trainer_model(tb);
        char label[160];
        snprintf(label, sizeof label, "localsgd H=1 vs ddp, %s: parameters (rank %d of %d)", lay[k],
                 rank, size);
        assert_int_equal(dt_model_param_count(ma), dt_model_param_count(mb));
        DT_ASSERT_CLOSE_FF(label, dt_model_params(mb), dt_model_params(ma),
                           dt_model_param_count(ma), 1e-6, 0.0);
        snprintf(label, sizeof label, "localsgd H=1 vs ddp, %s: step losses (rank %d of %d)",
                 lay[k], rank, size);
        check_attempts(label, &a, 20);
        check_attempts(label, &b, 20);
        DT_ASSERT_CLOSE_D(label, b.loss, a.loss, 20, 0.0, 1e-6);
        check_pattern(label, &b, "====================");
        dt_trainer_free(ta);
        dt_trainer_free(tb);
    }
}

/* A global batch of 33 splits 17/16 over the replicas: each one's gradient is its sum over
 * the nominal share G / R, so H = 1 is still ddp (a plain mean over each replica's own
 * samples would weigh the 16 samples' more). */
static void test_h1_uneven_split(void **state)
{
    (void)state;
    const char *lay[2] = {NULL, NULL};
    if (layouts(lay) == 0)
        skip();
    record a, b;
    dt_config ddp = mlp_config(lay[0], 20), ls = localsgd_config(lay[0], 20, 1, 0);
    dt_test_set(&ddp, "parallel.global_batch=33");
    dt_test_set(&ls, "parallel.global_batch=33");
    dt_trainer *ta = train(&ddp, &a, 0, 0), *tb = train(&ls, &b, 0, 0);
    dt_model *ma = dt_trainer_model(ta), *mb = dt_trainer_model(tb);
    char label[160];
    snprintf(label, sizeof label, "localsgd H=1 vs ddp, global batch 33, %s (rank %d of %d)",
             lay[0], rank, size);
    DT_ASSERT_CLOSE_FF(label, dt_model_params(mb), dt_model_params(ma), dt_model_param_count(ma),
                       1e-6, 0.0);
    dt_trainer_free(ta);
    dt_trainer_free(tb);
}

static void test_replicas_equal_after_averages(void **state)
{
    (void)state;
    const char *lay[2] = {NULL, NULL};
    for (int k = 0, n = layouts(lay); k < n; k++) {
        record r;
        dt_config c = localsgd_config(lay[k], 10, 3, 2);
        dt_trainer *t = train(&c, &r, 0, 0);
        char label[160];
        snprintf(label, sizeof label, "localsgd H=3 warm-up 2, %s", lay[k]);
        check_pattern(label, &r, "==xx=xx=x=");
        dt_train_comm_stats cs;
        dt_trainer_comm_stats(t, &cs);
        const int64_t syncs = (int64_t)figure(t, "syncs");
        const size_t bytes = dt_model_param_count(dt_trainer_model(t)) * sizeof(float);
        if (syncs != 3 || cs.steps != 10 || cs.bytes_per_step != bytes / 3 || cs.dp != 2) {
            fprintf(stderr,
                    "%s (rank %d): stats: %lld averages, %lld steps, %zu bytes per step, dp %d; "
                    "expected 3, 10, %zu (%zu parameter bytes / 3), 2\n",
                    label, rank, (long long)syncs, (long long)cs.steps, cs.bytes_per_step, cs.dp,
                    bytes / 3, bytes);
            fail();
        }
        dt_trainer_free(t);
    }
}

static void test_warmup_is_ddp(void **state)
{
    (void)state;
    const char *lay[2] = {NULL, NULL};
    for (int k = 0, n = layouts(lay); k < n; k++) {
        record a, b;
        dt_config ddp = mlp_config(lay[k], 8), ls = localsgd_config(lay[k], 8, 4, 4);
        dt_trainer *ta = train(&ddp, &a, 4, 0), *tb = train(&ls, &b, 4, 0);
        const size_t np = dt_model_param_count(dt_trainer_model(ta));
        check_attempts("ddp, 8 steps", &a, 8);
        check_attempts("localsgd warm-up 4, H=4, 8 steps", &b, 8);
        for (int s = 0; s < 4; s++) {
            char label[160];
            snprintf(label, sizeof label,
                     "localsgd warm-up 4 vs ddp, %s: parameters after step %d (rank %d of %d)",
                     lay[k], s + 1, rank, size);
            assert_true(dt_check_equal_bits(label, b.params[s], a.params[s], np));
        }
        check_pattern("localsgd warm-up 4, H=4", &b, "====xxx=");
        free_record(&a);
        free_record(&b);
        dt_trainer_free(ta);
        dt_trainer_free(tb);
    }
}

static void test_nonfinite_skipped_together(void **state)
{
    (void)state;
    const char *lay[2] = {NULL, NULL};
    for (int k = 0, n = layouts(lay); k < n; k++) {
        record r;
        dt_config c = localsgd_config(lay[k], 6, 2, 0);
        dt_trainer *t = train(&c, &r, 0, 3);
        /* 7 attempts for 6 optimizer steps; the 3rd skipped on every rank. Averages after
         * optimizer steps 2, 4, 6: the skipped attempt leaves the replicas as step 2 did. */
        char label[160];
        snprintf(label, sizeof label, "localsgd H=2, a NaN at attempt 3 on rank %d, %s", size - 1,
                 lay[k]);
        check_attempts(label, &r, 7); /* 6 optimizer steps, the 3rd attempt skipped */
        for (int s = 0; s < 7; s++)
            if (r.skipped[s] != (s == 2)) {
                fprintf(stderr, "%s (rank %d): attempt %d skipped %d, expected %d\n", label, rank,
                        s + 1, r.skipped[s], s == 2);
                fail();
            }
        check_pattern(label, &r, "x==x=x=");
        const int64_t syncs = (int64_t)figure(t, "syncs");
        if (syncs != 3 || dt_trainer_skipped_steps(t) != 1) {
            fprintf(stderr, "%s (rank %d): %lld averages and %lld skipped, expected 3 and 1\n",
                    label, rank, (long long)syncs, (long long)dt_trainer_skipped_steps(t));
            fail();
        }
        dt_trainer_free(t);
    }
}

/* The L2 norm of a - b over n floats, in double. */
static double dist(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s);
}

static void test_clip(void **state)
{
    (void)state;
    const char *lay[2] = {NULL, NULL};
    for (int k = 0, n = layouts(lay); k < n; k++) {
        record a, b, c;
        dt_config ddp = mlp_config(lay[k], 4), ls = localsgd_config(lay[k], 4, 8, 2);
        dt_config plain = mlp_config(lay[k], 4);
        dt_config *all[3] = {&ddp, &ls, &plain};
        for (int i = 0; i < 3; i++) { /* lr 0.1 on every step */
            dt_test_set(all[i], "schedule.kind=constant");
            dt_test_set(all[i], "schedule.warmup_steps=0");
        }
        dt_test_set(&ddp, "optim.clip_norm=0.01");
        dt_test_set(&ls, "optim.clip_norm=0.01");
        dt_trainer *ta = train(&ddp, &a, 2, 0), *tb = train(&ls, &b, 3, 0);
        dt_trainer *tc = train(&plain, &c, 1, 0);
        const size_t np = dt_model_param_count(dt_trainer_model(ta));
        for (int s = 0; s < 2; s++) {
            char label[160];
            snprintf(label, sizeof label,
                     "localsgd warm-up 2 vs ddp, clip_norm 0.01, %s: parameters after step %d "
                     "(rank %d of %d)",
                     lay[k], s + 1, rank, size);
            assert_true(dt_check_equal_bits(label, b.params[s], a.params[s], np));
        }
        if (memcmp(a.params[0], c.params[0], np * sizeof(float)) == 0) {
            fprintf(stderr, "ddp with clip_norm 0.01 equals ddp without (%s): not clipped\n",
                    lay[k]);
            fail();
        }
        /* Step 3 is local (H 8): lr 0.1 x clip_norm 0.01 for each replica alone. */
        if (size == 2) {
            const double moved = dist(b.params[2], b.params[1], np);
            if (fabs(moved - 1e-3) > 1e-3 * 1e-4) {
                fprintf(stderr,
                        "localsgd, clip_norm 0.01, local step 3 (rank %d): the parameters "
                        "moved %.9g, expected lr x clip_norm = 0.001\n",
                        rank, moved);
                fail();
            }
        }
        free_record(&a);
        free_record(&b);
        free_record(&c);
        dt_trainer_free(ta);
        dt_trainer_free(tb);
        dt_trainer_free(tc);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h1_equals_ddp),
        cmocka_unit_test(test_h1_uneven_split),
        cmocka_unit_test(test_replicas_equal_after_averages),
        cmocka_unit_test(test_warmup_is_ddp),
        cmocka_unit_test(test_nonfinite_skipped_together),
        cmocka_unit_test(test_clip),
    };
    return dt_test_mpi_main(&argc, &argv, tests, &world, &rank, &size);
}
