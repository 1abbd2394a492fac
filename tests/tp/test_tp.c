/* test_tp.c — tensor-parallel training equals single-process training.
 *
 * The layout follows the world size: 2 ranks are tp = 2, 3 ranks tp = 3 (uneven: linear
 * regression's 4 outputs split 2/1/1, the MLP's 32 hidden features 11/11/10), 4 ranks
 * dp = 2 x tp = 2. Every case trains the same config twice from the same initial weights:
 * once on the grid with per-replica batch b, once in one process (on every rank, without
 * communication) with the global batch dp x b. parallel.tp_min_weights = 0 splits every
 * layer that can be split, so column- and row-parallel linear layers, column-parallel
 * convolutions, the gathers and the blocks between them are all exercised. Dropout is on
 * in the MLP and the ConvNet: a block draws the numbers of the whole tensor. */
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
static int tp, dp; /* the layout of this world size */

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
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.05");
    dt_test_set(&c, "optim.momentum=0.9");
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

/* The seeds' ConvNet (dropout on) at batch b, for `steps` steps. */
static dt_config convnet_config(long b, long steps)
{
    dt_config c = dt_config_default();
    dt_test_set_int(&c, "train.batch", b);
    dt_test_set_int(&c, "train.max_steps", steps);
    dt_test_set(&c, "train.eval=off");
    return c;
}

/* The same config on the grid (batch b per replica) and alone (batch dp x b). */
static void make_pair(dt_config base, long b, dt_config *grid, dt_config *one)
{
    *grid = base;
    *one = base;
    dt_test_set_int(grid, "train.batch", b);
    dt_test_set_int(grid, "parallel.tp", tp);
    dt_test_set_int(grid, "parallel.dp", dp);
    dt_test_set(grid, "parallel.tp_min_weights=0");
    dt_test_set_int(one, "train.batch", b * dp);
}

static uint64_t hash_floats(const float *x, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof(float); i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Trains on the grid and alone; the whole parameters must agree within atol, and be the
 * same bits on every rank (tp ranks hold the replicated layers alike, dp replicas agree). */
static void check_equivalent_grid(const char *name, dt_config base, long b, double atol,
                                  const char *grid_extra)
{
    dt_config gc, oc;
    make_pair(base, b, &gc, &oc);
    if (grid_extra != NULL)
        dt_test_set(&gc, grid_extra);
    dt_trainer *g = NULL, *o = NULL;
    DT_ASSERT_OK(dt_trainer_create(&gc, world, &g));
    DT_ASSERT_OK(dt_trainer_run(g, NULL));
    DT_ASSERT_OK(dt_trainer_create(&oc, NULL, &o));
    DT_ASSERT_OK(dt_trainer_run(o, NULL));
    const float *whole = NULL;
    DT_ASSERT_OK(dt_trainer_whole_params(g, &whole));
    dt_model *mg = dt_trainer_model(g), *mo = dt_trainer_model(o);
    assert_int_equal(dt_model_tp_size(mg), tp);
    /* The grid's order (comm.h): tp partners are neighbouring ranks. */
    dt_train_layout lay;
    dt_trainer_layout(g, &lay);
    assert_true(lay.dp == dp && lay.tp == tp && lay.pp == 1 && lay.tp_rank == rank % tp &&
                lay.dp_rank == rank / tp && lay.world_rank == rank && lay.world_size == size);
    const size_t n = dt_model_whole_param_count(mg);
    assert_int_equal(n, dt_model_param_count(mo));
    char label[160];
    snprintf(label, sizeof label, "%s, dp %d x tp %d (rank %d)", name, dp, tp, rank);
    DT_ASSERT_CLOSE_FF(label, whole, dt_model_params(mo), n, atol, 0.0);
    uint64_t h = hash_floats(whole, n), h0 = h;
    MPI_Bcast(&h0, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (h != h0)
        fprintf(stderr, "%s: rank %d's whole parameters differ from rank 0's\n", label, rank);
    assert_true(h == h0);
    dt_trainer_free(g);
    dt_trainer_free(o);
}

static void check_equivalent(const char *name, dt_config base, long b, double atol)
{
    check_equivalent_grid(name, base, b, atol, NULL);
}

static void test_linreg_sgd(void **state)
{
    (void)state;
    check_equivalent("linreg sgd", linreg_config(), 16, 1e-5);
}

static void test_mlp_sgd(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.1");
    check_equivalent("mlp sgd, dropout", c, 16, 1e-5);
}

static void test_mlp_adam(void **state)
{
    (void)state;
    check_equivalent("mlp adam, dropout", mlp_config(), 16, 1e-5);
}

static void test_mlp_zero1(void **state)
{
    (void)state;
    /* ZeRO-1 shards each rank's part over its dp group. */
    dt_config c = mlp_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.1");
    dt_test_set(&c, "parallel.zero=1");
    check_equivalent("mlp sgd, zero-1", c, 16, 1e-5);
}

/* optim.clip_norm: split tensors' parts summed over the tp group, the replicated ones counted
 * on tp rank 0 only (and ZeRO-1's slices over dp): the norm of the whole model, as one
 * process clips. Every step clips at this limit. */
static void test_mlp_clip(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.1");
    dt_test_set(&c, "optim.clip_norm=0.05");
    check_equivalent("mlp sgd, clip", c, 16, 1e-5);
    /* fc1 (100,352 weights) whole on every tp rank, fc2 split: most of the norm is in a
     * replicated tensor, which must count once. */
    check_equivalent_grid("mlp sgd, clip, fc1 replicated", c, 16, 1e-5,
                          "parallel.tp_min_weights=200000");
    dt_test_set(&c, "parallel.zero=1");
    check_equivalent("mlp sgd, clip, zero-1", c, 16, 1e-5);
}

static void test_mlp_accumulation(void **state)
{
    (void)state;
    dt_config c = mlp_config();
    dt_test_set(&c, "optim.kind=sgd");
    dt_test_set(&c, "optim.lr=0.1");
    dt_config gc, oc;
    make_pair(c, 8, &gc, &oc);
    dt_test_set(&gc, "parallel.accumulation=2");
    dt_test_set_int(&oc, "train.batch", 16L * dp);
    dt_trainer *g = NULL, *o = NULL;
    DT_ASSERT_OK(dt_trainer_create(&gc, world, &g));
    DT_ASSERT_OK(dt_trainer_run(g, NULL));
    DT_ASSERT_OK(dt_trainer_create(&oc, NULL, &o));
    DT_ASSERT_OK(dt_trainer_run(o, NULL));
    const float *whole = NULL;
    DT_ASSERT_OK(dt_trainer_whole_params(g, &whole));
    DT_ASSERT_CLOSE_FF("mlp, 2 micro-steps", whole, dt_model_params(dt_trainer_model(o)),
                       dt_model_whole_param_count(dt_trainer_model(g)), 1e-5, 0.0);
    dt_trainer_free(g);
    dt_trainer_free(o);
}

/* ---- the ConvNet --------------------------------------------------------------------- */

static void test_convnet_first_gradient(void **state)
{
    (void)state;
    /* After the first step every gradient this rank holds (its part of each tensor)
     * equals the single-process gradient at the same whole indices within 1e-5 in
     * relative norm: only the order of sums differs. */
    dt_config gc, oc;
    make_pair(convnet_config(8, 1), 8, &gc, &oc);
    dt_trainer *g = NULL, *o = NULL;
    DT_ASSERT_OK(dt_trainer_create(&gc, world, &g));
    DT_ASSERT_OK(dt_trainer_run(g, NULL));
    DT_ASSERT_OK(dt_trainer_create(&oc, NULL, &o));
    DT_ASSERT_OK(dt_trainer_run(o, NULL));
    dt_model *mg = dt_trainer_model(g), *mo = dt_trainer_model(o);
    const float *gg = dt_model_grads(mg), *go = dt_model_grads(mo);
    double worst = 0.0;
    for (int i = 0; i < dt_model_tensor_count(mg); i++) {
        const dt_param_info *p = dt_model_tensor(mg, i);
        double d2 = 0.0, r2 = 0.0;
        for (size_t e = 0; e < p->count; e++) {
            const double ref = go[p->whole_offset + dt_param_whole_index(p, e)];
            const double d = (double)gg[p->offset + e] - ref;
            d2 += d * d;
            r2 += ref * ref;
        }
        const double rel = sqrt(d2) / (r2 > 0 ? sqrt(r2) : 1.0);
        if (rel > worst)
            worst = rel;
        if (rel > 1e-5)
            fprintf(stderr,
                    "convnet gradient %s (rows/columns %lld:%lld): relative norm "
                    "difference %.3g > 1e-5 (rank %d, dp %d x tp %d)\n",
                    p->name, (long long)p->split_begin, (long long)p->split_end, rel, rank, dp, tp);
        assert_true(rel <= 1e-5);
    }
    if (rank == 0)
        printf("convnet first-step gradients at dp %d x tp %d: worst relative norm "
               "difference %.3g\n",
               dp, tp, worst);
    dt_trainer_free(g);
    dt_trainer_free(o);
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

static void test_convnet_loss_curve(void **state)
{
    (void)state;
    /* Over 20 Adam steps the parameters drift by summation-order ulps that Adam amplifies
     * (as under data parallelism, docs/NOTES.md): the loss curves are compared, within
     * 1e-3 relative. */
    dt_config gc, oc;
    make_pair(convnet_config(8, 20), 8, &gc, &oc);
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
    double worst = 0.0;
    for (int i = 0; i < 20; i++) {
        const double rel = fabs(cg.loss[i] - co.loss[i]) / fabs(co.loss[i]);
        worst = rel > worst ? rel : worst;
    }
    if (rank == 0)
        printf("convnet loss curve over 20 Adam steps at dp %d x tp %d: worst relative "
               "difference %.3g\n",
               dp, tp, worst);
    DT_ASSERT_CLOSE_D("convnet losses", cg.loss, co.loss, 20, 0.0, 1e-3);
    dt_trainer_free(g);
    dt_trainer_free(o);
}

/* ---- memory and weights -------------------------------------------------------------- */

static void test_param_bytes(void **state)
{
    (void)state;
    /* Each split layer's part is its whole / tp, give or take one row (uneven splits) and
     * a row-parallel layer's bias, which every rank holds whole. At the default threshold
     * the MLP's first layer splits and its 10-way output layer pairs with it. */
    dt_config c = mlp_config();
    dt_test_set(&c, "model.layers=flatten, linear 256, relu, dropout 0.2, linear 10");
    dt_test_set_int(&c, "parallel.tp", tp);
    dt_test_set_int(&c, "parallel.dp", dp);
    dt_test_set(&c, "train.max_steps=1");
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, world, &t));
    const dt_model *m = dt_trainer_model(t);
    size_t split = 0, whole_split = 0;
    for (int i = 0; i < dt_model_layer_count(m); i++) {
        const dt_tp_layer_plan *p = dt_model_tp_layer(m, i);
        if (p->role != DT_TP_COLUMN && p->role != DT_TP_ROW)
            continue;
        const double share = (double)p->whole_params / tp;
        const double row = (double)p->whole_params / (double)p->whole_dim;
        const double slack = row + (p->role == DT_TP_ROW ? 10.0 : 0.0);
        if (fabs((double)p->params - share) > slack) {
            fprintf(stderr,
                    "layer %d (%s): %zu parameters on rank %d, expected %.0f +- %.0f "
                    "(whole %zu over %d)\n",
                    i, dt_tp_role_name(p->role), p->params, rank, share, slack, p->whole_params,
                    tp);
            fail();
        }
        split += p->params;
        whole_split += p->whole_params;
    }
    assert_true(whole_split > 0);
    const double ratio = (double)dt_model_param_count(m) / (double)dt_model_whole_param_count(m);
    if (rank == 0)
        printf("parameters on rank 0: %zu of %zu (%.3f) at tp %d\n", dt_model_param_count(m),
               dt_model_whole_param_count(m), ratio, tp);
    assert_true(ratio <= 1.0 / tp + 0.02);
    dt_trainer_free(t);
}

static void test_weights_across_layouts(void **state)
{
    (void)state;
    /* Weights saved from the grid load into one process (and a file written by one
     * process loads on the grid): the test loss is the same within float rounding. */
    dt_config c = mlp_config();
    dt_test_set(&c, "train.eval=on");
    dt_config gc, oc;
    make_pair(c, 16, &gc, &oc);
    char path[256] = "";
    if (rank == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/dtrain-test-tp-%ld.safetensors",
                 tmp != NULL && tmp[0] ? tmp : "/tmp", (long)getpid());
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
    dt_trainer *g = NULL, *o = NULL, *g2 = NULL;
    DT_ASSERT_OK(dt_trainer_create(&gc, world, &g));
    DT_ASSERT_OK(dt_trainer_run(g, NULL));
    double loss_g = 0, acc_g = 0, loss_o = 0, acc_o = 0, loss_g2 = 0, acc_g2 = 0;
    DT_ASSERT_OK(dt_trainer_evaluate(g, &loss_g, &acc_g));
    const float *whole = NULL;
    DT_ASSERT_OK(dt_trainer_whole_params(g, &whole));
    if (rank == 0)
        DT_ASSERT_OK(dt_weights_write(dt_trainer_model(g), whole, path, 0.0, 1.0));
    MPI_Barrier(MPI_COMM_WORLD);
    /* Alone, from the grid's file. */
    dt_test_set(&oc, "train.epochs=0");
    DT_ASSERT_OK(dt_trainer_create(&oc, NULL, &o));
    DT_ASSERT_OK(dt_weights_load(dt_trainer_model(o), path));
    DT_ASSERT_OK(dt_trainer_evaluate(o, &loss_o, &acc_o));
    /* On the grid again, from the same file: each rank takes its part. */
    dt_test_set(&gc, "train.epochs=0");
    DT_ASSERT_OK(dt_trainer_create(&gc, world, &g2));
    DT_ASSERT_OK(dt_weights_load(dt_trainer_model(g2), path));
    DT_ASSERT_OK(dt_trainer_evaluate(g2, &loss_g2, &acc_g2));
    if (rank == 0)
        printf("test loss at dp %d x tp %d %.9f, its weights alone %.9f, reloaded on the "
               "grid %.9f\n",
               dp, tp, loss_g, loss_o, loss_g2);
    assert_true(fabs(loss_o - loss_g) <= 1e-6 * fabs(loss_g));
    assert_true(fabs(loss_g2 - loss_g) <= 1e-6 * fabs(loss_g));
    assert_true(acc_o == acc_g && acc_g2 == acc_g);
    dt_trainer_free(g);
    dt_trainer_free(g2);
    dt_trainer_free(o);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        unlink(path);
}

static void test_tp_stats(void **state)
{
    (void)state;
    /* The MLP pairs a column and a row layer: one all-reduce forward per micro-step and
     * none backward (the column layer is the first with parameters: no input gradient). */
    dt_config c = mlp_config(), gc, oc;
    make_pair(c, 16, &gc, &oc);
    dt_trainer *g = NULL;
    DT_ASSERT_OK(dt_trainer_create(&gc, world, &g));
    DT_ASSERT_OK(dt_trainer_run(g, NULL));
    dt_train_comm_stats cs;
    dt_trainer_comm_stats(g, &cs);
    dt_trainer_free(g);
    assert_int_equal(cs.tp, tp);
    assert_int_equal(cs.optim_steps, 20);
    if (cs.tp_calls != 20 || cs.tp_bytes != 20u * 16u * 10u * sizeof(float)) {
        fprintf(stderr,
                "rank %d: %lld tp collectives of %zu bytes in 20 steps, expected 20 "
                "of %zu\n",
                rank, (long long)cs.tp_calls, cs.tp_bytes,
                (size_t)(20u * 16u * 10u * sizeof(float)));
        fail();
    }
    assert_true(cs.tp_s >= 0.0);
}

static void test_bad_layout_refused(void **state)
{
    (void)state;
    /* tp that does not divide the world: refused on every rank, before any message. */
    dt_config c = mlp_config();
    dt_test_set_int(&c, "parallel.tp", size + 1);
    dt_trainer *t = NULL;
    DT_ASSERT_STATUS(dt_trainer_create(&c, world, &t), DT_ERR_INVALID);
    DT_ASSERT_ERROR_HAS("parallel.tp");
    assert_null(t);
    dt_test_mpi_agree("the refusal of tp = size + 1", DT_TEST_MPI_REFUSAL_S);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dt_blas_set_threads(1);
    tp = size == 4 ? 2 : size;
    dp = size / tp;
    if (dt_comm_create_mpi(MPI_COMM_WORLD, "world", &world) != DT_OK) {
        fprintf(stderr, "comm: %s\n", dt_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linreg_sgd),
        cmocka_unit_test(test_mlp_sgd),
        cmocka_unit_test(test_mlp_adam),
        cmocka_unit_test(test_mlp_zero1),
        cmocka_unit_test(test_mlp_accumulation),
        cmocka_unit_test(test_mlp_clip),
        cmocka_unit_test(test_convnet_first_gradient),
        cmocka_unit_test(test_convnet_loss_curve),
        cmocka_unit_test(test_param_bytes),
        cmocka_unit_test(test_weights_across_layouts),
        cmocka_unit_test(test_tp_stats),
        cmocka_unit_test(test_bad_layout_refused),
    };
    int failed = dt_test_mpi_run_cases(argv[0], tests);
    dt_comm_free(world);
    MPI_Finalize();
    return failed != 0;
}
