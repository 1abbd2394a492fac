/* test_ref_optim.c — SGD (momentum, dampening, nesterov, weight decay), Adam (L2 weight
 * decay) and AdamW trajectories against PyTorch 1.13 in float64
 * (tests/ref/optim.safetensors): six steps each under a learning-rate schedule, parameters
 * compared after every step. Also: a range split in two (as a sharded optimizer splits it)
 * gives the very same bits as one optimizer over the whole, and the step counter and state
 * buffers are what optim.h says. */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_util.h"

typedef struct optim_case {
    const char *name;
    dt_optim_config cfg;
    dt_schedule sched;
    int nbufs; /* state buffers optim.h promises */
} optim_case;

enum { STEPS = 6, N = 12 };

static dt_optim_config sgd(double momentum, double dampening, int nesterov, double wd)
{
    dt_optim_config c = dt_optim_config_default(DT_OPTIM_SGD);
    c.momentum = momentum;
    c.dampening = dampening;
    c.nesterov = nesterov;
    c.weight_decay = wd;
    return c;
}

static dt_optim_config adam(dt_optim_kind kind, double b1, double b2, double eps, double wd)
{
    dt_optim_config c = dt_optim_config_default(kind);
    c.beta1 = b1;
    c.beta2 = b2;
    c.eps = eps;
    c.weight_decay = wd;
    return c;
}

static void optim_desc(const optim_case *oc, char *buf, size_t nbytes)
{
    const dt_optim_config *c = &oc->cfg;
    int k;
    if (c->kind == DT_OPTIM_SGD)
        k = snprintf(buf, nbytes, "kind=sgd momentum=%g dampening=%g nesterov=%d weight_decay=%g",
                     c->momentum, c->dampening, c->nesterov, c->weight_decay);
    else
        k = snprintf(buf, nbytes, "kind=%s beta1=%g beta2=%g eps=%g weight_decay=%g",
                     c->kind == DT_OPTIM_ADAM ? "adam" : "adamw", c->beta1, c->beta2, c->eps,
                     c->weight_decay);
    k += snprintf(buf + k, nbytes - (size_t)k, " steps=%d n=%d | ", STEPS, N);
    ru_sched_desc(&oc->sched, buf + k, nbytes - (size_t)k);
}

static const optim_case *cases(size_t *n)
{
    static optim_case c[6];
    c[0] = (optim_case){"sgd_plain", sgd(0.0, 0.0, 0, 0.0),
                        ru_sched(DT_SCHED_STEP, 0.1, 2, 0.5, 2, 0.5, 1, 0.0), 0};
    c[1] = (optim_case){"sgd_momentum", sgd(0.9, 0.1, 0, 0.01),
                        ru_sched(DT_SCHED_COSINE, 0.1, 2, 0.0, 1, 0.1, 4, 0.01), 1};
    c[2] = (optim_case){"sgd_nesterov", sgd(0.8, 0.0, 1, 0.005),
                        ru_sched(DT_SCHED_STEP, 0.05, 0, 0.0, 3, 0.5, 1, 0.0), 1};
    c[3] = (optim_case){"adam", adam(DT_OPTIM_ADAM, 0.9, 0.999, 1e-8, 0.0),
                        ru_sched(DT_SCHED_COSINE, 0.01, 2, 0.1, 1, 0.1, 4, 0.001), 2};
    c[4] = (optim_case){"adam_l2", adam(DT_OPTIM_ADAM, 0.8, 0.99, 1e-6, 0.1),
                        ru_sched(DT_SCHED_STEP, 0.02, 0, 0.0, 2, 0.5, 1, 0.0), 2};
    c[5] = (optim_case){"adamw", adam(DT_OPTIM_ADAMW, 0.9, 0.999, 1e-8, 0.05),
                        ru_sched(DT_SCHED_COSINE, 0.01, 1, 0.2, 1, 0.1, 5, 0.0), 2};
    *n = sizeof c / sizeof c[0];
    return c;
}

/* Tolerance after step t (0-based): every step rounds each parameter (|p| < 1.1) to float,
 * 6e-8, and computes its update in float with a few roundings on a quantity of at most
 * lr |d| (<= 0.1 here); the errors of successive steps add, and momentum or Adam's moments
 * carry earlier ones forward. 4e-7 per step covers that with a factor of about three; at
 * six steps it is 2.4e-6. Measured: below 1e-7 after six steps. */
static double step_tol(int t)
{
    return 4e-7 * (double)(t + 1);
}

/* Each step's update p_t - p_(t-1), against PyTorch's: the parameters' own tolerance is
 * dominated by float's spacing near |p| ~ 1, which hides a relative error of 1e-5 in an
 * update of 1e-2 (a bias correction computed in float). The update of a parameter near
 * zero is resolved far better. got = fl(p + u) - p carries up to three roundings at the
 * parameter's magnitude, each at most half its float spacing (AdamW's decay factor, the
 * product p * (1 - lr wd), the sum), so atol is two spacings; u itself carries a few float
 * roundings plus the drift of float moments, 2e-6 relative (measured: 6.5e-7 at most).
 * Returns 1 when every element passes. */
static int check_update(const char *label, const float *before, const float *after,
                        const double *want_before, const double *want_after)
{
    for (int i = 0; i < N; i++) {
        const double got = (double)after[i] - (double)before[i];
        const double want = want_after[i] - want_before[i];
        const float a = fmaxf(fabsf(after[i]), fabsf(before[i]));
        const double spacing = (double)nextafterf(a, INFINITY) - (double)a;
        const double err = fabs(got - want);
        const double allowed = 2.0 * spacing + 2e-6 * fabs(want);
        if (!(err <= allowed)) {
            fprintf(stderr,
                    "MISMATCH %s: element %d: update %.9g, PyTorch's %.9g (error %.3g, "
                    "relative %.3g; allowed %.3g)\n",
                    label, i, got, want, err, want != 0.0 ? err / fabs(want) : err, allowed);
            return 0;
        }
    }
    return 1;
}

static void test_trajectories(void **state)
{
    (void)state;
    dt_st_file *f = ru_open("optim.safetensors");
    size_t ncases;
    const optim_case *oc = cases(&ncases);
    for (size_t c = 0; c < ncases; c++) {
        char desc[512], label[128];
        optim_desc(&oc[c], desc, sizeof desc);
        ru_check_meta(f, oc[c].name, desc);
        const int64_t sn[1] = {N}, ss[1] = {STEPS}, sm[2] = {STEPS, N};
        const dt_st_tensor *tp0 = ru_tensor(f, oc[c].name, "p0", DT_ST_F64, 1, sn);
        float *p = ru_f32(tp0);
        double *p0 = ru_f64(tp0);
        float *grads = ru_f32(ru_tensor(f, oc[c].name, "grads", DT_ST_F64, 2, sm));
        double *lr = ru_f64(ru_tensor(f, oc[c].name, "lr", DT_ST_F64, 1, ss));
        double *want = ru_f64(ru_tensor(f, oc[c].name, "params", DT_ST_F64, 2, sm));
        /* The shard copy: the same range updated as [0, 5) and [5, N) by two optimizers. */
        float split[N], parts[N];
        memcpy(split, p, sizeof split);
        /* The threads' copy: one optimizer updated in parts [0, 3), [3, 3), [3, N). */
        memcpy(parts, p, sizeof parts);

        dt_optim *o = NULL, *lo = NULL, *hi = NULL, *pt = NULL;
        DT_ASSERT_OK(dt_optim_create(&oc[c].cfg, N, &pt));
        DT_ASSERT_OK(dt_optim_create(&oc[c].cfg, N, &o));
        DT_ASSERT_OK(dt_optim_create(&oc[c].cfg, 5, &lo));
        DT_ASSERT_OK(dt_optim_create(&oc[c].cfg, N - 5, &hi));
        float *bufs[4];
        assert_int_equal(dt_optim_state_buffers(o, bufs, 4), oc[c].nbufs);
        assert_int_equal(dt_optim_state_bytes(o), (size_t)oc[c].nbufs * N * sizeof(float));
        assert_int_equal(dt_optim_steps(o), 0);
        for (int t = 0; t < STEPS; t++) {
            /* The file's rate for the step; test_ref_schedule checks dt_schedule_lr on its
             * own, so a schedule bug cannot hide as an optimizer bug here. */
            const float *g = grads + (size_t)t * N;
            float before[N];
            memcpy(before, p, sizeof before);
            dt_optim_step(o, p, g, N, lr[t]);
            dt_optim_step(lo, split, g, 5, lr[t]);
            dt_optim_step(hi, split + 5, g + 5, N - 5, lr[t]);
            dt_optim_step_part(pt, parts, g, 3, N, lr[t]); /* any order */
            dt_optim_step_part(pt, parts, g, 3, 3, lr[t]);
            dt_optim_step_part(pt, parts, g, 0, 3, lr[t]);
            assert_int_equal(dt_optim_steps(pt), t);
            dt_optim_count_step(pt);
            assert_int_equal(dt_optim_steps(o), t + 1);
            assert_int_equal(dt_optim_steps(pt), t + 1);
            snprintf(label, sizeof label, "%s: parameters after step %d (dtrain vs PyTorch)",
                     oc[c].name, t + 1);
            DT_ASSERT_CLOSE_F(label, p, want + (size_t)t * N, N, step_tol(t), step_tol(t));
            snprintf(label, sizeof label, "%s: update of step %d (dtrain vs PyTorch)", oc[c].name,
                     t + 1);
            assert_true(check_update(label, before, p, t == 0 ? p0 : want + (size_t)(t - 1) * N,
                                     want + (size_t)t * N));
            snprintf(label, sizeof label, "%s: split range after step %d", oc[c].name, t + 1);
            assert_true(dt_check_equal_bits(label, split, p, N));
            snprintf(label, sizeof label, "%s: parts after step %d", oc[c].name, t + 1);
            assert_true(dt_check_equal_bits(label, parts, p, N));
        }
        dt_optim_free(pt);
        dt_optim_free(o);
        dt_optim_free(lo);
        dt_optim_free(hi);
        free(p);
        free(p0);
        free(grads);
        free(lr);
        free(want);
    }
    dt_st_close(f);
}

/* A checkpointed optimizer resumes exactly: state buffers and the step counter copied into
 * a fresh one continue the same trajectory bit for bit (SGD's "buffer started" and Adam's t
 * survive). */
static void test_resume(void **state)
{
    (void)state;
    size_t ncases;
    const optim_case *oc = cases(&ncases);
    for (size_t c = 0; c < ncases; c++) {
        float a[N], b[N], g[STEPS][N];
        dt_test_fill_uniform(a, N, 60 + c, -1.0f, 1.0f);
        dt_test_fill_uniform(&g[0][0], STEPS * N, 70 + c, -1.0f, 1.0f);
        dt_optim *o = NULL, *r = NULL;
        DT_ASSERT_OK(dt_optim_create(&oc[c].cfg, N, &o));
        for (int t = 0; t < 3; t++)
            dt_optim_step(o, a, g[t], N, 0.01);
        memcpy(b, a, sizeof a);
        DT_ASSERT_OK(dt_optim_create(&oc[c].cfg, N, &r));
        float *so[4], *sr[4];
        const int nb = dt_optim_state_buffers(o, so, 4);
        assert_int_equal(dt_optim_state_buffers(r, sr, 4), nb);
        for (int i = 0; i < nb; i++)
            memcpy(sr[i], so[i], N * sizeof(float));
        dt_optim_set_steps(r, dt_optim_steps(o));
        for (int t = 3; t < STEPS; t++) {
            dt_optim_step(o, a, g[t], N, 0.01);
            dt_optim_step(r, b, g[t], N, 0.01);
        }
        char label[96];
        snprintf(label, sizeof label, "%s: resumed vs uninterrupted", oc[c].name);
        assert_true(dt_check_equal_bits(label, b, a, N));
        dt_optim_free(o);
        dt_optim_free(r);
    }
}

/* Settings PyTorch refuses are refused. */
static void test_config_check(void **state)
{
    (void)state;
    dt_optim_config bad[] = {
        sgd(0.0, 0.0, 1, 0.0),   /* nesterov without momentum */
        sgd(0.9, 0.1, 1, 0.0),   /* nesterov with dampening */
        sgd(-0.1, 0.0, 0, 0.0),  /* negative momentum */
        sgd(0.9, 0.0, 0, -1e-4), /* negative weight decay */
        adam(DT_OPTIM_ADAM, 1.0, 0.999, 1e-8, 0.0),
        adam(DT_OPTIM_ADAMW, 0.9, -0.1, 1e-8, 0.01),
        adam(DT_OPTIM_ADAM, 0.9, 0.999, -1e-8, 0.0),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dt_optim *o = NULL;
        dt_error_clear();
        dt_status st = dt_optim_create(&bad[i], N, &o);
        if (st != DT_ERR_INVALID)
            fail_msg("bad optimizer config %zu: dt_optim_create returned %s", i, dt_status_str(st));
        assert_null(o);
        assert_true(strlen(dt_last_error()) > 0);
    }
    /* PyTorch's defaults. */
    dt_optim_config d = dt_optim_config_default(DT_OPTIM_ADAMW);
    assert_true(d.beta1 == 0.9 && d.beta2 == 0.999 && d.eps == 1e-8 && d.weight_decay == 0.01);
    d = dt_optim_config_default(DT_OPTIM_ADAM);
    assert_true(d.beta1 == 0.9 && d.beta2 == 0.999 && d.eps == 1e-8 && d.weight_decay == 0.0);
    d = dt_optim_config_default(DT_OPTIM_SGD);
    assert_true(d.momentum == 0.0 && d.dampening == 0.0 && !d.nesterov && d.weight_decay == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trajectories),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_config_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
