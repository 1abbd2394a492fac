/* weights.c — model parameters to and from safetensors files, under the names and in the
 * layouts that torch.nn.Sequential (or the seeds' named modules) use in a state_dict, so
 * that a PyTorch user loads dtrain's weights with one load_state_dict call. */
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "ckpt/st_meta.h"
#include "dtrain/checkpoint.h"
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
    /* A model that starts with an embedding takes token ids: the scaling does not apply. */
    const dt_st_input in = {.token_ids = dt_model_layer_spec(m, 0)->kind == DT_LAYER_EMBEDDING,
                            .mean = input_mean,
                            .std = input_std};
    DT_TRY(dt_st_write_weights(path, ts, n, &in));
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

/* Where a load reads tensors: a safetensors file or a checkpoint set's parts. */
typedef struct source {
    const char *path; /* for messages */
    const dt_st_file *file;
    const dt_ckpt_set *set;
} source;

static int source_count(const source *s)
{
    return s->file != NULL ? dt_st_count(s->file) : dt_ckpt_set_count(s->set);
}

static const dt_st_tensor *source_get(const source *s, int i)
{
    return s->file != NULL ? dt_st_get(s->file, i) : dt_ckpt_set_get(s->set, i);
}

static const dt_st_tensor *source_find(const source *s, const char *name)
{
    return s->file != NULL ? dt_st_find(s->file, name) : dt_ckpt_set_find(s->set, name);
}

/* A checkpoint's tensors that are not the model's: the optimizer's, compression's and the
 * replicas' own state (checkpoint.h). */
static int is_state(const source *s, const char *name)
{
    static const char *const prefixes[] = {DT_CKPT_STATE_PREFIX, DT_CKPT_COMPRESS_PREFIX,
                                           DT_CKPT_REPLICA_PREFIX};
    if (s->set == NULL)
        return 0;
    for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++)
        if (strncmp(name, prefixes[k], strlen(prefixes[k])) == 0)
            return 1;
    return 0;
}

/* The name the tied head's weight has in Hugging Face's files ("lm_head.weight": the head
 * layer's name, "lm_head" when it has none, and "weight") and the embedding tensor it is tied to; 0
 * when the model has no lm_head. GPT2LMHeadModel.save_pretrained leaves the tied copy out, but a
 * file written otherwise (torch.save of a state_dict, safetensors' save_model) holds it. */
static int tied_head(const dt_model *m, char *head, size_t nbytes, const dt_param_info **table)
{
    int emb = -1;
    for (int i = 0; i < dt_model_layer_count(m); i++) {
        const dt_layer_spec *s = dt_model_layer_spec(m, i);
        if (s->kind == DT_LAYER_EMBEDDING && emb < 0)
            emb = i;
        if (s->kind != DT_LAYER_LM_HEAD || emb < 0)
            continue;
        snprintf(head, nbytes, "%s.weight", s->name[0] != '\0' ? s->name : "lm_head");
        for (int k = 0; k < dt_model_tensor_count(m); k++)
            if (dt_model_tensor(m, k)->layer == emb) {
                *table = dt_model_tensor(m, k);
                return 1;
            }
    }
    return 0;
}

/* A tensor of the source that the model has no place for: an error, unless it is the tied
 * head's copy of the embedding's table and equals it byte for byte. */
static dt_status extra_tensor(const dt_model *m, const source *s, const dt_st_tensor *t)
{
    char head[2 * DT_NAME_MAX + 8];
    const dt_param_info *table = NULL;
    if (!tied_head(m, head, sizeof head, &table) || strcmp(t->name, head) != 0)
        return dt_fail(DT_ERR_MISMATCH, "weights: %s: tensor '%s' has no place in the model",
                       s->path, t->name);
    const dt_st_tensor *w = source_find(s, table->name);
    if (w == NULL || w->dtype != t->dtype || w->nbytes != t->nbytes || w->ndim != t->ndim ||
        memcmp(w->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim) != 0 ||
        memcmp(w->data, t->data, t->nbytes) != 0)
        return dt_fail(DT_ERR_MISMATCH,
                       "weights: %s: tensor '%s' differs from '%s': the head is tied to the "
                       "token embedding, so the two must be equal",
                       s->path, t->name, table->name);
    return DT_OK;
}

static dt_status load_from(dt_model *m, const source *src)
{
    const char *path = src->path;
    float *params = dt_model_params(m);
    /* Check everything before writing anything: a bad file leaves the model as it was. */
    for (int i = 0; i < dt_model_tensor_count(m); i++) {
        const dt_param_info *p = dt_model_tensor(m, i);
        const dt_st_tensor *t = source_find(src, p->name);
        char a[96], b[96];
        if (t == NULL)
            return dt_fail(DT_ERR_MISMATCH, "weights: %s: tensor '%s' is missing", path, p->name);
        if (t->dtype != DT_ST_F32)
            return dt_fail(DT_ERR_MISMATCH, "weights: %s: tensor '%s' has dtype %s, expected F32",
                           path, p->name, dt_st_dtype_name(t->dtype));
        if (!same_shape(p, t)) {
            shape_text(p->whole_shape, p->ndim, a, sizeof a);
            shape_text(t->shape, t->ndim, b, sizeof b);
            return dt_fail(DT_ERR_MISMATCH,
                           "weights: %s: tensor '%s' has shape %s, the model "
                           "expects %s",
                           path, p->name, b, a);
        }
        /* NaN or Inf would train on as "loss nan": refuse the file, naming the tensor. The
         * data need not be 4-byte aligned in the file, hence the copy. */
        const unsigned char *raw = t->data;
        for (size_t k = 0; k < p->whole_count; k++) {
            float v;
            memcpy(&v, raw + k * sizeof v, sizeof v);
            if (!isfinite(v))
                return dt_fail(DT_ERR_NONFINITE, "weights: %s: tensor '%s' holds %s at element %zu",
                               path, p->name, isnan(v) ? "NaN" : "Inf", k);
        }
    }
    for (int i = 0; i < source_count(src); i++) {
        const dt_st_tensor *t = source_get(src, i);
        if (dt_model_find_tensor(m, t->name) == NULL && !is_state(src, t->name)) {
            dt_status st = extra_tensor(m, src, t);
            if (st != DT_OK)
                return st;
        }
    }
    for (int i = 0; i < dt_model_tensor_count(m); i++) {
        const dt_param_info *p = dt_model_tensor(m, i);
        const dt_st_tensor *t = source_find(src, p->name);
        /* The whole tensor, or this rank's part of a tensor-parallel split. */
        const unsigned char *raw = t->data;
        float *dst = params + p->offset;
        if (p->split_dim < 0)
            memcpy(dst, raw, p->count * sizeof(float));
        else
            for (size_t k = 0; k < p->count; k++)
                memcpy(dst + k, raw + dt_param_whole_index(p, k) * sizeof(float), sizeof(float));
    }
    return DT_OK;
}

dt_status dt_weights_load(dt_model *m, const char *path)
{
    dt_st_file *f = NULL;
    dt_status st = dt_st_open(path, &f);
    if (st == DT_OK) {
        const source src = {.path = path, .file = f};
        st = load_from(m, &src);
    }
    dt_st_close(f);
    return st;
}

dt_status dt_weights_load_set(dt_model *m, const dt_ckpt_set *s)
{
    const source src = {.path = dt_ckpt_set_dir(s), .set = s};
    return load_from(m, &src);
}
