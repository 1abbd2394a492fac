/* test_text_train.c — the trainer on data.kind text (issue 37; docs/USER_GUIDE.md, "Text"):
 * the windows a step loads are text.h's (dt_text_train_fill of the step, j the index in the
 * global batch), the loss is the mean cross-entropy over every position and its gradient
 * divides by the step's tokens, evaluations come at the steps train.eval_every names, the
 * validation loss and accuracy equal a computation of this test's own (a forward over the
 * validation windows, -log softmax in double), and the config errors of a text run.
 *
 * The model is a tiny per-position one (embedding, position, dropout, layernorm, linear):
 * it trains in milliseconds and has every kind of state a text run keys (dropout by step
 * and window). */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/config.h"
#include "dtrain/text.h"
#include "dtrain/train.h"

enum { T = 16, V = DT_TEXT_VOCAB, B = 3, STEPS = 9, EVERY = 4 };

/* A corpus of words drawn from a small list (deterministic): learnable, so the loss falls
 * within a few steps. */
static const char *corpus(void)
{
    static const char *const words[] = {"the", "cat", "sat", "on",   "a",     "mat", "dog",
                                        "ran", "far", "and", "then", "slept", "home"};
    const char *path = dt_test_word_corpus(words, 13, 12345u, 6000);
    assert_non_null(path);
    return path;
}

static dt_config text_config(void)
{
    dt_config c = dt_config_default();
    char kv[600];
    dt_test_set(&c, "data.kind=text");
    snprintf(kv, sizeof kv, "data.text_files=%s", corpus());
    dt_test_set(&c, kv);
    dt_test_set_int(&c, "model.block_size", T);
    dt_test_set(&c, "model.layers=embedding 256 16, position, dropout 0.1, layernorm, linear 256");
    dt_test_set(&c, "loss.kind=cross_entropy");
    dt_test_set(&c, "optim.kind=adamw");
    dt_test_set(&c, "optim.lr=0.01");
    dt_test_set(&c, "schedule.kind=constant");
    dt_test_set_int(&c, "train.batch", B);
    dt_test_set_int(&c, "train.max_steps", STEPS);
    dt_test_set_int(&c, "train.eval_every", EVERY);
    dt_test_set_int(&c, "train.threads", 1);
    dt_test_set_int(&c, "train.seed", 5);
    return c;
}

typedef struct run_log {
    dt_trainer *t;
    double loss[STEPS];
    int nsteps;
    int64_t evals[STEPS];
    int nevals;
    int bad; /* a check in a callback failed (reported there) */
} run_log;

/* After step s (info->step = s + 1): the model's input rows are the ids of windows 0..B-1
 * of step s, and the output gradient the loss left is d(mean over the step's B x T tokens
 * of -log softmax) / d logits, which the last layer's bias gradient sums over the rows:
 * both checked against this test's own computation from the logits the forward left. */
static dt_status on_step(void *ctx, const dt_step_info *info)
{
    run_log *r = ctx;
    dt_model *m = dt_trainer_model(r->t);
    const dt_text_windows *w = dt_trainer_text_windows(r->t);
    const int64_t s = info->step - 1;
    int32_t ids[B * T], tg[B * T];
    dt_text_train_fill(w, s, 0, B, ids, tg);
    const float *x = dt_model_input(m);
    for (int k = 0; k < B * T; k++)
        if (x[k] != (float)ids[k]) {
            print_error("step %lld: model input row %d position %d is id %g, expected %d "
                        "(dt_text_train_fill window %d)\n",
                        (long long)s, k / T, k % T, (double)x[k], ids[k], k / T);
            r->bad = 1;
            return DT_OK;
        }
    const float *out = dt_model_output(m);
    double bias[V] = {0}, loss = 0.0;
    for (int row = 0; row < B * T; row++) {
        const float *z = out + (size_t)row * V;
        double mx = z[0], sum = 0.0;
        for (int v = 1; v < V; v++)
            mx = z[v] > mx ? z[v] : mx;
        for (int v = 0; v < V; v++)
            sum += exp((double)z[v] - mx);
        loss += mx + log(sum) - (double)z[tg[row]];
        for (int v = 0; v < V; v++)
            bias[v] += (exp((double)z[v] - mx) / sum - (v == tg[row])) / (double)(B * T);
    }
    loss /= (double)(B * T);
    if (fabs(info->loss - loss) > 1e-6 * fabs(loss)) {
        print_error("step %lld: reported loss %.9g, expected the mean over %d tokens %.9g\n",
                    (long long)s, info->loss, B * T, loss);
        r->bad = 1;
    }
    const dt_param_info *p = dt_model_find_tensor(m, "4.bias");
    const float *g = dt_model_grads(m) + p->offset;
    double gmax = 0.0, dmax = 0.0;
    for (int v = 0; v < V; v++) {
        gmax = fmax(gmax, fabs(bias[v]));
        dmax = fmax(dmax, fabs((double)g[v] - bias[v]));
    }
    if (dmax > 1e-5 * gmax) {
        print_error("step %lld: 4.bias gradient differs from sum_rows (softmax - onehot) / (B T "
                    "= %d) by %.3g (max |g| %.3g)\n",
                    (long long)s, B * T, dmax, gmax);
        r->bad = 1;
    }
    if (r->nsteps < STEPS)
        r->loss[r->nsteps++] = info->loss;
    return DT_OK;
}

static dt_status on_eval(void *ctx, const dt_eval_info *info)
{
    run_log *r = ctx;
    if (r->nevals < STEPS)
        r->evals[r->nevals++] = info->step;
    return DT_OK;
}

/* The validation windows through the model's forward, -log softmax and top-1 in double. */
static void own_validation(dt_trainer *t, double *loss, double *accuracy)
{
    dt_model *m = dt_trainer_model(t);
    const dt_text_windows *w = dt_trainer_text_windows(t);
    const int64_t n = dt_text_val_count(w), chunk = dt_model_max_batch(m);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(chunk * T));
    int32_t *tg = malloc(sizeof(int32_t) * (size_t)(chunk * T));
    assert_non_null(ids);
    assert_non_null(tg);
    double sum = 0.0, right = 0.0;
    const dt_forward_ctx fwd = {.train = 0};
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
        const int64_t c = n - i0 < chunk ? n - i0 : chunk;
        dt_text_val_fill(w, i0, c, ids, tg);
        float *x = dt_model_input(m);
        for (int64_t k = 0; k < c * T; k++)
            x[k] = (float)ids[k];
        DT_ASSERT_OK(dt_model_forward(m, c, &fwd));
        const float *out = dt_model_output(m);
        for (int64_t row = 0; row < c * T; row++) {
            const float *z = out + row * V;
            double mx = z[0], s = 0.0;
            int arg = 0;
            for (int v = 1; v < V; v++)
                if (z[v] > mx) {
                    mx = z[v];
                    arg = v;
                }
            for (int v = 0; v < V; v++)
                s += exp((double)z[v] - mx);
            sum += mx + log(s) - (double)z[tg[row]];
            right += arg == tg[row];
        }
    }
    *loss = sum / (double)(n * T);
    *accuracy = right / (double)(n * T);
    free(ids);
    free(tg);
}

static void test_text_run(void **state)
{
    (void)state;
    const dt_config c = text_config();
    run_log r = {0};
    DT_ASSERT_OK(dt_trainer_create(&c, NULL, &r.t));
    const dt_train_callbacks cb = {.ctx = &r, .on_step = on_step, .on_eval = on_eval};
    DT_ASSERT_OK(dt_trainer_run(r.t, &cb));
    assert_int_equal(r.bad, 0);
    assert_int_equal(r.nsteps, STEPS);
    for (int i = 0; i < STEPS; i++)
        if (!isfinite(r.loss[i])) {
            print_error("step %d: loss %g is not finite\n", i, r.loss[i]);
            fail();
        }
    const double head = (r.loss[0] + r.loss[1] + r.loss[2]) / 3;
    const double tail = (r.loss[STEPS - 3] + r.loss[STEPS - 2] + r.loss[STEPS - 1]) / 3;
    if (!(tail < head - 0.5)) {
        print_error("loss does not fall: first three steps %.4f, last three %.4f\n", head, tail);
        fail();
    }
    /* eval_every 4 over 9 steps: after steps 4 and 8, and after the last. */
    const int64_t want[] = {4, 8, 9};
    if (r.nevals != 3 || r.evals[0] != want[0] || r.evals[1] != want[1] || r.evals[2] != want[2]) {
        print_error("evaluations after %d steps:", r.nevals);
        for (int i = 0; i < r.nevals; i++)
            print_error(" %lld", (long long)r.evals[i]);
        print_error("; expected after 4, 8, 9\n");
        fail();
    }
    double loss = 0, acc = 0, own_loss = 0, own_acc = 0;
    DT_ASSERT_OK(dt_trainer_evaluate(r.t, &loss, &acc));
    own_validation(r.t, &own_loss, &own_acc);
    if (fabs(loss - own_loss) > 1e-6 * fabs(own_loss) || acc != own_acc) {
        print_error("validation: trainer loss %.9g accuracy %.6f; own computation over %lld "
                    "windows x %d bytes: loss %.9g accuracy %.6f\n",
                    loss, acc, (long long)dt_text_val_count(dt_trainer_text_windows(r.t)), T,
                    own_loss, own_acc);
        fail();
    }
    dt_trainer_free(r.t);
}

/* Trains a text run of `steps` optimizer steps (step 3 of them skipped by the non-finite
 * guard when `inject`), from `resume` when given, and copies its parameters out. */
static float *train_text(int64_t steps, int inject, const char *resume, const char *save, size_t *n)
{
    dt_config c = text_config();
    dt_test_set_int(&c, "train.max_steps", steps);
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(&c, NULL, &t));
    if (resume != NULL)
        DT_ASSERT_OK(dt_trainer_load_checkpoint(t, resume));
    if (inject)
        dt_trainer_inject_nonfinite(t, 3);
    DT_ASSERT_OK(dt_trainer_run(t, NULL));
    dt_ckpt_info info;
    if (save != NULL)
        DT_ASSERT_OK(dt_trainer_save_checkpoint(t, save, 1, 1, 0, &info));
    dt_model *m = dt_trainer_model(t);
    *n = dt_model_param_count(m);
    float *p = malloc(*n * sizeof(float));
    assert_non_null(p);
    memcpy(p, dt_model_params(m), *n * sizeof(float));
    dt_trainer_free(t);
    return p;
}

/* A text run's set written at its end (one epoch of max_steps 5 steps, the 3rd skipped: 4
 * optimizer steps), resumed by a run of 8: it goes on at the 6th step's windows, as the
 * 8-step run does, and ends on its bits. Counting the set's position without the skipped
 * step would draw the 5th step's windows twice (make mutants' resume-skipped). */
static void test_resume_after_skip(void **state)
{
    (void)state;
    char root[] = "/tmp/dt_text_resume_XXXXXX";
    assert_non_null(mkdtemp(root));
    size_t n = 0, m = 0;
    float *first = train_text(5, 1, NULL, root, &n);
    char set[600];
    snprintf(set, sizeof set, "%s/step-000000004", root);
    float *resumed = train_text(8, 0, set, NULL, &n);
    float *whole = train_text(8, 1, NULL, NULL, &m);
    assert_int_equal(n, m);
    assert_true(dt_check_equal_bits("resumed after a skipped step", resumed, whole, n));
    free(first);
    free(resumed);
    free(whole);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

/* Expects `st` to be `want` with a message containing `needle`. */
static void expect_error(dt_status st, dt_status want, const char *needle)
{
    if (st != want || strstr(dt_last_error(), needle) == NULL)
        print_error("status %s, message \"%s\"; expected %s with \"%s\"\n", dt_status_str(st),
                    dt_last_error(), dt_status_str(want), needle);
    assert_int_equal(st, want);
    assert_non_null(strstr(dt_last_error(), needle));
}

static void test_errors(void **state)
{
    (void)state;
    dt_config c = text_config();
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_config_check(&c));
    /* A text run is counted in steps. */
    dt_test_set_int(&c, "train.epochs", 2);
    expect_error(dt_config_check(&c), DT_ERR_INVALID, "train.max_steps");
    assert_non_null(strstr(dt_last_error(), "train.epochs"));
    c = text_config();
    dt_test_set_int(&c, "train.max_steps", 0);
    expect_error(dt_config_check(&c), DT_ERR_INVALID, "train.max_steps: required");
    /* The window is required with text and refused elsewhere. */
    c = text_config();
    c.block_size = 0;
    expect_error(dt_config_check(&c), DT_ERR_INVALID, "model.block_size: required");
    c = dt_config_default();
    dt_test_set_int(&c, "model.block_size", 16);
    expect_error(dt_config_check(&c), DT_ERR_INVALID,
                 "model.block_size (test) has no effect with data.kind idx");
    /* Longer than the training part (the corpus is about 6 kB, 10% validates). */
    c = text_config();
    dt_test_set_int(&c, "model.block_size", 100000);
    expect_error(dt_trainer_create(&c, NULL, &t), DT_ERR_INVALID, "model.block_size");
    assert_null(t);
    /* Longer than the validation part only. */
    c = text_config();
    dt_test_set_int(&c, "model.block_size", 1000);
    expect_error(dt_trainer_create(&c, NULL, &t), DT_ERR_INVALID, "model.block_size");
    assert_non_null(strstr(dt_last_error(), "validation"));
    /* A model whose positions are not the window's. */
    c = text_config();
    dt_test_set(&c, "model.layers=embedding 256 16, flatten, linear 256");
    expect_error(dt_trainer_create(&c, NULL, &t), DT_ERR_INVALID, "(positions, 256)");
    /* Layouts not built for text yet, and eval_every without evaluation. */
    c = text_config();
    dt_test_set(&c, "parallel.strategy=ps");
    expect_error(dt_config_check(&c), DT_ERR_UNSUPPORTED, "parallel.strategy ps");
    c = text_config();
    dt_test_set(&c, "train.eval=off");
    expect_error(dt_config_check(&c), DT_ERR_INVALID, "train.eval_every (test) has no effect");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_run),
        cmocka_unit_test(test_resume_after_skip),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
