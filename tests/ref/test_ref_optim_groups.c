/* test_ref_optim_groups.c — weight-decay groups (optim.decay = matrices) and global-norm
 * clipping (optim.clip_norm) against PyTorch 1.13 in float64 (tests/ref/optim_groups
 * .safetensors, gen_optim_refs.py): AdamW, Adam's L2 term and SGD with momentum on two
 * param groups (decay on the tensors of two or more dimensions only) with
 * torch.nn.utils.clip_grad_norm_ before each step, over the flat buffer of dtrain's model
 * "embedding 8 4, layernorm, linear 6". Checked after every step: the norm clipping
 * computes (dt_grad_sumsq, dt_clip_apply, as the strategies call them) against the one
 * clip_grad_norm_ returned, and the parameters. Also: the groups from the model under
 * optim.decay's auto rule, and a split of the range at an element inside a decayed tensor
 * (a ZeRO-1 slice with its base) giving the same bits as the whole. */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/config.h"
#include "dtrain/model.h"
#include "ref_util.h"

enum { STEPS = 6, N = 70, SPLIT = 17 /* inside 0.weight: [0, 32) */ };

typedef struct groups_case {
    const char *name;
    dt_optim_kind kind;
    double weight_decay, momentum, clip_norm;
} groups_case;

static const groups_case cases[] = {
    {"adamw_clip", DT_OPTIM_ADAMW, 0.1, 0.0, 1.0},
    {"adam_l2_clip", DT_OPTIM_ADAM, 0.05, 0.0, 1.0},
    {"sgd_clip", DT_OPTIM_SGD, 0.05, 0.9, 1.0},
    {"adamw_noclip", DT_OPTIM_ADAMW, 0.1, 0.0, 0.0},
};

static dt_model *make_model(dt_config *c)
{
    *c = dt_config_default();
    dt_test_set(c, "model.layers=embedding 8 4, layernorm, linear 6");
    const dt_shape in = {.ndim = 1, .d = {3}};
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(c->layers, c->nlayers, &in, 1, &m));
    assert_int_equal(dt_model_param_count(m), N);
    return m;
}

/* gen_optim_refs.py's description: the settings, then the model's tensors in order. */
static void describe(const groups_case *gc, const dt_model *m, char *buf, size_t nbytes)
{
    int k = snprintf(buf, nbytes, "kind=%s", dt_optim_kind_name(gc->kind));
    if (gc->kind == DT_OPTIM_SGD)
        k += snprintf(buf + k, nbytes - (size_t)k, " momentum=%g", gc->momentum);
    k += snprintf(buf + k, nbytes - (size_t)k,
                  " weight_decay=%g decay=matrices clip_norm=%g steps=%d |", gc->weight_decay,
                  gc->clip_norm, STEPS);
    for (int t = 0; t < dt_model_tensor_count(m); t++) {
        const dt_param_info *p = dt_model_tensor(m, t);
        k += snprintf(buf + k, nbytes - (size_t)k, " %s(", p->name);
        for (int d = 0; d < p->ndim; d++)
            k += snprintf(buf + k, nbytes - (size_t)k, "%s%lld", d ? "," : "",
                          (long long)p->shape[d]);
        k += snprintf(buf + k, nbytes - (size_t)k, ")");
    }
}

static void test_groups_and_clipping(void **state)
{
    (void)state;
    dt_config c;
    dt_model *m = make_model(&c);
    /* The model has an embedding layer: auto is matrices (a GPT's rule). */
    const dt_decay_rule rule = dt_decay_rule_resolve(DT_DECAY_AUTO, c.layers, c.nlayers);
    if (rule != DT_DECAY_MATRICES)
        fail_msg("optim.decay auto on a model with an embedding: %s, expected matrices",
                 dt_decay_rule_name(rule));
    dt_st_file *f = ru_open("optim_groups.safetensors");
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const groups_case *gc = &cases[ci];
        char desc[512], label[160];
        describe(gc, m, desc, sizeof desc);
        ru_check_meta(f, gc->name, desc);
        const int64_t sn[1] = {N}, ss[1] = {STEPS}, sm[2] = {STEPS, N};
        float *p = ru_f32(ru_tensor(f, gc->name, "p0", DT_ST_F64, 1, sn));
        float *grads = ru_f32(ru_tensor(f, gc->name, "grads", DT_ST_F64, 2, sm));
        double *lr = ru_f64(ru_tensor(f, gc->name, "lr", DT_ST_F64, 1, ss));
        double *norms = ru_f64(ru_tensor(f, gc->name, "norms", DT_ST_F64, 1, ss));
        double *want = ru_f64(ru_tensor(f, gc->name, "params", DT_ST_F64, 2, sm));
        dt_optim_config oc = dt_optim_config_default(gc->kind);
        oc.weight_decay = gc->weight_decay;
        oc.momentum = gc->momentum;
        dt_optim *o = NULL, *lo = NULL, *hi = NULL;
        DT_ASSERT_OK(dt_optim_create(&oc, N, &o));
        DT_ASSERT_OK(dt_optim_create(&oc, SPLIT, &lo));
        DT_ASSERT_OK(dt_optim_create(&oc, N - SPLIT, &hi));
        DT_ASSERT_OK(dt_optim_decay_model(o, 0, m, rule));
        DT_ASSERT_OK(dt_optim_decay_model(lo, 0, m, rule));
        DT_ASSERT_OK(dt_optim_decay_model(hi, SPLIT, m, rule));
        /* 0.weight (32) and 2.weight (24) decay; LayerNorm's 8 and the bias's 6 do not. */
        if (dt_optim_decayed_count(o) != 56 || dt_optim_decayed_count(lo) != SPLIT ||
            dt_optim_decayed_count(hi) != 56 - SPLIT)
            fail_msg("%s: decayed elements %zu (slices %zu + %zu), expected 56 (17 + 39)", gc->name,
                     dt_optim_decayed_count(o), dt_optim_decayed_count(lo),
                     dt_optim_decayed_count(hi));
        float split[N];
        memcpy(split, p, sizeof split);
        for (int t = 0; t < STEPS; t++) {
            float g[N], gs[N];
            memcpy(g, grads + (size_t)t * N, sizeof g);
            memcpy(gs, g, sizeof gs);
            if (gc->clip_norm > 0) {
                /* One sum over the whole, as the strategies hand every rank the global
                 * one; each slice scales its own part. */
                const double sq = dt_grad_sumsq(g, N);
                const double norm = dt_clip_apply(g, N, sq, gc->clip_norm);
                dt_clip_apply(gs, SPLIT, sq, gc->clip_norm);
                dt_clip_apply(gs + SPLIT, N - SPLIT, sq, gc->clip_norm);
                if (!(fabs(norm - norms[t]) <= 1e-12 * norms[t]))
                    fail_msg("%s step %d: gradient norm %.17g, clip_grad_norm_'s %.17g", gc->name,
                             t + 1, norm, norms[t]);
            }
            dt_optim_step(o, p, g, N, lr[t]);
            dt_optim_step(lo, split, gs, SPLIT, lr[t]);
            dt_optim_step(hi, split + SPLIT, gs + SPLIT, N - SPLIT, lr[t]);
            /* As test_ref_optim's tolerance: 4e-7 per step for |p| < 1.1 (measured there
             * below 1e-7 after six steps). */
            const double tol = 4e-7 * (t + 1);
            snprintf(label, sizeof label, "%s: parameters after step %d (dtrain vs PyTorch)",
                     gc->name, t + 1);
            DT_ASSERT_CLOSE_F(label, p, want + (size_t)t * N, N, tol, tol);
            snprintf(label, sizeof label, "%s: slices [0, %d) + [%d, %d) after step %d", gc->name,
                     SPLIT, SPLIT, N, t + 1);
            assert_true(dt_check_equal_bits(label, split, p, N));
        }
        dt_optim_free(o);
        dt_optim_free(lo);
        dt_optim_free(hi);
        free(p);
        free(grads);
        free(lr);
        free(norms);
        free(want);
    }
    dt_st_close(f);
    dt_model_free(m);
}

/* A norm that is not finite is returned as it is and leaves the gradients alone: the
 * strategy turns it into the step's non-finite verdict. */
static void test_nonfinite_norm(void **state)
{
    (void)state;
    float g[3] = {1.0f, 2.0f, 2.0f}, keep[3];
    memcpy(keep, g, sizeof g);
    const double total = dt_clip_apply(g, 3, INFINITY, 1.0);
    if (!isinf(total))
        fail_msg("dt_clip_apply: norm %g for a sum of squares of inf, expected inf", total);
    assert_true(dt_check_equal_bits("gradients after an inf norm", g, keep, 3));
    /* Below max_norm untouched; above it scaled to norm max_norm * 3 / (3 + 1e-6). */
    assert_true(dt_clip_apply(g, 3, dt_grad_sumsq(g, 3), 4.0) == 3.0);
    assert_true(dt_check_equal_bits("gradients below max_norm", g, keep, 3));
    dt_clip_apply(g, 3, dt_grad_sumsq(g, 3), 1.0);
    const double after = sqrt(dt_grad_sumsq(g, 3));
    if (!(fabs(after - 1.0 / (1.0 + 1e-6 / 3.0)) < 1e-7))
        fail_msg("dt_clip_apply to max_norm 1: norm after %.9g, expected %.9g", after,
                 1.0 / (1.0 + 1e-6 / 3.0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_groups_and_clipping),
        cmocka_unit_test(test_nonfinite_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
