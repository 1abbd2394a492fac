/* linreg_ref.c — see linreg_ref.h. */
#include "linreg_ref.h"

#include "dt_test.h"

#include <lapacke.h>
#include <stdlib.h>

linear_fit fit_alloc(int64_t p, int64_t q)
{
    linear_fit f = {.p = p, .q = q};
    f.w = calloc((size_t)(p * q), sizeof *f.w);
    f.b = calloc((size_t)q, sizeof *f.b);
    assert_non_null(f.w);
    assert_non_null(f.b);
    return f;
}

void fit_free(linear_fit *f)
{
    free(f->w);
    free(f->b);
}

/* The training set of a synthetic config: float features (n, p), float targets (n, q). */
void check_regression_set(const dt_dataset *ds)
{
    assert_int_equal(ds->features, DT_FEATURES_F32);
    assert_int_equal(ds->targets, DT_TARGETS_F32);
    assert_non_null(ds->x_f32);
    assert_non_null(ds->y_f32);
    assert_true(ds->n > dt_dataset_sample_numel(ds) + 1);
}

/* MSE of y ~ x W^T + b over the data set: the sum of squared residuals / (n q). */
double mse_of(const dt_dataset *ds, const linear_fit *f)
{
    const int64_t n = ds->n, p = f->p, q = f->q;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float *x = ds->x_f32 + i * p;
        const float *y = ds->y_f32 + i * q;
        for (int64_t j = 0; j < q; j++) {
            double pred = f->b[j];
            for (int64_t k = 0; k < p; k++)
                pred += f->w[j * p + k] * (double)x[k];
            const double r = pred - (double)y[j];
            sum += r * r;
        }
    }
    return sum / ((double)n * (double)q);
}

/* Least squares by dgels (QR): minimises ||[X 1] [W^T; b^T] - Y||_F over all q targets. */
void least_squares(const dt_dataset *ds, linear_fit *f)
{
    const int64_t n = ds->n, p = f->p, q = f->q, cols = p + 1;
    double *a = malloc((size_t)(n * cols) * sizeof *a); /* (n, p + 1), row-major */
    double *bm = malloc((size_t)(n * q) * sizeof *bm);  /* (n, q); rows 0..p: solution */
    assert_non_null(a);
    assert_non_null(bm);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t k = 0; k < p; k++)
            a[i * cols + k] = (double)ds->x_f32[i * p + k];
        a[i * cols + p] = 1.0;
        for (int64_t j = 0; j < q; j++)
            bm[i * q + j] = (double)ds->y_f32[i * q + j];
    }
    lapack_int info = LAPACKE_dgels(LAPACK_ROW_MAJOR, 'N', (lapack_int)n, (lapack_int)cols,
                                    (lapack_int)q, a, (lapack_int)cols, bm, (lapack_int)q);
    if (info != 0)
        print_error("LAPACKE_dgels returned %d\n", (int)info);
    assert_int_equal(info, 0);
    /* Row k of the solution holds coefficient k of every target: W^T (p, q), then b. */
    for (int64_t j = 0; j < q; j++) {
        for (int64_t k = 0; k < p; k++)
            f->w[j * p + k] = bm[k * q + j];
        f->b[j] = bm[p * q + j];
    }
    free(a);
    free(bm);
}

/* The model's "0.weight" (q, p) and "0.bias" (q) as a linear_fit. */
void model_fit(dt_model *m, linear_fit *f)
{
    const dt_param_info *w = dt_model_find_tensor(m, "0.weight");
    const dt_param_info *b = dt_model_find_tensor(m, "0.bias");
    assert_non_null(w);
    assert_non_null(b);
    assert_int_equal(w->ndim, 2);
    assert_int_equal(w->shape[0], f->q);
    assert_int_equal(w->shape[1], f->p);
    assert_int_equal(b->count, (size_t)f->q);
    const float *params = dt_model_params(m);
    for (int64_t i = 0; i < f->p * f->q; i++)
        f->w[i] = (double)params[w->offset + (size_t)i];
    for (int64_t j = 0; j < f->q; j++)
        f->b[j] = (double)params[b->offset + (size_t)j];
}
