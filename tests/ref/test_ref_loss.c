/* test_ref_loss.c — cross-entropy, NLL and MSE against PyTorch 1.13 in float64
 * (tests/ref/loss.safetensors): the loss sum, the gradient of sum/divisor with divisors that
 * differ from the batch (data parallelism passes the global sample count), and the count
 * of correct argmaxes; the double reference losses of tests/grad as well. */
#include "dt_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/loss.h"
#include "grad_util.h"
#include "ref_util.h"

typedef struct loss_case {
    const char *name;
    dt_loss_kind kind;
    int64_t batch, width;
    double divisor;
    const char *meta;
} loss_case;

static const loss_case CASES[] = {
    {"ce_a", DT_LOSS_CROSS_ENTROPY, 5, 7, 8.0, "kind=cross_entropy batch=5 width=7 divisor=8"},
    {"ce_1", DT_LOSS_CROSS_ENTROPY, 1, 3, 1.0, "kind=cross_entropy batch=1 width=3 divisor=1"},
    {"ce_big", DT_LOSS_CROSS_ENTROPY, 3, 4, 2.0, "kind=cross_entropy batch=3 width=4 divisor=2"},
    {"nll_a", DT_LOSS_NLL, 4, 6, 3.0, "kind=nll batch=4 width=6 divisor=3"},
    {"mse_a", DT_LOSS_MSE, 3, 4, 5.0, "kind=mse batch=3 width=4 divisor=5"},
    {"mse_1", DT_LOSS_MSE, 2, 1, 7.0, "kind=mse batch=2 width=1 divisor=7"},
};

static void test_losses(void **state)
{
    (void)state;
    dt_st_file *f = ru_open("loss.safetensors");
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        const loss_case *lc = &CASES[c];
        ru_check_meta(f, lc->name, lc->meta);
        const int64_t shape[2] = {lc->batch, lc->width}, one[1] = {1}, nb[1] = {lc->batch};
        const size_t n = (size_t)(lc->batch * lc->width);
        const int classify = lc->kind != DT_LOSS_MSE;
        float *out = ru_f32(ru_tensor(f, lc->name, "out", DT_ST_F64, 2, shape));
        double *outd = calloc(n, sizeof(double));
        assert_non_null(outd);
        gu_to_double(out, outd, n);
        int32_t *labels = NULL;
        float *targets = NULL;
        double *targetsd = NULL;
        int64_t want_correct = 0;
        if (classify) {
            labels = ru_i32(ru_tensor(f, lc->name, "labels", DT_ST_I64, 1, nb));
            const dt_st_tensor *t = ru_tensor(f, lc->name, "correct", DT_ST_I64, 1, one);
            memcpy(&want_correct, t->data, sizeof want_correct);
        } else {
            const dt_st_tensor *t = ru_tensor(f, lc->name, "targets", DT_ST_F64, 2, shape);
            targets = ru_f32(t);
            targetsd = ru_f64(t);
        }
        double *want_sum = ru_f64(ru_tensor(f, lc->name, "loss_sum", DT_ST_F64, 1, one));
        double *want_dout = ru_f64(ru_tensor(f, lc->name, "dout", DT_ST_F64, 2, shape));

        double sum = -1.0;
        int64_t correct = -1;
        float *dout = calloc(n, sizeof(float));
        assert_non_null(dout);
        DT_ASSERT_OK(dt_loss_compute(lc->kind, out, lc->batch, lc->width, labels, targets,
                                     lc->divisor, &sum, dout, classify ? &correct : NULL));
        char label[128];
        /* The loss is accumulated in double from float inputs that PyTorch saw exactly:
         * only the last bits of exp/log and the order of a few additions differ. */
        snprintf(label, sizeof label, "%s: loss sum (dtrain vs PyTorch)", lc->name);
        DT_ASSERT_CLOSE_D(label, &sum, want_sum, 1, 1e-10, 1e-10);
        /* The gradient is rounded to float once; a float softmax would add a few units of
         * roundoff per class (gu_tol(width)). */
        snprintf(label, sizeof label, "%s: dout (dtrain vs PyTorch)", lc->name);
        DT_ASSERT_CLOSE_F(label, dout, want_dout, n, 1e-8, gu_tol(lc->width));
        if (classify && correct != want_correct)
            fail_msg("%s: %lld correct, PyTorch's argmax gives %lld", lc->name, (long long)correct,
                     (long long)want_correct);

        /* The double reference. */
        double rsum = 0.0;
        double *rdout = calloc(n, sizeof(double));
        assert_non_null(rdout);
        if (lc->kind == DT_LOSS_CROSS_ENTROPY)
            ref_loss_cross_entropy(outd, labels, lc->batch, lc->width, lc->divisor, &rsum, rdout);
        else if (lc->kind == DT_LOSS_NLL)
            ref_loss_nll(outd, labels, lc->batch, lc->width, lc->divisor, &rsum, rdout);
        else
            ref_loss_mse(outd, targetsd, lc->batch, lc->width, lc->divisor, &rsum, rdout);
        snprintf(label, sizeof label, "%s: loss sum (reference vs PyTorch)", lc->name);
        DT_ASSERT_CLOSE_D(label, &rsum, want_sum, 1, 1e-12, 1e-12);
        snprintf(label, sizeof label, "%s: dout (reference vs PyTorch)", lc->name);
        DT_ASSERT_CLOSE_D(label, rdout, want_dout, n, 1e-12, 1e-12);

        free(rdout);
        free(dout);
        free(want_sum);
        free(want_dout);
        free(out);
        free(outd);
        free(labels);
        free(targets);
        free(targetsd);
    }
    dt_st_close(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_losses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
