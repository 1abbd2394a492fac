/* test_dp.c — data-parallel training equals single-process training.
 *
 * Every case trains the same config twice from the same initial weights on the same
 * samples: once data-parallel over all ranks of the job, with per-rank batch b, and once in
 * a single process (on every rank, without communication) with the whole global batch.
 * Dropout is on: its masks are keyed by sample position, not by rank. The parameters must
 * agree within 1e-5 after 20 steps, with plain SGD (which catches a sum where an average
 * belongs: Adam's update barely notices a constant gradient factor) and with Adam. All
 * replicas must hold bitwise-identical parameters. */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/comm_mpi.h"
#include "dtrain/train.h"

static dt_comm *world;
static int rank, size;

static dt_config linreg_config(void)
{
    dt_config c = dt_config_default();
    dt_test_set(&c, "data.kind=synthetic");
    dt_test_set(&c, "data.synth_samples=1000");
    dt_test_set(&c, "data.test_samples=100");
    dt_test_set(&c, "model.layers=linear 4");
    dt_test_set(&c, "loss.kind=mse");
    dt_test_set(&c, "train.eval=off");
    dt_test_set(&c, "train.epochs=5");
    dt_test_set(&c, "train.max_steps=20");
    return c;
}

static dt_config mlp_config(void)
{
    dt_config c = dt_config_default();
    dt_test_set(&c, "model.layers=flatten, linear 32, relu, dropout 0.2, linear 10");
    dt_test_set(&c, "loss.kind=cross_entropy");
    dt_test_set(&c, "train.eval=off");
    dt_test_set(&c, "train.max_steps=20");
    return c;
}

/* Trains `cfg` over `comm` (NULL: this process alone) and copies the parameters out. */
static void train(const dt_config *cfg, dt_comm *comm, float **params, size_t *n, double *last_loss)
{
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(cfg, comm, &t));
    DT_ASSERT_OK(dt_trainer_run(t, NULL));
    /* The whole parameters through the trainer: under ZeRO-3 no rank holds them (each its
     * slice), and the trainer gathers them. */
    dt_model *m = dt_trainer_model(t);
    const float *whole = NULL;
    DT_ASSERT_OK(dt_trainer_whole_params(t, &whole));
    *n = dt_model_param_count(m);
    *params = malloc(*n * sizeof(float));
    memcpy(*params, whole, *n * sizeof(float));
    if (last_loss != NULL) {
        double acc = 0;
        DT_ASSERT_OK(dt_trainer_evaluate(t, last_loss, &acc));
    }
    dt_trainer_free(t);
}

static uint64_t hash_floats(const float *x, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof(float); i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The DP run with per-rank batch b against one process with the global batch. */
static void check_equivalent(const char *name, dt_config dpcfg, dt_config single)
{
    float *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    train(&dpcfg, world, &a, &na, NULL);
    train(&single, NULL, &b, &nb, NULL);
    assert_int_equal(na, nb);
    char label[160];
    snprintf(label, sizeof label, "%s (rank %d of %d)", name, rank, size);
    DT_ASSERT_CLOSE_FF(label, a, b, na, 1e-5, 0.0);
    /* Replicas bitwise identical: compare hashes across ranks. */
    uint64_t h = hash_floats(a, na), h0 = h;
    MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (h != h0)
        fprintf(stderr, "%s: rank %d's parameters differ from rank 0's\n", name, rank);
    assert_true(h == h0);
    free(a);
    free(b);
}

static void batch_times(dt_config *c, long b, long factor)
{
    char kv[64];
    snprintf(kv, sizeof kv, "train.batch=%ld", b * factor);
    dt_test_set(c, kv);
}

static void run_pair(const char *name, dt_config base, long b, const char *extra_dp,
                     const char *extra_single)
{
    dt_config dpc = base, one = base;
    batch_times(&dpc, b, 1);
    batch_times(&one, b, size);
    if (extra_dp)
        dt_test_set(&dpc, extra_dp);
    if (extra_single)
        dt_test_set(&one, extra_single);
    check_equivalent(name, dpc, one);
}

static void test_linreg_sgd(void **state)
{
    (void)state;
    dt_config c = linreg_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.05");
    dt_test_set(&c, "optim.momentum=0.9");
    run_pair("linreg sgd", c, 16, NULL, NULL);
}

static void test_linreg_adam(void **state)
{
    (void)state;
    dt_config c = linreg_config();
    dt_test_set(&c, "optim.lr=0.01");
    run_pair("linreg adam", c, 16, NULL, NULL);
}

static void test_mlp_sgd(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.1");
    run_pair("mlp sgd", c, 16, NULL, NULL);
}

static void test_mlp_adam(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    run_pair("mlp adam", c, 16, NULL, NULL);
}

static void test_mlp_zero1(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.1");
    dt_test_set(&c, "optim.momentum=0.9");
    run_pair("mlp sgd zero-1", c, 16, "parallel.zero=1", NULL);
    dt_config a = mlp_config();
    run_pair("mlp adam zero-1", a, 16, "parallel.zero=1", NULL);
}

/* ZeRO-3 (zero3.c): each rank holds a slice of the parameters, gradients and optimizer
 * state; every layer's range is gathered before it runs and its gradients reduce-scattered
 * into the slices after its backward. The MLP's layers (25,120, 32 + 330 floats) lie across
 * the slices' edges at every N: a layer split between two ranks, one rank holding parts of
 * several layers. The linear model's 5 floats leave a rank of N = 4 or more with a slice of
 * one float. With accumulation, with clipping (the norm summed over the slices) and with
 * AdamW's decay groups, whose offsets the slice shifts. */
static void test_mlp_zero3(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.1");
    dt_test_set(&c, "optim.momentum=0.9");
    run_pair("mlp sgd zero-3", c, 16, "parallel.zero=3", NULL);
    dt_config a = mlp_config();
    run_pair("mlp adam zero-3", a, 16, "parallel.zero=3", NULL);
    dt_config w = mlp_config();
    dt_test_set(&w, "optim.kind=adamw");
    dt_test_set(&w, "optim.decay=matrices");
    dt_test_set(&w, "optim.clip_norm=0.05");
    run_pair("mlp adamw matrices clip zero-3", w, 16, "parallel.zero=3", NULL);
    dt_config acc = c, one = c;
    dt_test_set(&acc, "train.batch=8");
    dt_test_set(&acc, "parallel.accumulation=2");
    dt_test_set(&acc, "parallel.zero=3");
    batch_times(&one, 16, size);
    check_equivalent("mlp accumulation k=2 zero-3", acc, one);
    dt_config lin = linreg_config();
    dt_test_set(&lin, "optim.kind=sgd");
    dt_test_set(&lin, "optim.lr=0.05");
    dt_test_set(&lin, "optim.momentum=0.9");
    run_pair("linreg sgd zero-3", lin, 16, "parallel.zero=3", NULL);
}

/* optim.clip_norm: the norm is over the reduced gradients, counted once (ddp's replicas hold
 * equal copies; ZeRO-1's ranks each hold a slice, summed over the group). The limit is far
 * below the MLP's gradient norm, so every step clips, and the clipped run must differ from
 * an unclipped one (the test cannot pass with clipping off on both sides). */
static void test_mlp_clip(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.1");
    dt_test_set(&c, "optim.momentum=0.9");
    dt_config clipped = c;
    dt_test_set(&clipped, "optim.clip_norm=0.05");
    run_pair("mlp sgd clip", clipped, 16, NULL, NULL);
    run_pair("mlp sgd clip zero-1", clipped, 16, "parallel.zero=1", NULL);
    dt_config w = mlp_config();
    dt_test_set(&w, "optim.kind=adamw");
    dt_test_set(&w, "optim.decay=matrices");
    dt_test_set(&w, "optim.clip_norm=0.05");
    run_pair("mlp adamw matrices clip zero-1", w, 16, "parallel.zero=1", NULL);
    /* The norm's per-tensor sums split between 2 threads (clip.c's team, from 65,536
     * elements: this MLP's 101,770), against one thread. */
    dt_config wide = w;
    dt_test_set(&wide, "model.layers=flatten, linear 128, relu, linear 10");
    run_pair("mlp adamw matrices clip 2 threads", wide, 16, "train.threads=2", NULL);
    /* Clipping took effect: one process with and without it. */
    float *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    batch_times(&c, 16, size);
    batch_times(&clipped, 16, size);
    train(&c, NULL, &a, &na, NULL);
    train(&clipped, NULL, &b, &nb, NULL);
    double most = 0;
    for (size_t i = 0; i < na; i++)
        most = fmax(most, fabs((double)a[i] - (double)b[i]));
    if (!(most > 1e-3))
        fail_msg("optim.clip_norm 0.05 changed no parameter by more than %g: clipping is off",
                 most);
    free(a);
    free(b);
}

static void test_accumulation(void **state)
{
    (void)state;
    /* k = 2 micro-steps of b on N ranks equals one process with batch N*k*b. */
    dt_config c = mlp_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.1");
    dt_config dpc = c, one = c;
    dt_test_set(&dpc, "train.batch=8");
    dt_test_set(&dpc, "parallel.accumulation=2");
    batch_times(&one, 16, size);
    check_equivalent("mlp accumulation k=2", dpc, one);
}

static void test_global_batch_uneven(void **state)
{
    (void)state;
    /* --global-batch 64 over N ranks (22/21/21 at N = 3) equals batch 64 in one process. */
    dt_config c = mlp_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.1");
    dt_config dpc = c, one = c;
    dt_test_set(&dpc, "parallel.global_batch=64");
    dt_test_set(&one, "train.batch=64");
    check_equivalent("mlp global batch 64", dpc, one);
}

static void test_partial_last_batch(void **state)
{
    (void)state;
    /* 1000 - 100 = 900 training samples; the global batch 16N does not divide them for
     * N = 3 or 4 (and 100 = 900 mod 40... ): several epochs cross the partial batch. */
    dt_config c = linreg_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.05");
    dt_test_set(&c, "data.synth_samples=1007");
    dt_test_set(&c, "train.max_steps=0");
    dt_test_set(&c, "train.epochs=2");
    run_pair("linreg last batch uneven", c, 16, "parallel.last_batch=uneven",
             "parallel.last_batch=uneven");
    run_pair("linreg last batch drop", c, 16, "parallel.last_batch=drop",
             "parallel.last_batch=drop");
}

static void test_rank_without_samples(void **state)
{
    (void)state;
    /* 997 - 100 = 897 = 14 x 64 + 1 training samples: each epoch's last global step holds
     * one sample, so every rank but rank 0 has none; they still join every collective, and
     * the result equals one process with batch 64 keeping its 1-sample last batch. */
    dt_config c = linreg_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.05");
    dt_test_set(&c, "data.synth_samples=997");
    dt_test_set(&c, "train.max_steps=0");
    dt_test_set(&c, "train.epochs=2");
    dt_config dpc = c, one = c;
    dt_test_set(&dpc, "parallel.global_batch=64");
    dt_test_set(&one, "train.batch=64");
    check_equivalent("linreg 1-sample last step", dpc, one);
    /* Under ZeRO-3 the ranks without samples still gather and reduce-scatter every layer. */
    dt_test_set(&dpc, "parallel.zero=3");
    check_equivalent("linreg 1-sample last step zero-3", dpc, one);
}

/* ---- the ConvNet --------------------------------------------------------------------- */

static dt_config convnet_config(long per_rank_batch, long factor, long steps)
{
    dt_config c = dt_config_default(); /* the seeds' ConvNet, dropout on */
    char kv[64];
    snprintf(kv, sizeof kv, "train.batch=%ld", per_rank_batch * factor);
    dt_test_set(&c, kv);
    snprintf(kv, sizeof kv, "train.max_steps=%ld", steps);
    dt_test_set(&c, kv);
    dt_test_set(&c, "train.eval=off");
    return c;
}

typedef struct curve {
    double loss[32];
    int n;
} curve;

static dt_status record_loss(void *ctx, const dt_step_info *s)
{
    curve *c = ctx;
    if (c->n < 32)
        c->loss[c->n++] = s->loss;
    return DT_OK;
}

static void test_convnet_first_gradient(void **state)
{
    (void)state;
    /* After the first step's all-reduce every gradient tensor equals the single-process
     * gradient of the N-times batch within 1e-5 in relative norm: only the summation
     * order differs. */
    dt_trainer *a = NULL, *b = NULL;
    dt_config dpc = convnet_config(8, 1, 1), one = convnet_config(8, size, 1);
    DT_ASSERT_OK(dt_trainer_create(&dpc, world, &a));
    DT_ASSERT_OK(dt_trainer_run(a, NULL));
    DT_ASSERT_OK(dt_trainer_create(&one, NULL, &b));
    DT_ASSERT_OK(dt_trainer_run(b, NULL));
    dt_model *ma = dt_trainer_model(a), *mb = dt_trainer_model(b);
    const float *ga = dt_model_grads(ma), *gb = dt_model_grads(mb);
    double worst = 0.0;
    for (int i = 0; i < dt_model_tensor_count(ma); i++) {
        const dt_param_info *p = dt_model_tensor(ma, i);
        double d2 = 0.0, r2 = 0.0;
        for (size_t e = 0; e < p->count; e++) {
            double d = (double)ga[p->offset + e] - (double)gb[p->offset + e];
            d2 += d * d;
            r2 += (double)gb[p->offset + e] * (double)gb[p->offset + e];
        }
        double rel = sqrt(d2) / (sqrt(r2) > 0 ? sqrt(r2) : 1.0);
        if (rel > worst)
            worst = rel;
        if (rel > 1e-5)
            fprintf(stderr,
                    "convnet gradient %s: relative norm difference %.3g > 1e-5 (rank %d "
                    "of %d)\n",
                    p->name, rel, rank, size);
        assert_true(rel <= 1e-5);
    }
    if (rank == 0)
        printf("convnet first-step gradients at %d ranks: worst relative norm difference "
               "%.3g\n",
               size, worst);
    dt_trainer_free(a);
    dt_trainer_free(b);
}

static void test_convnet_loss_curve(void **state)
{
    (void)state;
    /* Over 20 Adam steps the parameters drift apart by summation-order ulps that Adam
     * amplifies where gradients are near eps (PyTorch itself: 2e-4 between 2 ranks and one
     * process, docs/NOTES.md), so the loss curves are compared instead, within 1e-3 relative.
     * Measured here (Intel Xeon, OpenBLAS 0.3.21): 5.5e-8 at 2 ranks, 1.1e-7 at 4; the
     * first-step gradients differ by 1.1e-7 and 1.5e-7 in relative norm. */
    curve ca = {.n = 0}, cb = {.n = 0};
    dt_train_callbacks ra = {.ctx = &ca, .on_step = record_loss};
    dt_train_callbacks rb = {.ctx = &cb, .on_step = record_loss};
    dt_config dpc = convnet_config(8, 1, 20), one = convnet_config(8, size, 20);
    dt_trainer *a = NULL, *b = NULL;
    DT_ASSERT_OK(dt_trainer_create(&dpc, world, &a));
    DT_ASSERT_OK(dt_trainer_run(a, &ra));
    DT_ASSERT_OK(dt_trainer_create(&one, NULL, &b));
    DT_ASSERT_OK(dt_trainer_run(b, &rb));
    assert_int_equal(ca.n, 20);
    assert_int_equal(cb.n, 20);
    double worst = 0.0;
    for (int i = 0; i < 20; i++) {
        double rel = fabs(ca.loss[i] - cb.loss[i]) / fabs(cb.loss[i]);
        if (rel > worst)
            worst = rel;
    }
    if (rank == 0)
        printf("convnet loss curve over 20 Adam steps at %d ranks: worst relative difference "
               "%.3g\n",
               size, worst);
    DT_ASSERT_CLOSE_D("convnet losses", ca.loss, cb.loss, 20, 0.0, 1e-3);
    dt_trainer_free(a);
    dt_trainer_free(b);
}

static void test_mismatched_model_refused(void **state)
{
    (void)state;
    if (size < 2)
        skip();
    dt_config c = mlp_config();
    dt_test_set(&c, "train.batch=8");
    if (rank == size - 1)
        dt_test_set(&c, "model.layers=flatten, linear 33, relu, dropout 0.2, linear 10");
    dt_trainer *t = NULL;
    dt_status st = dt_trainer_create(&c, world, &t);
    if (st == DT_OK)
        st = dt_trainer_run(t, NULL);
    dt_trainer_free(t);
    assert_int_equal(st, DT_ERR_MISMATCH);
    char want[64];
    snprintf(want, sizeof want, "rank %d", size - 1);
    DT_ASSERT_ERROR_HAS(want);
}

/* Settings that must agree: the last rank's learning rate and seed differ; every rank
 * fails alike, naming both keys and which ranks hold which value. Threads may differ. */
static void test_settings_disagree(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "optim.lr=0.001");
    dt_test_set(&c, "train.seed=5");
    dt_test_set(&c, rank == 0 ? "train.threads=1" : "train.threads=2");
    DT_ASSERT_OK(dt_config_agree(&c, world));
    if (size < 2)
        skip();
    if (rank == size - 1) {
        dt_test_set(&c, "optim.lr=0.25");
        dt_test_set(&c, "train.seed=6");
    }
    DT_ASSERT_STATUS(dt_config_agree(&c, world), DT_ERR_MISMATCH);
    char want[160], first[64] = "";
    for (int r = 0; r < size - 1; r++) {
        char one[16];
        snprintf(one, sizeof one, "%s%d", r ? ", " : "", r);
        strcat(first, one);
    }
    snprintf(want, sizeof want, "optim.lr (rank%s %s: 0.001; rank %d: 0.25)", size > 2 ? "s" : "",
             first, size - 1);
    DT_ASSERT_ERROR_HAS(want);
    snprintf(want, sizeof want, "train.seed (rank%s %s: 5; rank %d: 6)", size > 2 ? "s" : "", first,
             size - 1);
    DT_ASSERT_ERROR_HAS(want);
}

/* dt_train_comm_stats's fields hold the figures that train.h names beside them: each
 * named figure the strategy describes is its field's value, and a field whose figure is
 * not described is 0. */
static void check_fields_by_name(const dt_train_comm_stats *cs, const dt_figure *figs, int n)
{
    const struct {
        const char *name;
        double field;
    } named[] = {
        {"dp", cs->dp},
        {"buckets", cs->buckets},
        {"dense_bytes_per_step", (double)cs->bytes_per_step},
        {"wire_bytes_per_step", (double)cs->wire_bytes_per_step},
        {"sync_steps", (double)cs->steps},
        {"wait_s", cs->wait_s},
        {"exposed_s", cs->exposed_s},
        {"optim_state_bytes", (double)cs->optim_state_bytes},
        {"tp", cs->tp},
        {"steps", (double)cs->optim_steps},
        {"pp", cs->pp},
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++) {
        double fig = 0.0;
        for (int i = 0; i < n; i++)
            if (figs[i].name != NULL && strcmp(figs[i].name, named[k].name) == 0)
                fig = figs[i].value;
        if (fig != named[k].field) {
            fprintf(stderr, "rank %d: figure %s is %.9g, its field %.9g\n", rank, named[k].name,
                    fig, named[k].field);
            bad = 1;
        }
    }
    if (bad)
        fail();
}

/* The waiting figures: the exposed wait (the last rank's, dp.c) is the same on every rank
 * and never more than any rank's own wait; a process alone has none. The fields are the
 * figures the strategy describes, by name. */
static void test_comm_stats(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    DT_ASSERT_OK(dt_trainer_run(t, NULL));
    dt_train_comm_stats cs;
    dt_trainer_comm_stats(t, &cs);
    dt_figure figs[DT_FIGURES_MAX];
    const int n = dt_trainer_describe(t, figs, DT_FIGURES_MAX);
    const size_t grad_bytes = dt_model_param_count(dt_trainer_model(t)) * sizeof(float);
    dt_trainer_free(t);
    assert_true(n > 0 && n <= DT_FIGURES_MAX);
    check_fields_by_name(&cs, figs, n);
    assert_int_equal(cs.dp, size);
    assert_int_equal(cs.tp, 1);
    assert_int_equal(cs.pp, 1);
    assert_int_equal(cs.optim_steps, 20);
    assert_true(cs.optim_state_bytes > 0);
    assert_int_equal(cs.bytes_per_step, size > 1 ? grad_bytes : 0);
    assert_int_equal(cs.wire_bytes_per_step, cs.bytes_per_step);
    if (size == 1) {
        assert_true(cs.steps == 0 && cs.wait_s == 0 && cs.exposed_s == 0);
        return;
    }
    assert_int_equal(cs.steps, 20);
    if (!(cs.exposed_s >= 0 && cs.exposed_s <= cs.wait_s)) {
        fprintf(stderr,
                "rank %d: exposed wait %.9f s, own wait %.9f s: expected "
                "0 <= exposed <= own\n",
                rank, cs.exposed_s, cs.wait_s);
        fail();
    }
    double lo = 0, hi = 0;
    MPI_Allreduce(&cs.exposed_s, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&cs.exposed_s, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (lo != hi) {
        fprintf(stderr, "exposed wait differs across ranks: %.9f .. %.9f s\n", lo, hi);
        fail();
    }
}

/* Evaluation splits the test set over the replicas (10,000 samples: uneven at 3) and sums
 * their scores: every rank's loss and accuracy are one process's, the summation order
 * aside. A replica scoring the wrong share passed every training comparison (make mutants'
 * eval-share-offset). */
/* Evaluation over every rank of the job (config `multi`) against one process (`one`): the same
 * loss within 1e-9 relative and the same accuracy. */
static void evaluate_pair(const char *what, const dt_config *multi, const dt_config *single)
{
    dt_trainer *dp = NULL, *one = NULL;
    DT_ASSERT_OK(dt_trainer_create(multi, world, &dp));
    DT_ASSERT_OK(dt_trainer_create(single, NULL, &one));
    double loss = 0, acc = 0, loss1 = 0, acc1 = 0;
    DT_ASSERT_OK(dt_trainer_evaluate(dp, &loss, &acc));
    DT_ASSERT_OK(dt_trainer_evaluate(one, &loss1, &acc1));
    /* a regression has no accuracy (NaN on both sides) */
    int ok =
        fabs(loss - loss1) <= 1e-9 * fabs(loss1) && (acc == acc1 || (isnan(acc) && isnan(acc1)));
    if (!ok)
        fprintf(stderr,
                "MISMATCH rank %d: %s on %d ranks: loss %.12g accuracy %.6f; one process: loss "
                "%.12g accuracy %.6f\n",
                rank, what, size, loss, acc, loss1, acc1);
    dt_trainer_free(dp);
    dt_trainer_free(one);
    assert_true(ok);
}

static void test_evaluate_equals_one_process(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "train.eval=on");
    evaluate_pair("evaluation", &c, &c);
}

/* Under ZeRO-3 every forward gathers each layer from every rank, so every rank must make as
 * many evaluation calls as the largest share needs: with batch 33 the 10,000 test images
 * over 3 ranks (3334 / 3333 / 3333) take 102 calls on rank 0 and 101 on the others. */
static void test_evaluate_zero3(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "train.eval=on");
    dt_test_set(&c, "train.batch=33");
    dt_config z = c;
    dt_test_set(&z, "parallel.zero=3");
    evaluate_pair("ZeRO-3 evaluation", &z, &c);
}

/* ... and through a pipeline of 2 stages (at an even rank count): with 101 test samples over
 * dp 2 (51 / 50) and chunks of 25 rows (batch 50 in 2 micro-batches) the first replica's
 * pipeline runs 3 chunks and the second 2, plus one on no rows. */
static void test_evaluate_zero3_pipeline(void **state)
{
    (void)state;
    if (size % 2 != 0)
        return; /* 2 stages */
    dt_config c = linreg_config();
    dt_test_set(&c, "model.layers=linear 8, relu, linear 4");
    dt_test_set(&c, "data.test_samples=101");
    dt_test_set(&c, "train.eval=on");
    dt_test_set(&c, "train.batch=50");
    dt_config z = c;
    dt_test_set(&z, "parallel.zero=3");
    dt_test_set(&z, "parallel.pp=2");
    dt_test_set(&z, "parallel.micro_batches=2");
    evaluate_pair("ZeRO-3 evaluation through a pipeline", &z, &c);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linreg_sgd),
        cmocka_unit_test(test_linreg_adam),
        cmocka_unit_test(test_mlp_sgd),
        cmocka_unit_test(test_mlp_adam),
        cmocka_unit_test(test_mlp_zero1),
        cmocka_unit_test(test_mlp_zero3),
        cmocka_unit_test(test_mlp_clip),
        cmocka_unit_test(test_accumulation),
        cmocka_unit_test(test_global_batch_uneven),
        cmocka_unit_test(test_partial_last_batch),
        cmocka_unit_test(test_rank_without_samples),
        cmocka_unit_test(test_convnet_first_gradient),
        cmocka_unit_test(test_convnet_loss_curve),
        cmocka_unit_test(test_mismatched_model_refused),
        cmocka_unit_test(test_settings_disagree),
        cmocka_unit_test(test_comm_stats),
        cmocka_unit_test(test_evaluate_equals_one_process),
        cmocka_unit_test(test_evaluate_zero3),
        cmocka_unit_test(test_evaluate_zero3_pipeline),
    };
    return dt_test_mpi_main(&argc, &argv, tests, &world, &rank, &size);
}
