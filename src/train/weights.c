/* weights.c — model parameters to and from safetensors files, under the names and in the
 * layouts that torch.nn.Sequential (or the seeds' named modules) use in a state_dict, so
 * that a PyTorch user loads dtrain's weights with one load_state_dict call. */
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "ckpt/st_meta.h"
#include "dtrain/safetensors.h"
#include "dtrain/train.h"

dt_status dt_weights_save(const dt_model *m, const char *path, double input_mean, double input_std)
{
    if (dt_model_tp_size(m) > 1)
        return dt_fail(DT_ERR_INVALID,
                       "weights: %s: the model is one rank's part of a tensor-parallel "
                       "split: gather it (dt_model_gather_params) and use dt_weights_write",
                       path);
    return dt_weights_write(m, dt_model_params((dt_model *)m), path, input_mean, input_std);
}

dt_status dt_weights_write(const dt_model *m, const float *whole, const char *path,
                           double input_mean, double input_std)
{
    dt_status st = DT_OK;
    const int n = dt_model_tensor_count(m);
    dt_st_tensor *ts = NULL;
    DT_TRY(dt_alloc(sizeof *ts * (size_t)(n > 0 ? n : 1), "weights table", (void **)&ts));
    for (int i = 0; i < n; i++) {
        const dt_param_info *p = dt_model_tensor(m, i);
        ts[i].name = p->name;
        ts[i].dtype = DT_ST_F32;
        ts[i].ndim = p->ndim;
        for (int d = 0; d < p->ndim; d++)
            ts[i].shape[d] = p->whole_shape[d];
        ts[i].data = whole + p->whole_offset;
        ts[i].nbytes = p->whole_count * sizeof(float);
    }
    DT_TRY(dt_st_write_weights(path, ts, n, input_mean, input_std));
fail:
    dt_free(ts);
    if (st != DT_OK)
        dt_error_prefix("weights: %s: ", path);
    return st;
}

static int same_shape(const dt_param_info *p, const dt_st_tensor *t)
{
    if (p->ndim != t->ndim)
        return 0;
    for (int d = 0; d < p->ndim; d++)
        if (p->whole_shape[d] != t->shape[d])
            return 0;
    return 1;
}

static void shape_text(const int64_t *shape, int ndim, char *buf, size_t nbytes)
{
    size_t o = (size_t)snprintf(buf, nbytes, "(");
    for (int d = 0; d < ndim && o < nbytes; d++)
        o += (size_t)snprintf(buf + o, nbytes - o, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (o < nbytes)
        snprintf(buf + o, nbytes - o, ")");
}

dt_status dt_weights_load(dt_model *m, const char *path)
{
    dt_status st = DT_OK;
    dt_st_file *f = NULL;
    DT_TRY(dt_st_open(path, &f));
    float *params = dt_model_params(m);
    /* Check everything before writing anything: a bad file leaves the model as it was. */
    for (int i = 0; i < dt_model_tensor_count(m); i++) {
        const dt_param_info *p = dt_model_tensor(m, i);
        const dt_st_tensor *t = dt_st_find(f, p->name);
        char a[96], b[96];
        if (t == NULL) {
            st = dt_fail(DT_ERR_MISMATCH, "weights: %s: tensor '%s' is missing", path, p->name);
            goto fail;
        }
        if (t->dtype != DT_ST_F32) {
            st = dt_fail(DT_ERR_MISMATCH, "weights: %s: tensor '%s' has dtype %s, expected F32",
                         path, p->name, dt_st_dtype_name(t->dtype));
            goto fail;
        }
        if (!same_shape(p, t)) {
            shape_text(p->whole_shape, p->ndim, a, sizeof a);
            shape_text(t->shape, t->ndim, b, sizeof b);
            st = dt_fail(DT_ERR_MISMATCH,
                         "weights: %s: tensor '%s' has shape %s, the model "
                         "expects %s",
                         path, p->name, b, a);
            goto fail;
        }
        /* NaN or Inf would train on as "loss nan": refuse the file, naming the tensor. The
         * data need not be 4-byte aligned in the file, hence the copy. */
        const unsigned char *raw = t->data;
        for (size_t k = 0; k < p->whole_count; k++) {
            float v;
            memcpy(&v, raw + k * sizeof v, sizeof v);
            if (!isfinite(v)) {
                st = dt_fail(DT_ERR_NONFINITE, "weights: %s: tensor '%s' holds %s at element %zu",
                             path, p->name, isnan(v) ? "NaN" : "Inf", k);
                goto fail;
            }
        }
    }
    for (int i = 0; i < dt_st_count(f); i++) {
        const dt_st_tensor *t = dt_st_get(f, i);
        if (dt_model_find_tensor(m, t->name) == NULL) {
            st = dt_fail(DT_ERR_MISMATCH, "weights: %s: tensor '%s' has no place in the model",
                         path, t->name);
            goto fail;
        }
    }
    for (int i = 0; i < dt_model_tensor_count(m); i++) {
        const dt_param_info *p = dt_model_tensor(m, i);
        const dt_st_tensor *t = dt_st_find(f, p->name);
        /* The whole tensor, or this rank's part of a tensor-parallel split. */
        const unsigned char *raw = t->data;
        float *dst = params + p->offset;
        if (p->split_dim < 0)
            memcpy(dst, raw, p->count * sizeof(float));
        else
            for (size_t k = 0; k < p->count; k++)
                memcpy(dst + k, raw + dt_param_whole_index(p, k) * sizeof(float), sizeof(float));
    }
fail:
    dt_st_close(f);
    return st;
}
