/* linreg_ref.h — linear regression's reference for the tests: the least-squares fit of a
 * synthetic regression set by LAPACKE's dgels (QR) in double precision, and the MSE of a
 * fit or of a model's "0.weight"/"0.bias" over a data set, as torch.nn.MSELoss (the mean
 * over samples and targets). Link LAPACKE (tests/unit/linreg.cmake). */
#ifndef DT_TEST_LINREG_REF_H
#define DT_TEST_LINREG_REF_H

#include "dtrain/data.h"
#include "dtrain/model.h"

/* Weights of a linear map y = x W^T + b from p features to q targets, in double. */
typedef struct linear_fit {
    int64_t p, q;
    double *w; /* (q, p) */
    double *b; /* (q) */
} linear_fit;

linear_fit fit_alloc(int64_t p, int64_t q);
void fit_free(linear_fit *f);
/* Asserts a synthetic regression set: float features and targets, more samples than
 * unknowns. */
void check_regression_set(const dt_dataset *ds);
/* MSE of y ~ x W^T + b over the data set: the sum of squared residuals / (n q). */
double mse_of(const dt_dataset *ds, const linear_fit *f);
/* Least squares by dgels: minimises ||[X 1] [W^T; b^T] - Y||_F over all q targets. */
void least_squares(const dt_dataset *ds, linear_fit *f);
/* The model's "0.weight" (q, p) and "0.bias" (q) as a linear_fit. */
void model_fit(dt_model *m, linear_fit *f);

#endif
