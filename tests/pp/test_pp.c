/* test_pp.c — pipeline-parallel training equals single-process training.
 *
 * The layouts follow the world size: 2 ranks are pp = 2, 3 ranks pp = 3, 4 ranks both
 * dp = 2 x pp = 2 and tp = 2 x pp = 2. Every case trains the same config on the grid and in
 * one process (on every rank, without communication) from the same seed:
 *
 *   - against one process with the same micro-batches (gradient accumulation over the same
 *     global batch): bit for bit when the grid has no dp or tp axis (a stage runs each
 *     micro-batch's layers as the whole model does, and its backwards run in micro-batch
 *     order, so even the gradient sums are the same), within 1e-5 otherwise;
 *   - against one process with one large batch: within 1e-5 (SGD, 20 steps).
 *
 * The MLP and the ConvNet train with dropout on: every stage draws its masks from the
 * whole model's keys. A GPT whose head shares the embedding's table checks the whole
 * parameters the stages give (dt_trainer_whole_params): the table once; and
 * dt_trainer_check_replicas (--check-replicas), which must find a difference planted in each
 * kind of copy. */
#include "dt_test.h"
#include "dt_test_mpi.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/comm_mpi.h"
#include "dtrain/train.h"

static dt_comm *world;
static int rank, size;

/* One layout of this world size. */
typedef struct layout {
    int dp, tp, pp;
} layout;

static layout layouts[2];
static int nlayouts;

/* Two hidden layers, so that tp 2 x pp 2 has a cut outside every tensor-parallel block. */
static dt_config mlp_config(void)
{
    dt_config c = dt_config_default();
    dt_test_set(&c,
                "model.layers=flatten, linear 32, relu, dropout 0.2, linear 24, relu, linear 10");
    dt_test_set(&c, "loss.kind=cross_entropy");
    dt_test_set(&c, "train.eval=off");
    dt_test_set(&c, "train.max_steps=20");
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.1");
    dt_test_set(&c, "optim.momentum=0.9");
    return c;
}

/* The seeds' ConvNet (dropout on) for `steps` steps. */
static dt_config convnet_config(long steps)
{
    dt_config c = dt_config_default();
    dt_test_set_int(&c, "train.max_steps", steps);
    dt_test_set(&c, "train.eval=off");
    return c;
}

/* base on the grid: micro-batches of b per replica, m of them per step. */
static dt_config on_grid(dt_config base, const layout *l, long b, long m, const char *schedule)
{
    dt_test_set_int(&base, "train.batch", b);
    dt_test_set_int(&base, "parallel.micro_batches", m);
    dt_test_set_int(&base, "parallel.dp", l->dp);
    dt_test_set_int(&base, "parallel.tp", l->tp);
    dt_test_set_int(&base, "parallel.pp", l->pp);
    /* Each only where its axis exists: elsewhere dt_config_check refuses it as changing
     * nothing. */
    if (l->tp > 1)
        dt_test_set(&base, "parallel.tp_min_weights=0");
    char kv[64];
    snprintf(kv, sizeof kv, "parallel.pp_schedule=%s", schedule);
    if (l->pp > 1)
        dt_test_set(&base, kv);
    return base;
}

/* base alone: the same global batch, as `micro` micro-batches of dp x b. */
static dt_config alone(dt_config base, const layout *l, long b, long m, long micro)
{
    dt_test_set_int(&base, "train.batch", b * l->dp * m / micro);
    dt_test_set_int(&base, "parallel.accumulation", micro);
    return base;
}

static void name_of(char *buf, size_t n, const char *what, const layout *l, long m,
                    const char *schedule)
{
    snprintf(buf, n, "%s, dp %d x tp %d x pp %d, %s, M = %ld (rank %d)", what, l->dp, l->tp, l->pp,
             schedule, m, rank);
}

static uint64_t hash_floats(const float *x, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof(float); i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Every rank must hold the same whole parameters. */
static void assert_same_everywhere(const char *label, const float *whole, size_t n)
{
    uint64_t h = hash_floats(whole, n), h0 = h;
    MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (h != h0)
        fprintf(stderr, "%s: whole parameters differ from rank 0's\n", label);
    assert_true(h == h0);
}

static void train_alone(dt_config c, dt_trainer **out)
{
    DT_ASSERT_OK(dt_trainer_create(&c, NULL, out));
    DT_ASSERT_OK(dt_trainer_run(*out, NULL));
}

/* The MLP on layout l: against the same micro-batches alone (bitwise without dp or tp) and
 * against one large batch (1e-5). */
static void check_mlp_with(const layout *l, long m, const char *schedule, int round_robin,
                           const char *extra)
{
    char label[200];
    name_of(label, sizeof label,
            extra != NULL ? extra
            : round_robin ? "mlp sgd, round-robin"
                          : "mlp sgd",
            l, m, schedule);
    dt_config base = mlp_config();
    if (extra != NULL)
        dt_test_set(&base, extra);
    dt_config gc = on_grid(base, l, 8, m, schedule);
    if (round_robin)
        dt_test_set(&gc, "parallel.pp_split=round_robin");
    dt_trainer *g = NULL, *same = NULL, *big = NULL;
    DT_ASSERT_OK(dt_trainer_create(&gc, world, &g));
    DT_ASSERT_OK(dt_trainer_run(g, NULL));
    train_alone(alone(base, l, 8, m, m), &same);
    train_alone(alone(base, l, 8, m, 1), &big);
    dt_train_layout lay;
    dt_trainer_layout(g, &lay);
    assert_true(lay.dp == l->dp && lay.tp == l->tp && lay.pp == l->pp);
    const float *whole = NULL;
    DT_ASSERT_OK(dt_trainer_whole_params(g, &whole));
    const size_t n = dt_model_param_count(dt_trainer_model(same));
    const float *ps = dt_model_params(dt_trainer_model(same));
    if (l->dp == 1 && l->tp == 1 && memcmp(whole, ps, n * sizeof(float)) != 0) {
        fprintf(stderr, "%s: not bit for bit the single process with %ld micro-batches\n", label,
                m);
        DT_ASSERT_CLOSE_FF(label, whole, ps, n, 0.0, 0.0);
    }
    DT_ASSERT_CLOSE_FF(label, whole, ps, n, 1e-5, 0.0);
    DT_ASSERT_CLOSE_FF(label, whole, dt_model_params(dt_trainer_model(big)), n, 1e-5, 0.0);
    assert_same_everywhere(label, whole, n);
    dt_trainer_free(g);
    dt_trainer_free(same);
    dt_trainer_free(big);
}

static void check_mlp(const layout *l, long m, const char *schedule, int round_robin)
{
    check_mlp_with(l, m, schedule, round_robin, NULL);
}

/* optim.clip_norm over the stages (and tp parts, dp replicas): the norm summed over the pp
 * group counts every layer once, so every layout clips as one process does. The limit is
 * far below the MLP's gradient norm: every step clips (tests/dp/test_dp.c checks that the
 * limit changes the result). */
static void test_mlp_clip(void **state)
{
    (void)state;
    for (int k = 0; k < nlayouts; k++)
        check_mlp_with(&layouts[k], 4, "1f1b", 0, "optim.clip_norm=0.05");
}

static void test_mlp_schedules(void **state)
{
    (void)state;
    static const char *const schedules[] = {"gpipe", "1f1b"};
    static const long micro[] = {1, 4};
    for (int k = 0; k < nlayouts; k++)
        for (int s = 0; s < 2; s++)
            for (int j = 0; j < 2; j++)
                check_mlp(&layouts[k], micro[j], schedules[s], 0);
}

static void test_mlp_uneven_last_batch(void **state)
{
    (void)state;
    /* A last step smaller than the global batch (parallel.last_batch = uneven): the
     * micro-batches shrink, some to nothing, on every stage alike. 58 training samples at
     * a global batch of 3 x 4 x dp leave 10. */
    for (int k = 0; k < nlayouts; k++) {
        const layout *l = &layouts[k];
        dt_config base = mlp_config();
        dt_test_set(&base, "data.kind=synthetic");
        dt_test_set(&base, "data.synth_samples=158");
        dt_test_set(&base, "data.test_samples=100");
        dt_test_set(&base, "data.synth_features=12");
        dt_test_set(&base, "data.synth_targets=3");
        dt_test_set(&base, "model.layers=linear 16, relu, linear 8, relu, linear 3");
        dt_test_set(&base, "loss.kind=mse");
        dt_test_set(&base, "train.max_steps=0");
        dt_test_set(&base, "train.epochs=2");
        char label[200];
        name_of(label, sizeof label, "uneven last batch", l, 4, "1f1b");
        dt_config gc = on_grid(base, l, 3, 4, "1f1b");
        dt_trainer *g = NULL, *same = NULL;
        DT_ASSERT_OK(dt_trainer_create(&gc, world, &g));
        DT_ASSERT_OK(dt_trainer_run(g, NULL));
        train_alone(alone(base, l, 3, 4, 4), &same);
        const float *whole = NULL;
        DT_ASSERT_OK(dt_trainer_whole_params(g, &whole));
        const size_t n = dt_model_param_count(dt_trainer_model(same));
        DT_ASSERT_CLOSE_FF(label, whole, dt_model_params(dt_trainer_model(same)), n, 1e-5, 0.0);
        dt_trainer_free(g);
        dt_trainer_free(same);
    }
}

/* Recompute on the grid (every stage re-runs its segments, tp ranks their collectives in
 * the same order): the same whole parameters as without it, bit for bit. */
static void test_recompute(void **state)
{
    (void)state;
    for (int k = 0; k < nlayouts; k++) {
        const layout *l = &layouts[k];
        const float *whole[2] = {NULL, NULL};
        dt_trainer *g[2] = {NULL, NULL};
        for (int r = 0; r < 2; r++) {
            dt_config gc = on_grid(mlp_config(), l, 8, 4, "gpipe");
            dt_test_set(&gc, r == 0 ? "train.recompute=none" : "train.recompute=every-2");
            DT_ASSERT_OK(dt_trainer_create(&gc, world, &g[r]));
            DT_ASSERT_OK(dt_trainer_run(g[r], NULL));
            DT_ASSERT_OK(dt_trainer_whole_params(g[r], &whole[r]));
        }
        char label[200];
        name_of(label, sizeof label, "mlp, recompute every-2 against none", l, 4, "gpipe");
        DT_ASSERT_CLOSE_FF(label, whole[1], whole[0],
                           (int64_t)dt_model_whole_param_count(dt_trainer_model(g[0])), 0.0, 0.0);
        dt_trainer_free(g[0]);
        dt_trainer_free(g[1]);
    }
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

/* 20 Adam steps of the ConvNet, m micro-batches of 2 per replica, on layout l: every rank
 * reports the loss of the stage with the last layer, which follows the single process's
 * within 1e-3 relative (Adam amplifies summation-order ulps where dp or tp change the sums:
 * docs/NOTES.md), bit for bit without dp or tp. */
static void check_convnet_curve(const layout *l, long m, const char *schedule, int round_robin)
{
    const dt_config base = convnet_config(20);
    dt_config gc = on_grid(base, l, 2, m, schedule), oc = alone(base, l, 2, m, m);
    if (round_robin)
        dt_test_set(&gc, "parallel.pp_split=round_robin");
    curve cg = {.n = 0}, co = {.n = 0};
    dt_train_callbacks rg = {.ctx = &cg, .on_step = record_loss};
    dt_train_callbacks ro = {.ctx = &co, .on_step = record_loss};
    dt_trainer *g = NULL, *o = NULL;
    DT_ASSERT_OK(dt_trainer_create(&gc, world, &g));
    DT_ASSERT_OK(dt_trainer_run(g, &rg));
    DT_ASSERT_OK(dt_trainer_create(&oc, NULL, &o));
    DT_ASSERT_OK(dt_trainer_run(o, &ro));
    assert_int_equal(cg.n, 20);
    assert_int_equal(co.n, 20);
    dt_train_layout lay;
    dt_trainer_layout(g, &lay);
    assert_true(!round_robin || lay.stage_runs >= 2);
    const double rtol = l->dp == 1 && l->tp == 1 ? 0.0 : 1e-3;
    DT_ASSERT_CLOSE_D(round_robin ? "convnet losses, round-robin" : "convnet losses", cg.loss,
                      co.loss, 20, 0.0, rtol);
    if (rank == 0)
        printf("convnet: 20 Adam steps at dp %d x tp %d x pp %d%s, %s, M = %ld follow the single "
               "process (last loss %.6f vs %.6f)\n",
               l->dp, l->tp, l->pp, round_robin ? " round-robin" : "", schedule, m, cg.loss[19],
               co.loss[19]);
    dt_trainer_free(g);
    dt_trainer_free(o);
}

/* The round-robin placement (layer l on stage l mod pp): every stage holds several runs of
 * layers, and a micro-batch crosses the stages once per layer. The same equalities as the
 * contiguous split's: the MLP under both schedules at M = 1 and 4, the ConvNet's 20-step
 * losses. Under tp it would begin a stage inside a tensor-parallel block: refused. */
static void test_round_robin(void **state)
{
    (void)state;
    static const char *const schedules[] = {"gpipe", "1f1b"};
    static const long micro[] = {1, 4};
    for (int k = 0; k < nlayouts; k++) {
        const layout *l = &layouts[k];
        if (l->tp > 1) {
            dt_config c = on_grid(mlp_config(), l, 8, 2, "gpipe");
            dt_test_set(&c, "parallel.pp_split=round_robin");
            dt_trainer *t = NULL;
            DT_ASSERT_STATUS(dt_trainer_create(&c, world, &t), DT_ERR_INVALID);
            DT_ASSERT_ERROR_HAS("inside a tensor-parallel block");
            dt_test_mpi_agree("the refusal of round robin under tp", DT_TEST_MPI_REFUSAL_S);
            continue;
        }
        for (int s = 0; s < 2; s++)
            for (int j = 0; j < 2; j++)
                check_mlp(l, micro[j], schedules[s], 1);
        for (int s = 0; s < 2; s++)
            check_convnet_curve(l, 3, schedules[s], 1);
    }
}

/* ---- the ConvNet --------------------------------------------------------------------- */

static void test_convnet_first_gradient(void **state)
{
    (void)state;
    /* After one step each stage's gradients (its part of each tensor) equal the single
     * process's at the same whole indices within 1e-5 in relative norm. */
    for (int k = 0; k < nlayouts; k++) {
        const layout *l = &layouts[k];
        const dt_config base = convnet_config(1);
        dt_config gc = on_grid(base, l, 4, 2, "1f1b");
        dt_trainer *g = NULL, *o = NULL;
        DT_ASSERT_OK(dt_trainer_create(&gc, world, &g));
        DT_ASSERT_OK(dt_trainer_run(g, NULL));
        train_alone(alone(base, l, 4, 2, 2), &o);
        dt_model *mg = dt_trainer_model(g), *mo = dt_trainer_model(o);
        const float *gg = dt_model_grads(mg), *go = dt_model_grads(mo);
        assert_true(dt_model_tensor_count(mg) > 0 || l->tp > 1 || l->pp > 2);
        double worst = 0.0;
        for (int i = 0; i < dt_model_tensor_count(mg); i++) {
            const dt_param_info *p = dt_model_tensor(mg, i);
            const dt_param_info *w = dt_model_find_tensor(mo, p->name);
            assert_non_null(w);
            double d2 = 0.0, r2 = 0.0;
            for (size_t e = 0; e < p->count; e++) {
                const double ref = go[w->offset + dt_param_whole_index(p, e)];
                const double d = (double)gg[p->offset + e] - ref;
                d2 += d * d;
                r2 += ref * ref;
            }
            const double rel = sqrt(d2) / (r2 > 0 ? sqrt(r2) : 1.0);
            worst = rel > worst ? rel : worst;
            if (rel > 1e-5)
                fprintf(stderr,
                        "convnet gradient %s: relative norm difference %.3g > 1e-5 (rank %d, "
                        "dp %d x tp %d x pp %d)\n",
                        p->name, rel, rank, l->dp, l->tp, l->pp);
            assert_true(rel <= 1e-5);
        }
        double all = worst;
        MPI_Allreduce(&worst, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0)
            printf("convnet first-step gradients at dp %d x tp %d x pp %d: worst relative "
                   "norm difference %.3g\n",
                   l->dp, l->tp, l->pp, all);
        dt_trainer_free(g);
        dt_trainer_free(o);
    }
}

static void test_convnet_loss_curve(void **state)
{
    (void)state;
    for (int k = 0; k < nlayouts; k++)
        check_convnet_curve(&layouts[k], 2, "gpipe", 0);
}

/* ---- evaluation, weights, memory, messages -------------------------------------------- */

static void tmp_path(char *path, size_t n)
{
    if (rank == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, n, "%s/dtrain-test-pp-%ld.safetensors", tmp != NULL && tmp[0] ? tmp : "/tmp",
                 (long)getpid());
    }
    MPI_Bcast(path, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD);
}

static void test_weights_and_evaluation(void **state)
{
    (void)state;
    /* The grid's evaluation (a forward pipeline, scored on the last stage) equals the
     * single process's on the grid's weights, written whole and read back whole; the file
     * loads on the grid again, each stage taking its tensors. */
    const layout *l = &layouts[0];
    dt_config base = mlp_config();
    dt_test_set(&base, "train.eval=on");
    dt_config gc = on_grid(base, l, 8, 4, "1f1b"), oc = alone(base, l, 8, 4, 4);
    char path[256] = "";
    tmp_path(path, sizeof path);
    dt_trainer *g = NULL, *o = NULL, *g2 = NULL;
    DT_ASSERT_OK(dt_trainer_create(&gc, world, &g));
    DT_ASSERT_OK(dt_trainer_run(g, NULL));
    double loss_g = 0, acc_g = 0, loss_o = 0, acc_o = 0, loss_g2 = 0, acc_g2 = 0;
    DT_ASSERT_OK(dt_trainer_evaluate(g, &loss_g, &acc_g));
    const float *whole = NULL;
    const dt_model *wm = NULL;
    DT_ASSERT_OK(dt_trainer_whole_params(g, &whole));
    DT_ASSERT_OK(dt_trainer_whole_model(g, &wm));
    if (rank == 0)
        DT_ASSERT_OK(dt_weights_write(wm, whole, path, 0.0, 1.0));
    MPI_Barrier(MPI_COMM_WORLD);
    dt_test_set(&oc, "train.epochs=0");
    DT_ASSERT_OK(dt_trainer_create(&oc, NULL, &o));
    DT_ASSERT_OK(dt_trainer_load_weights(o, path));
    DT_ASSERT_OK(dt_trainer_evaluate(o, &loss_o, &acc_o));
    dt_test_set(&gc, "train.epochs=0");
    DT_ASSERT_OK(dt_trainer_create(&gc, world, &g2));
    DT_ASSERT_OK(dt_trainer_load_weights(g2, path));
    DT_ASSERT_OK(dt_trainer_evaluate(g2, &loss_g2, &acc_g2));
    if (rank == 0)
        printf("test loss at dp %d x tp %d x pp %d %.9f, its weights alone %.9f, reloaded on "
               "the grid %.9f\n",
               l->dp, l->tp, l->pp, loss_g, loss_o, loss_g2);
    assert_true(fabs(loss_o - loss_g) <= 1e-6 * fabs(loss_g));
    assert_true(loss_g2 == loss_g && acc_g2 == acc_g && acc_o == acc_g);
    dt_trainer_free(g);
    dt_trainer_free(g2);
    dt_trainer_free(o);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        unlink(path);
}

/* Moves the first element of this rank's first tensor that `pick` takes by one ulp (when
 * `mine`), runs dt_trainer_check_replicas on every rank and puts the element back: the
 * check must fail on every rank, naming a tensor and `words`. */
static void plant_difference(dt_trainer *g, int mine, int (*pick)(const dt_param_info *),
                             const char *words)
{
    dt_model *m = dt_trainer_model(g);
    float *x = NULL, old = 0.0f;
    for (int i = 0; mine && x == NULL && i < dt_model_tensor_count(m); i++)
        if (pick(dt_model_tensor(m, i)))
            x = dt_model_params(m) + dt_model_tensor(m, i)->offset;
    if (x != NULL) {
        old = *x;
        *x = nextafterf(old, INFINITY);
    }
    dt_replica_check rc;
    dt_error_clear();
    const dt_status st = dt_trainer_check_replicas(g, &rc);
    if (x != NULL)
        *x = old;
    if (st != DT_ERR_MISMATCH || strstr(dt_last_error(), words) == NULL)
        fprintf(stderr, "rank %d: a planted difference %s: status %d, \"%s\"\n", rank, words,
                (int)st, dt_last_error());
    assert_int_equal(st, DT_ERR_MISMATCH);
    DT_ASSERT_ERROR_HAS(words);
}

static int any_tensor(const dt_param_info *p)
{
    (void)p;
    return 1;
}

static int whole_tensor(const dt_param_info *p)
{
    return p->split_dim < 0;
}

static int tied_copy(const dt_param_info *p)
{
    return p->tie == DT_TIE_COPY;
}

/* --check-replicas on the grid (dt_trainer_check_replicas): every kind of copy it keeps
 * compared and equal, and one ulp planted in each kind found: in one dp replica's copy of a
 * tensor, in one tp rank's copy of a whole tensor (on every replica of it, so that only the
 * tp group sees it), in the head's copy of the tied table (on every rank of the last stage). */
static void check_replicas_catch(dt_trainer *g, const layout *l)
{
    dt_replica_check rc;
    DT_ASSERT_OK(dt_trainer_check_replicas(g, &rc));
    assert_int_equal(rc.dp, l->dp);
    assert_int_equal(rc.tp, l->tp);
    assert_true(rc.tied == (1u | (uint64_t)1 << (l->pp - 1)));
    const int tp_rank = rank % l->tp, dp_rank = rank / l->tp % l->dp,
              pp_rank = rank / (l->tp * l->dp);
    if (l->dp > 1)
        plant_difference(g, dp_rank == l->dp - 1 && tp_rank == 0 && pp_rank == 0, any_tensor,
                         "differs between data-parallel replicas");
    if (l->tp > 1)
        plant_difference(g, tp_rank == l->tp - 1 && pp_rank == 0, whole_tensor,
                         "differs between tensor-parallel ranks that each hold it whole");
    plant_difference(g, pp_rank == l->pp - 1, tied_copy,
                     "transformer.wte.weight differs between the tied table's copies");
    DT_ASSERT_OK(dt_trainer_check_replicas(g, &rc));
}

/* A GPT whose head shares the token embedding's table (lm_head), cut into stages: the table
 * on the first stage, the head's copy on the last, their gradients summed between the two
 * every step (parallel/tie.c). The whole parameters gathered from the stages
 * (dt_trainer_whole_params, which dt_weights_write writes) hold the table once, the
 * embedding stage's: before training one process's bits, and after 10 SGD steps with every
 * dropout on within 1e-5 of one process's at the same micro-batches (not its bits: one
 * process adds the head's and the embedding's parts of the table's gradient into one buffer
 * micro-batch by micro-batch, the pipeline sums each stage's whole-step part once). */
static void test_gpt_tied_whole(void **state)
{
    (void)state;
    static const char *const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "slept"};
    /* rank 0's file, by the same name on every rank (the ranks must agree on the config) */
    char corpus[512] = "";
    if (rank == 0) {
        const char *path = dt_test_word_corpus(words, 8, 99u, 6000);
        snprintf(corpus, sizeof corpus, "%s", path != NULL ? path : "");
    }
    MPI_Bcast(corpus, sizeof corpus, MPI_CHAR, 0, MPI_COMM_WORLD);
    assert_true(corpus[0] != '\0');
    dt_config base = dt_config_default();
    char kv[600];
    dt_test_set(&base, "data.kind=text");
    snprintf(kv, sizeof kv, "data.text_files=%s", corpus);
    dt_test_set(&base, kv);
    dt_test_set(&base, "model.block_size=8");
    dt_test_set(&base, "model.layers=transformer.wte: embedding 256 24, transformer.wpe: position, "
                       "dropout 0.1, transformer.h.0: block 3 p=0.1 attn_p=0.2, "
                       "transformer.h.1: block 3 p=0.1 attn_p=0.2, transformer.ln_f: layernorm, "
                       "lm_head");
    dt_test_set(&base, "loss.kind=cross_entropy");
    dt_test_set(&base, "optim.kind=sgd");
    dt_test_set(&base, "optim.lr=0.1");
    dt_test_set(&base, "optim.momentum=0.9");
    dt_test_set(&base, "train.eval=off");
    dt_test_set(&base, "train.max_steps=10");
    for (int k = 0; k < nlayouts; k++) {
        const layout *l = &layouts[k];
        for (int trained = 0; trained <= 1; trained++) {
            char label[160];
            name_of(label, sizeof label, trained ? "a tied GPT after 10 steps" : "a tied GPT", l, 3,
                    "1f1b");
            dt_config gc = on_grid(base, l, 2, 3, "1f1b"), oc = alone(base, l, 2, 3, 3);
            dt_trainer *g = NULL, *o = NULL;
            DT_ASSERT_OK(dt_trainer_create(&gc, world, &g));
            DT_ASSERT_OK(dt_trainer_create(&oc, NULL, &o));
            if (trained) {
                DT_ASSERT_OK(dt_trainer_run(g, NULL));
                DT_ASSERT_OK(dt_trainer_run(o, NULL));
            }
            const float *whole = NULL;
            DT_ASSERT_OK(dt_trainer_whole_params(g, &whole));
            dt_model *om = dt_trainer_model(o);
            const size_t n = dt_model_param_count(om);
            const dt_model *wm = NULL;
            DT_ASSERT_OK(dt_trainer_whole_model(g, &wm));
            assert_int_equal(dt_model_param_count(wm), n);
            DT_ASSERT_CLOSE_FF(label, whole, dt_model_params(om), n, trained ? 1e-5 : 0.0, 0.0);
            assert_same_everywhere(label, whole, n);
            if (trained)
                check_replicas_catch(g, l);
            dt_trainer_free(g);
            dt_trainer_free(o);
        }
    }
}

/* A weight file whose last tensor, the last stage's, holds a NaN: every rank refuses it
 * with the same status and the tensor's name, and no rank's parameters change, the first
 * stage's neither though its own tensors are clean (the ranks agree on the check before any
 * rank copies: otherwise the first stage would load the file and train on while the last
 * one stopped). */
static void test_weights_refused(void **state)
{
    (void)state;
    const layout *l = &layouts[0];
    dt_config gc = on_grid(mlp_config(), l, 8, 4, "1f1b");
    char path[256] = "";
    tmp_path(path, sizeof path);
    dt_trainer *g = NULL;
    DT_ASSERT_OK(dt_trainer_create(&gc, world, &g));
    DT_ASSERT_OK(dt_trainer_save_weights(g, path, 0.0, 1.0));
    if (rank == 0) { /* the file's last float: the last layer's last bias element */
        FILE *f = fopen(path, "r+b");
        assert_non_null(f);
        const float nan = NAN;
        assert_int_equal(fseek(f, -(long)sizeof nan, SEEK_END), 0);
        assert_int_equal(fwrite(&nan, sizeof nan, 1, f), 1);
        assert_int_equal(fclose(f), 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    dt_model *m = dt_trainer_model(g);
    const size_t n = dt_model_param_count(m);
    float *before = malloc(n * sizeof(float));
    assert_non_null(before);
    memcpy(before, dt_model_params(m), n * sizeof(float));
    DT_ASSERT_STATUS(dt_trainer_load_weights(g, path), DT_ERR_NONFINITE);
    DT_ASSERT_ERROR_HAS("tensor '6.bias' holds NaN");
    if (memcmp(before, dt_model_params(m), n * sizeof(float)) != 0)
        fail_msg("rank %d (stage %d): a refused file changed the parameters", rank,
                 rank / (l->dp * l->tp));
    free(before);
    dt_trainer_free(g);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        unlink(path);
}

static void test_slots_and_messages(void **state)
{
    (void)state;
    /* GPipe plans all M micro-batches' rows on every stage, 1F1B min(P - stage, M); each
     * step a stage sends M activations forward (not the last) and M gradients back (not
     * the first). */
    const layout *l = &layouts[0];
    const long m = 4, b = 8;
    static const char *const schedules[] = {"gpipe", "1f1b"};
    for (int s = 0; s < 2; s++) {
        dt_config c = on_grid(mlp_config(), l, b, m, schedules[s]);
        dt_test_set(&c, "train.max_steps=5");
        dt_trainer *t = NULL;
        DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
        DT_ASSERT_OK(dt_trainer_run(t, NULL));
        dt_train_layout lay;
        dt_trainer_layout(t, &lay);
        const long slots = s == 0 ? m : (l->pp - lay.pp_rank < m ? l->pp - lay.pp_rank : m);
        assert_int_equal(dt_model_max_batch(dt_trainer_model(t)), slots * b);
        dt_train_comm_stats cs;
        dt_trainer_comm_stats(t, &cs);
        const long per_step = m * ((lay.pp_rank < l->pp - 1) + (lay.pp_rank > 0));
        if (cs.pp != l->pp || cs.pp_messages != 5 * per_step) {
            fprintf(stderr, "rank %d (stage %d, %s): %lld messages in 5 steps, expected %ld\n",
                    rank, lay.pp_rank, schedules[s], (long long)cs.pp_messages, 5 * per_step);
            fail();
        }
        assert_true(cs.pp_compute_s > 0.0 && cs.pp_wait_s >= 0.0 &&
                    cs.pp_compute_s + cs.pp_wait_s <= cs.pp_step_s * 1.0001);
        dt_trainer_free(t);
    }
}

static void test_refusals(void **state)
{
    (void)state;
    /* Each refused on every rank, before any message: none of these can hang. After each,
     * the ranks meet within seconds (dt_test_mpi_agree): a refusal that some ranks raise and
     * others do not leaves those inside the library, waiting for the ones that left. */
    dt_config c = mlp_config();
    dt_trainer *t = NULL;
    dt_test_set_int(&c, "parallel.pp", size + 1);
    DT_ASSERT_STATUS(dt_trainer_create(&c, world, &t), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("parallel.pp");
    assert_null(t);
    dt_test_mpi_agree("the refusal of pp = size + 1", DT_TEST_MPI_REFUSAL_S);
    /* A layout whose product is not the world. */
    c = mlp_config();
    dt_test_set_int(&c, "parallel.pp", size);
    dt_test_set(&c, "parallel.dp=2");
    DT_ASSERT_STATUS(dt_trainer_create(&c, world, &t), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("does not match");
    dt_test_mpi_agree("the refusal of a layout that is not the world", DT_TEST_MPI_REFUSAL_S);
    /* More stages than layers. */
    c = mlp_config();
    dt_test_set(&c, "model.layers=flatten, linear 10");
    dt_test_set_int(&c, "parallel.pp", size);
    if (size > 2) {
        DT_ASSERT_STATUS(dt_trainer_create(&c, world, &t), DT_ERR_INVALID);
        DT_ASSERT_ERROR_HAS("stage needs at least one layer");
    }
    dt_test_mpi_agree("the refusal of more stages than layers", DT_TEST_MPI_REFUSAL_S);
    /* An empty stage from split points. */
    c = mlp_config();
    dt_test_set_int(&c, "parallel.pp", 2);
    dt_test_set(&c, "parallel.pp_split=7");
    DT_ASSERT_STATUS(dt_trainer_create(&c, world, &t), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("parallel.pp_split");
    dt_test_mpi_agree("the refusal of an empty stage", DT_TEST_MPI_REFUSAL_S);
    /* Under tp 2, a split point inside a block (linear 32 is column-parallel, the relu
     * after it works on its block). */
    if (size == 4) {
        c = on_grid(mlp_config(), &layouts[1], 8, 2, "1f1b");
        dt_test_set(&c, "parallel.pp_split=2");
        DT_ASSERT_STATUS(dt_trainer_create(&c, world, &t), DT_ERR_INVALID);
        DT_ASSERT_ERROR_HAS("inside a tensor-parallel block");
    }
    dt_test_mpi_agree("the refusal of a split inside a tp block", DT_TEST_MPI_REFUSAL_S);
    assert_null(t);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dt_blas_set_threads(1);
    if (size == 4) {
        layouts[nlayouts++] = (layout){.dp = 2, .tp = 1, .pp = 2};
        layouts[nlayouts++] = (layout){.dp = 1, .tp = 2, .pp = 2};
    } else {
        layouts[nlayouts++] = (layout){.dp = 1, .tp = 1, .pp = size};
    }
    if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", &world) != DT_OK) {
        fprintf(stderr, "comm: %s\n", dt_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_schedules),
        cmocka_unit_test(test_mlp_clip),
        cmocka_unit_test(test_mlp_uneven_last_batch),
        cmocka_unit_test(test_recompute),
        cmocka_unit_test(test_round_robin),
        cmocka_unit_test(test_convnet_first_gradient),
        cmocka_unit_test(test_convnet_loss_curve),
        cmocka_unit_test(test_gpt_tied_whole),
        cmocka_unit_test(test_weights_and_evaluation),
        cmocka_unit_test(test_weights_refused),
        cmocka_unit_test(test_slots_and_messages),
        cmocka_unit_test(test_refusals),
    };
    int failed = dt_test_mpi_run_cases(argv[0], tests);
    dt_comm_free(world);
    MPI_Finalize();
    return failed != 0;
}
