/* test_stage_runs.c — stages of separate runs of layers (dt_model_options.runs, the
 * round-robin placement) compute what the whole model computes, bit for bit: the virtual
 * stages run one after another across the stages' models, each run's output copied to the
 * next run's input and each run's input gradient to the run below's output gradient, as
 * the pipeline sends them; two micro-batches in rows of the same models, forwards of both
 * before either backward; with recompute on. Each join's gradients have buffers that no
 * other boundary uses, and ranges that cross a join are refused. */
#include "dt_test.h"

#include <stdio.h>
#include <string.h>

#include "dtrain/model.h"
#include "dtrain/rng.h"
#include "dtrain/train.h"

enum { BATCH = 3, MICRO = 2, MAXL = 16 };

static void fill(float *x, int64_t n, uint32_t stream)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t w[4];
        dt_philox(7, stream, 0, 0, (uint32_t)i, w);
        x[i] = (float)(2.0 * dt_u01d(w[0]) - 1.0);
    }
}

static int64_t per_sample(const dt_model *m, int i)
{
    return dt_shape_numel(dt_model_shape(m, i));
}

typedef struct rr {
    dt_model *st[4];
    int stages, nlayers;
} rr;

/* Stage s of `stages` holds layers s, s + stages, ...: one run each. */
static void build(rr *r, const dt_config *c, const dt_shape *in, int stages, int recompute)
{
    r->stages = stages;
    r->nlayers = c->nlayers;
    for (int s = 0; s < stages; s++) {
        int runs[2 * MAXL], n = 0;
        for (int l = s; l < c->nlayers; l += stages) {
            runs[2 * n] = l;
            runs[2 * n + 1] = l + 1;
            n++;
        }
        dt_model_options o = dt_model_options_default(BATCH * MICRO);
        o.call_rows = BATCH;
        o.runs = runs;
        o.nruns = n;
        o.rows_apart = 1;
        o.recompute = recompute;
        DT_ASSERT_OK(dt_model_create_with(c->layers, c->nlayers, in, &o, &r->st[s]));
        assert_int_equal(dt_model_run_count(r->st[s]), n);
        assert_int_equal(dt_model_layer_count(r->st[s]), 2 * n - 1);
        dt_model_init_params(r->st[s], 5);
        dt_model_zero_grads(r->st[s]);
        dt_model_set_input_grad(r->st[s], 1);
    }
}

/* Layer l's model and its local index (round robin: run l / stages of stage l mod stages). */
static dt_model *owner(const rr *r, int l, int *local)
{
    int a, b;
    dt_model *m = r->st[l % r->stages];
    dt_model_run_layers(m, l / r->stages, &a, &b);
    assert_int_equal(dt_model_whole_layer(m, a), l);
    *local = a;
    return m;
}

static void forward(rr *r, int j, const float *x, const dt_forward_ctx *fwd)
{
    int a;
    dt_model *m = owner(r, 0, &a);
    const int64_t row0 = (int64_t)j * BATCH, w0 = per_sample(m, a);
    memcpy(dt_model_activation(m, a) + row0 * w0, x, (size_t)(BATCH * w0) * sizeof(float));
    for (int l = 0; l < r->nlayers; l++) {
        m = owner(r, l, &a);
        DT_ASSERT_OK(dt_model_forward_rows(m, a, a + 1, row0, BATCH, fwd));
        if (l + 1 < r->nlayers) {
            int b;
            dt_model *next = owner(r, l + 1, &b);
            const int64_t w = per_sample(m, a + 1);
            memcpy(dt_model_activation(next, b) + row0 * w,
                   dt_model_activation(m, a + 1) + row0 * w, (size_t)(BATCH * w) * sizeof(float));
        }
    }
}

static void backward(rr *r, int j, const float *dy)
{
    int a;
    const int64_t row0 = (int64_t)j * BATCH;
    dt_model *m = owner(r, r->nlayers - 1, &a);
    const int64_t wy = per_sample(m, a + 1);
    memcpy(dt_model_activation_grad(m, a + 1) + row0 * wy, dy,
           (size_t)(BATCH * wy) * sizeof(float));
    for (int l = r->nlayers - 1; l >= 0; l--) {
        m = owner(r, l, &a);
        DT_ASSERT_OK(dt_model_backward_rows(m, a, a + 1, row0, BATCH, NULL));
        if (l > 0) {
            int b;
            dt_model *below = owner(r, l - 1, &b);
            const int64_t w = per_sample(m, a);
            memcpy(dt_model_activation_grad(below, b + 1) + row0 * w,
                   dt_model_activation_grad(m, a) + row0 * w, (size_t)(BATCH * w) * sizeof(float));
        }
    }
}

/* No other boundary's activation or gradient lies in a join's gradient buffers. */
static void check_join_buffers(dt_model *m)
{
    const int n = dt_model_layer_count(m);
    for (int r = 0; r + 1 < dt_model_run_count(m); r++) {
        int a, b;
        dt_model_run_layers(m, r, &a, &b);
        for (int side = b; side <= b + 1; side++) {
            const float *g = dt_model_activation_grad(m, side);
            for (int i = 0; i <= n; i++) {
                assert_true(dt_model_activation(m, i) != g);
                if (i != side)
                    assert_true(dt_model_activation_grad(m, i) != g);
            }
        }
    }
}

static void check_rr(const char *what, const char *layers, const dt_shape *in, int stages,
                     int recompute)
{
    dt_config c = dt_config_default();
    char kv[512];
    snprintf(kv, sizeof kv, "model.layers=%s", layers);
    DT_ASSERT_OK(dt_config_set(&c, kv, "test"));
    DT_ASSERT(c.nlayers <= MAXL);
    dt_model *whole = NULL;
    dt_model_options wo = dt_model_options_default(BATCH * MICRO);
    wo.call_rows = BATCH;
    wo.rows_apart = 1;
    DT_ASSERT_OK(dt_model_create_with(c.layers, c.nlayers, in, &wo, &whole));
    dt_model_init_params(whole, 5);
    dt_model_zero_grads(whole);
    rr r;
    build(&r, &c, in, stages, recompute);
    for (int s = 0; s < stages; s++)
        check_join_buffers(r.st[s]);
    const int64_t nin = BATCH * MICRO * per_sample(whole, 0);
    const int64_t nout = BATCH * MICRO * per_sample(whole, c.nlayers);
    static float x[BATCH * MICRO * 1024], dy[BATCH * MICRO * 64];
    DT_ASSERT(nin <= (int64_t)(sizeof x / sizeof x[0]) && nout <= 64 * BATCH * MICRO);
    fill(x, nin, 1);
    fill(dy, nout, 2);
    const int64_t pos[BATCH * MICRO] = {10, 11, 12, 13, 14, 15};
    /* The whole model, one micro-batch's rows at a time as the stages run them. */
    memcpy(dt_model_input(whole), x, (size_t)nin * sizeof(float));
    for (int j = 0; j < MICRO; j++) {
        const dt_forward_ctx fj = {.train = 1, .seed = 9, .epoch = 2, .positions = pos + j * BATCH};
        DT_ASSERT_OK(dt_model_forward_rows(whole, 0, c.nlayers, j * BATCH, BATCH, &fj));
    }
    memcpy(dt_model_activation_grad(whole, c.nlayers), dy, (size_t)nout * sizeof(float));
    for (int j = 0; j < MICRO; j++)
        DT_ASSERT_OK(dt_model_backward_rows(whole, 0, c.nlayers, j * BATCH, BATCH, NULL));
    /* The stages: both micro-batches' forwards, then both backwards, in rows. */
    const int64_t win = per_sample(whole, 0), wout = per_sample(whole, c.nlayers);
    for (int j = 0; j < MICRO; j++) {
        const dt_forward_ctx fj = {.train = 1, .seed = 9, .epoch = 2, .positions = pos + j * BATCH};
        forward(&r, j, x + j * BATCH * win, &fj);
    }
    char label[200];
    int a;
    dt_model *last = owner(&r, c.nlayers - 1, &a);
    snprintf(label, sizeof label, "%s: output", what);
    DT_ASSERT_CLOSE_FF(label, dt_model_activation(last, a + 1), dt_model_output(whole), nout, 0.0,
                       0.0);
    for (int j = 0; j < MICRO; j++)
        backward(&r, j, dy + j * BATCH * wout);
    for (int s = 0; s < stages; s++)
        for (int t = 0; t < dt_model_tensor_count(r.st[s]); t++) {
            const dt_param_info *p = dt_model_tensor(r.st[s], t);
            const dt_param_info *w = dt_model_find_tensor(whole, p->name);
            assert_non_null(w);
            assert_memory_equal(dt_model_params(r.st[s]) + p->offset,
                                dt_model_params(whole) + w->offset, p->count * sizeof(float));
            snprintf(label, sizeof label, "%s: gradient of %s", what, p->name);
            DT_ASSERT_CLOSE_FF(label, dt_model_grads(r.st[s]) + p->offset,
                               dt_model_grads(whole) + w->offset, (int64_t)p->count, 0.0, 0.0);
        }
    dt_model *first = owner(&r, 0, &a);
    snprintf(label, sizeof label, "%s: input gradient", what);
    DT_ASSERT_CLOSE_FF(label, dt_model_activation_grad(first, a),
                       dt_model_activation_grad(whole, 0), nin, 0.0, 0.0);
    for (int s = 0; s < stages; s++)
        dt_model_free(r.st[s]);
    dt_model_free(whole);
}

static const char *const MLP = "flatten, linear 32, relu, dropout 0.3, linear 10, log_softmax";
static const char *const CONV = "conv2d 4 3, relu, conv2d 6 3, relu, maxpool2d 2, dropout 0.25, "
                                "flatten, linear 16, relu, dropout 0.5, linear 10, log_softmax";

static void test_mlp_round_robin(void **state)
{
    (void)state;
    const dt_shape in = {.ndim = 3, .d = {1, 8, 8}};
    check_rr("mlp on 2 stages", MLP, &in, 2, DT_RECOMPUTE_NONE);
    check_rr("mlp on 3 stages", MLP, &in, 3, DT_RECOMPUTE_NONE);
    check_rr("mlp on 4 stages", MLP, &in, 4, DT_RECOMPUTE_NONE);
}

static void test_convnet_round_robin(void **state)
{
    (void)state;
    const dt_shape in = {.ndim = 3, .d = {1, 12, 12}};
    check_rr("convnet on 2 stages", CONV, &in, 2, DT_RECOMPUTE_NONE);
    check_rr("convnet on 3 stages", CONV, &in, 3, DT_RECOMPUTE_NONE);
}

/* Runs of two layers, recompute every 2: each run is one segment, re-run in backward. */
static void test_runs_recompute(void **state)
{
    (void)state;
    const dt_shape in = {.ndim = 3, .d = {1, 12, 12}};
    dt_config c = dt_config_default();
    char kv[512];
    snprintf(kv, sizeof kv, "model.layers=%s", CONV);
    DT_ASSERT_OK(dt_config_set(&c, kv, "test"));
    const int runs[6] = {0, 3, 5, 8, 9, 12};
    dt_model *plain = NULL, *rec = NULL;
    dt_model_options o = dt_model_options_default(BATCH);
    o.runs = runs;
    o.nruns = 3;
    DT_ASSERT_OK(dt_model_create_with(c.layers, c.nlayers, &in, &o, &plain));
    o.recompute = 2;
    DT_ASSERT_OK(dt_model_create_with(c.layers, c.nlayers, &in, &o, &rec));
    dt_model_memory mp, mr;
    dt_model_memory_info(plain, &mp);
    dt_model_memory_info(rec, &mr);
    assert_int_equal(mp.segments, 0);
    assert_true(mr.segments >= 5); /* 2 + 2 + 2 in the runs, the joins on their own */
    assert_true(mr.kept_bytes < mp.kept_bytes);
    dt_model *ms[2] = {plain, rec};
    static float x[BATCH * 144], g[2][4096];
    fill(x, BATCH * 144, 3);
    const int64_t pos[BATCH] = {4, 5, 6};
    const dt_forward_ctx fwd = {.train = 1, .seed = 3, .epoch = 1, .positions = pos};
    for (int k = 0; k < 2; k++) {
        dt_model *m = ms[k];
        dt_model_init_params(m, 8);
        dt_model_zero_grads(m);
        memcpy(dt_model_input(m), x, sizeof(float) * BATCH * 144);
        for (int r = 0; r < 3; r++) {
            int a, b;
            dt_model_run_layers(m, r, &a, &b);
            DT_ASSERT_OK(dt_model_forward_range(m, a, b, BATCH, &fwd));
        }
        for (int r = 2; r >= 0; r--) {
            int a, b;
            dt_model_run_layers(m, r, &a, &b);
            const int64_t n = BATCH * per_sample(m, b);
            fill(dt_model_activation_grad(m, b), n, 20 + (uint32_t)r);
            DT_ASSERT_OK(dt_model_backward_range(m, a, b, BATCH, NULL));
        }
        DT_ASSERT(dt_model_param_count(m) <= 4096);
        memcpy(g[k], dt_model_grads(m), dt_model_param_count(m) * sizeof(float));
    }
    DT_ASSERT_CLOSE_FF("runs with recompute: parameter gradients", g[1], g[0],
                       (int64_t)dt_model_param_count(plain), 0.0, 0.0);
    dt_model_free(plain);
    dt_model_free(rec);
}

static void test_refusals(void **state)
{
    (void)state;
    const dt_shape in = {.ndim = 3, .d = {1, 8, 8}};
    dt_config c = dt_config_default();
    char kv[512];
    snprintf(kv, sizeof kv, "model.layers=%s", MLP);
    DT_ASSERT_OK(dt_config_set(&c, kv, "test"));
    dt_model *m = NULL;
    dt_model_options o = dt_model_options_default(BATCH);
    const int touching[4] = {0, 2, 2, 4}, backwards[4] = {3, 4, 0, 1}, outside[4] = {0, 1, 5, 9};
    o.nruns = 2;
    o.runs = touching;
    DT_ASSERT_STATUS(dt_model_create_with(c.layers, c.nlayers, &in, &o, &m), DT_ERR_INVALID);
    o.runs = backwards;
    DT_ASSERT_STATUS(dt_model_create_with(c.layers, c.nlayers, &in, &o, &m), DT_ERR_INVALID);
    o.runs = outside;
    DT_ASSERT_STATUS(dt_model_create_with(c.layers, c.nlayers, &in, &o, &m), DT_ERR_INVALID);
    assert_null(m);
    const int ok[4] = {0, 2, 4, 6};
    o.runs = ok;
    DT_ASSERT_OK(dt_model_create_with(c.layers, c.nlayers, &in, &o, &m));
    assert_int_equal(dt_model_whole_layer(m, 2), -1);
    assert_int_equal(dt_model_whole_layer(m, 3), 4);
    const dt_forward_ctx fwd = {.train = 0};
    DT_ASSERT_STATUS(dt_model_forward(m, BATCH, &fwd), DT_ERR_INVALID);
    DT_ASSERT_STATUS(dt_model_backward_range(m, 1, 4, BATCH, NULL), DT_ERR_INVALID);
    dt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_round_robin),
        cmocka_unit_test(test_convnet_round_robin),
        cmocka_unit_test(test_runs_recompute),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
