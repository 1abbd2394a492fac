/* test_optim_setup.c — optim.decay and optim.clip_norm as a training run sets them up:
 * the auto rule keeps a model without an embedding on every-tensor decay (the MLP's and
 * ConvNet's AdamW results bit for bit), matrices spares the biases, and clipping where the
 * norm cannot be taken (ps at staleness > 0 with compression) is refused naming the key and
 * why, and accepted under every strategy otherwise. */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/config.h"
#include "dtrain/train.h"

/* linear 4 on synthetic regression: a (4, p) weight and a bias of 4. */
static dt_config linreg(const char *decay)
{
    dt_config c = dt_config_default();
    dt_test_set(&c, "data.kind=synthetic");
    dt_test_set(&c, "data.synth_samples=400");
    dt_test_set(&c, "data.test_samples=100");
    dt_test_set(&c, "model.layers=linear 4");
    dt_test_set(&c, "loss.kind=mse");
    dt_test_set(&c, "train.eval=off");
    dt_test_set(&c, "train.batch=30");
    dt_test_set(&c, "train.max_steps=8");
    dt_test_set(&c, "optim.kind=adamw");
    dt_test_set(&c, "optim.weight_decay=0.5");
    dt_test_set(&c, "optim.lr=0.05");
    if (decay != NULL) {
        char kv[64];
        snprintf(kv, sizeof kv, "optim.decay=%s", decay);
        dt_test_set(&c, kv);
    }
    return c;
}

static float *train(const dt_config *c, size_t *n)
{
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(c, NULL, &t));
    DT_ASSERT_OK(dt_trainer_run(t, NULL));
    dt_model *m = dt_trainer_model(t);
    *n = dt_model_param_count(m);
    float *p = malloc(*n * sizeof(float));
    memcpy(p, dt_model_params(m), *n * sizeof(float));
    dt_trainer_free(t);
    return p;
}

static void test_decay_rules(void **state)
{
    (void)state;
    size_t n = 0, n2 = 0, n3 = 0;
    dt_config d = linreg(NULL), all = linreg("all"), mat = linreg("matrices");
    assert_int_equal(d.optim.decay, DT_DECAY_AUTO); /* the default */
    float *pd = train(&d, &n), *pa = train(&all, &n2), *pm = train(&mat, &n3);
    assert_int_equal(n, n2);
    assert_int_equal(n, n3);
    /* No embedding: auto is all, bit for bit (the path today's AdamW results take). */
    assert_true(dt_check_equal_bits("optim.decay auto vs all on linear 4", pd, pa, n));
    /* matrices, over one step (later steps couple every parameter through the loss): the
     * weight (the first n - 4) decays as under all, the bias (the last 4) as with no decay
     * at all, and differs from all's. */
    dt_config a1 = linreg("all"), m1 = linreg("matrices"), z1 = linreg("all");
    dt_test_set(&a1, "train.max_steps=1");
    dt_test_set(&m1, "train.max_steps=1");
    dt_test_set(&z1, "train.max_steps=1");
    dt_test_set(&z1, "optim.weight_decay=0");
    float *qa = train(&a1, &n2), *qm = train(&m1, &n2), *qz = train(&z1, &n2);
    assert_true(dt_check_equal_bits("optim.decay matrices vs all: the weight", qm, qa, n - 4));
    assert_true(dt_check_equal_bits("optim.decay matrices vs no decay: the bias", qm + n - 4,
                                    qz + n - 4, 4));
    int differs = 0;
    for (size_t i = n - 4; i < n; i++)
        differs += qm[i] != qa[i];
    if (differs != 4)
        fail_msg("optim.decay matrices: %d of the 4 bias elements differ from decay all, "
                 "expected all 4 (the bias must not decay)",
                 differs);
    free(qa);
    free(qm);
    free(qz);
    free(pd);
    free(pa);
    free(pm);
}

static void test_clip_refusals(void **state)
{
    (void)state;
    {
        dt_config c = linreg(NULL);
        dt_test_set(&c, "parallel.staleness=2");
        dt_test_set(&c, "parallel.compress=fp16");
        dt_test_set(&c, "optim.clip_norm=1");
        dt_test_set(&c, "parallel.strategy=ps");
        dt_error_clear();
        const dt_status st = dt_config_check(&c);
        if (st != DT_ERR_UNSUPPORTED ||
            strstr(dt_last_error(), "optim.clip_norm (test): clipping under --strategy ps with "
                                    "staleness 2 and --compress is not supported") == NULL)
            fail_msg("ps, staleness 2, fp16, clip_norm 1: %s '%s', expected unsupported",
                     dt_status_str(st), dt_last_error());
    }
    /* Allowed: ddp and ZeRO-1, localsgd, fedavg, ps (compressed at staleness 0). */
    static const char *const ok[][3] = {{"parallel.zero=1", NULL, NULL},
                                        {"parallel.strategy=localsgd", NULL, NULL},
                                        {"parallel.strategy=fedavg", NULL, NULL},
                                        {"parallel.strategy=ps", "parallel.staleness=2", NULL},
                                        {"parallel.strategy=ps", "parallel.compress=fp16", NULL}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        dt_config c = linreg(NULL);
        dt_test_set(&c, "optim.clip_norm=1");
        for (int k = 0; k < 3 && ok[i][k] != NULL; k++)
            dt_test_set(&c, ok[i][k]);
        DT_ASSERT_OK(dt_config_check(&c));
    }
    /* Bad values name the key. */
    dt_config b = dt_config_default();
    dt_error_clear();
    assert_int_not_equal(dt_config_set(&b, "optim.clip_norm=-1", NULL), DT_OK);
    assert_non_null(strstr(dt_last_error(), "optim.clip_norm"));
    dt_error_clear();
    assert_int_not_equal(dt_config_set(&b, "optim.decay=biases", NULL), DT_OK);
    assert_non_null(strstr(dt_last_error(), "optim.decay"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decay_rules),
        cmocka_unit_test(test_clip_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
