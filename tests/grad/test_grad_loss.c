/* test_grad_loss.c — cross-entropy, NLL and MSE: the double reference's gradient against
 * central finite differences of its own loss, then dt_loss_compute (loss sum, gradient,
 * correct count) against the reference, with divisors that differ from the batch, at
 * batch 0 and 1, and its refusal of labels out of range. */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/loss.h"
#include "grad_util.h"

/* As in test_grad_layers.c: central differences in double with h = 1e-5 are good to about
 * 1e-10 on these smooth functions. */
#define FD_H 1e-5
#define FD_TOL 1e-7

typedef struct loss_case {
    const char *name;
    dt_loss_kind kind;
    int64_t batch, width;
    double divisor;
    float scale; /* outputs in (-scale, scale) */
} loss_case;

static const loss_case CASES[] = {
    {"cross-entropy 5x7 /8", DT_LOSS_CROSS_ENTROPY, 5, 7, 8.0, 1.0f},
    {"cross-entropy 1x3 /1", DT_LOSS_CROSS_ENTROPY, 1, 3, 1.0, 1.0f},
    {"cross-entropy 3x4 /2 large logits", DT_LOSS_CROSS_ENTROPY, 3, 4, 2.0, 80.0f},
    {"cross-entropy 2x1 /3 one class", DT_LOSS_CROSS_ENTROPY, 2, 1, 3.0, 1.0f},
    {"nll 4x6 /3", DT_LOSS_NLL, 4, 6, 3.0, 1.0f},
    {"nll 1x10 /64", DT_LOSS_NLL, 1, 10, 64.0, 1.0f},
    {"mse 3x4 /5", DT_LOSS_MSE, 3, 4, 5.0, 1.0f},
    {"mse 2x1 /7", DT_LOSS_MSE, 2, 1, 7.0, 1.0f},
    {"mse 6x3 /6", DT_LOSS_MSE, 6, 3, 6.0, 1.0f},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

typedef struct loss_data {
    float *out, *targets;
    double *outd, *targetsd;
    int32_t *labels;
} loss_data;

static void data_make(const loss_case *lc, uint64_t seed, loss_data *d)
{
    const size_t n = (size_t)(lc->batch * lc->width);
    d->out = calloc(n, sizeof(float));
    d->targets = calloc(n, sizeof(float));
    d->outd = calloc(n, sizeof(double));
    d->targetsd = calloc(n, sizeof(double));
    d->labels = calloc((size_t)lc->batch, sizeof(int32_t));
    assert_true(d->out && d->targets && d->outd && d->targetsd && d->labels);
    dt_test_fill_uniform(d->out, n, seed, -lc->scale, lc->scale);
    dt_test_fill_uniform(d->targets, n, seed + 1, -1.0f, 1.0f);
    gu_to_double(d->out, d->outd, n);
    gu_to_double(d->targets, d->targetsd, n);
    for (int64_t r = 0; r < lc->batch; r++)
        d->labels[r] = (int32_t)((r * 5 + 3 + (int64_t)seed) % lc->width);
}

static void data_free(loss_data *d)
{
    free(d->out);
    free(d->targets);
    free(d->outd);
    free(d->targetsd);
    free(d->labels);
}

static double ref_loss(const loss_case *lc, const loss_data *d, const double *out, double *dout)
{
    double s = 0.0;
    switch (lc->kind) {
    case DT_LOSS_CROSS_ENTROPY:
        ref_loss_cross_entropy(out, d->labels, lc->batch, lc->width, lc->divisor, &s, dout);
        break;
    case DT_LOSS_NLL:
        ref_loss_nll(out, d->labels, lc->batch, lc->width, lc->divisor, &s, dout);
        break;
    default:
        ref_loss_mse(out, d->targetsd, lc->batch, lc->width, lc->divisor, &s, dout);
        break;
    }
    return s;
}

static void test_fd_losses(void **state)
{
    (void)state;
    for (size_t c = 0; c < NCASES; c++) {
        const loss_case *lc = &CASES[c];
        loss_data d;
        data_make(lc, 40 + c, &d);
        const size_t n = (size_t)(lc->batch * lc->width);
        double *dout = calloc(n, sizeof(double)), *fd = calloc(n, sizeof(double));
        double *x = calloc(n, sizeof(double));
        assert_true(dout && fd && x);
        memcpy(x, d.outd, n * sizeof(double));
        ref_loss(lc, &d, x, dout);
        for (size_t i = 0; i < n; i++) {
            const double save = x[i];
            x[i] = save + FD_H;
            const double lp = ref_loss(lc, &d, x, NULL) / lc->divisor;
            x[i] = save - FD_H;
            const double lm = ref_loss(lc, &d, x, NULL) / lc->divisor;
            x[i] = save;
            fd[i] = (lp - lm) / (2.0 * FD_H);
        }
        char label[96];
        snprintf(label, sizeof label, "%s: dout (reference vs finite differences)", lc->name);
        /* Large logits make the loss itself large (|L| ~ 100): roundoff 1e-16 |L| / h. */
        const double tol = lc->scale > 10.0f ? 1e-6 : FD_TOL;
        DT_ASSERT_CLOSE_D(label, dout, fd, n, tol, tol);
        free(dout);
        free(fd);
        free(x);
        data_free(&d);
    }
}

static int64_t ref_correct(const loss_case *lc, const loss_data *d)
{
    int64_t right = 0;
    for (int64_t r = 0; r < lc->batch; r++) {
        const float *x = d->out + r * lc->width;
        int64_t best = 0; /* the first maximum, as torch.argmax */
        for (int64_t j = 1; j < lc->width; j++)
            if (x[j] > x[best])
                best = j;
        right += best == d->labels[r];
    }
    return right;
}

static void test_kernel_losses(void **state)
{
    (void)state;
    for (size_t c = 0; c < NCASES; c++) {
        const loss_case *lc = &CASES[c];
        loss_data d;
        data_make(lc, 80 + c, &d);
        const size_t n = (size_t)(lc->batch * lc->width);
        double *ref_dout = calloc(n, sizeof(double));
        float *dout = calloc(n, sizeof(float));
        assert_true(ref_dout && dout);
        const double ref_sum = ref_loss(lc, &d, d.outd, ref_dout);
        double sum = -1.0;
        int64_t correct = -1;
        const int classify = lc->kind != DT_LOSS_MSE;
        DT_ASSERT_OK(dt_loss_compute(lc->kind, d.out, lc->batch, lc->width,
                                     classify ? d.labels : NULL, classify ? NULL : d.targets,
                                     lc->divisor, &sum, dout, classify ? &correct : NULL));
        char label[96];
        /* The sum runs in double over float inputs (loss.h): only exp/log's own last bits
         * and the order of a few additions differ. */
        snprintf(label, sizeof label, "%s: loss sum", lc->name);
        DT_ASSERT_CLOSE_D(label, &sum, &ref_sum, 1, 1e-10, 1e-10);
        /* The gradient is rounded to float once (plus at most a float softmax). */
        snprintf(label, sizeof label, "%s: dout", lc->name);
        DT_ASSERT_CLOSE_F(label, dout, ref_dout, n, 1e-8, gu_tol(lc->width));
        if (classify) {
            assert_int_equal(correct, ref_correct(lc, &d));
            /* Loss without a gradient or a count gives the same sum. */
            double sum2 = -1.0;
            DT_ASSERT_OK(dt_loss_compute(lc->kind, d.out, lc->batch, lc->width, d.labels, NULL,
                                         lc->divisor, &sum2, NULL, NULL));
            assert_true(sum2 == sum);
        }
        free(ref_dout);
        free(dout);
        data_free(&d);
    }
}

/* Batch 0: a rank with no samples in a step computes a zero loss and touches nothing. */
static void test_empty_batch(void **state)
{
    (void)state;
    for (int k = 0; k < DT_LOSS_KIND_COUNT; k++) {
        float out[4] = {NAN, NAN, NAN, NAN}, t[4] = {0}, dout[4] = {7, 7, 7, 7};
        int32_t labels[1] = {0};
        double sum = -1.0;
        int64_t correct = -1;
        DT_ASSERT_OK(
            dt_loss_compute((dt_loss_kind)k, out, 0, 4, labels, t, 64.0, &sum, dout, &correct));
        assert_true(sum == 0.0);
        assert_int_equal(correct, 0);
        for (int i = 0; i < 4; i++)
            assert_true(dout[i] == 7.0f);
    }
}

static void test_label_out_of_range(void **state)
{
    (void)state;
    const int32_t bad[] = {-1, 5, 1000};
    for (int k = 0; k < 2; k++) {
        const dt_loss_kind kind = k == 0 ? DT_LOSS_CROSS_ENTROPY : DT_LOSS_NLL;
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            float out[3 * 5] = {0};
            float dout[3 * 5];
            int32_t labels[3] = {1, 4, bad[b]};
            double sum;
            dt_error_clear();
            DT_ASSERT_STATUS(dt_loss_compute(kind, out, 3, 5, labels, NULL, 3.0, &sum, dout, NULL),
                             DT_ERR_INVALID);
            DT_ASSERT_ERROR_HAS("sample 2");
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_losses),
        cmocka_unit_test(test_kernel_losses),
        cmocka_unit_test(test_empty_batch),
        cmocka_unit_test(test_label_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
