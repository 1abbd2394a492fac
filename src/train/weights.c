/* weights.c — model parameters to and from safetensors files, under the names and in the
 * layouts that torch.nn.Sequential (or the seeds' named modules) use in a state_dict, so
 * that a PyTorch user loads dtrain's weights with one load_state_dict call.
 *
 * A load reads the file's header, then each tensor the model holds a run of elements at a
 * time (dt_st_open_stream, dt_st_read): never the file whole, so that a pipeline stage or a
 * tensor-parallel part reads no more than its own tensors (weights_internal.h). */
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "ckpt/st_meta.h"
#include "dtrain/checkpoint.h"
#include "dtrain/safetensors.h"
#include "dtrain/train.h"
#include "train/weights_internal.h"

/* The floats a check reads at once: a tensor is never held whole to be checked. */
#define CHUNK_FLOATS ((size_t)4096)

dt_status dt_weights_save(const dt_model *m, const char *path, double input_mean, double input_std)
{
    if (dt_model_params((dt_model *)m) == NULL)
        return dt_fail(DT_ERR_INVALID,
                       "weights: %s: the model is a description (dt_model_describe): it has no "
                       "parameters to save",
                       path);
    if (dt_model_tp_size(m) > 1)
        return dt_fail(DT_ERR_INVALID,
                       "weights: %s: the model is one rank's part of a tensor-parallel "
                       "split: gather it (dt_model_gather_params) and use dt_weights_write",
                       path);
    return dt_weights_write(m, dt_model_params((dt_model *)m), path, input_mean, input_std);
}

dt_st_input dt_weights_input(const dt_model *m, double input_mean, double input_std)
{
    /* A model that starts with an embedding takes token ids: the scaling does not apply. */
    return (dt_st_input){.token_ids = dt_model_layer_spec(m, 0)->kind == DT_LAYER_EMBEDDING,
                         .mean = input_mean,
                         .std = input_std};
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
    const dt_st_input in = dt_weights_input(m, input_mean, input_std);
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

/* Where a load reads tensors: a safetensors file (its header, the data read when asked, or
 * all of it in memory) or a checkpoint set's parts. */
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

/* Bytes [offset, offset + nbytes) of t (source_find's) into dst. */
static dt_status source_read(const source *s, const dt_st_tensor *t, size_t offset, size_t nbytes,
                             void *dst)
{
    return s->file != NULL ? dt_st_read(s->file, t, offset, nbytes, dst)
                           : dt_ckpt_set_read(s->set, t->name, offset, nbytes, dst);
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

/* Whether tensors a and b of the source hold the same bytes, read a chunk of each at a time
 * into buf (2 x CHUNK_FLOATS floats). */
static dt_status same_bytes(const source *s, const dt_st_tensor *a, const dt_st_tensor *b,
                            float *buf, int *same)
{
    *same = a->nbytes == b->nbytes;
    for (size_t at = 0; *same && at < a->nbytes; at += CHUNK_FLOATS * sizeof(float)) {
        const size_t k = a->nbytes - at < CHUNK_FLOATS * sizeof(float)
                             ? a->nbytes - at
                             : CHUNK_FLOATS * sizeof(float);
        dt_status st = source_read(s, a, at, k, buf);
        if (st == DT_OK)
            st = source_read(s, b, at, k, buf + CHUNK_FLOATS);
        if (st != DT_OK)
            return st;
        *same = memcmp(buf, buf + CHUNK_FLOATS, k) == 0;
    }
    return DT_OK;
}

/* A tensor of the source that the model has no place for: an error, unless it is the tied
 * head's copy of the embedding's table and equals it byte for byte. */
static dt_status extra_tensor(const dt_model *m, const source *s, const dt_st_tensor *t, float *buf)
{
    char head[2 * DT_NAME_MAX + 8];
    const dt_param_info *table = NULL;
    if (!tied_head(m, head, sizeof head, &table) || strcmp(t->name, head) != 0)
        return dt_fail(DT_ERR_MISMATCH, "weights: %s: tensor '%s' has no place in the model",
                       s->path, t->name);
    const dt_st_tensor *w = source_find(s, table->name);
    int same = w != NULL && w->dtype == t->dtype && w->nbytes == t->nbytes && w->ndim == t->ndim &&
               memcmp(w->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim) == 0;
    if (same) {
        dt_status st = same_bytes(s, w, t, buf, &same);
        if (st != DT_OK)
            return st;
    }
    if (!same)
        return dt_fail(DT_ERR_MISMATCH,
                       "weights: %s: tensor '%s' differs from '%s': the head is tied to the "
                       "token embedding, so the two must be equal",
                       s->path, t->name, table->name);
    return DT_OK;
}

/* Every tensor of `whole` (the whole model, or its description) is in the source with dtype
 * F32 and its whole shape, and the source holds nothing else but state and a tied head's
 * equal copy: from the source's table alone, but for that copy. */
static dt_status check_table(const dt_model *whole, const source *src, float *buf)
{
    const char *path = src->path;
    for (int i = 0; i < dt_model_tensor_count(whole); i++) {
        const dt_param_info *p = dt_model_tensor(whole, i);
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
    }
    for (int i = 0; i < source_count(src); i++) {
        const dt_st_tensor *t = source_get(src, i);
        if (dt_model_find_tensor(whole, t->name) == NULL && !is_state(src, t->name)) {
            dt_status st = extra_tensor(whole, src, t, buf);
            if (st != DT_OK)
                return st;
        }
    }
    return DT_OK;
}

/* NaN or Inf would train on as "loss nan": each tensor m holds (the whole tensor of a
 * tensor-parallel part) read a chunk at a time into buf and refused, naming it, when it holds
 * one. The file's data need not be 4-byte aligned, hence the copy. */
static dt_status check_finite(const dt_model *m, const source *src, float *buf)
{
    for (int i = 0; i < dt_model_tensor_count(m); i++) {
        const dt_param_info *p = dt_model_tensor(m, i);
        const dt_st_tensor *t = source_find(src, p->name);
        for (size_t at = 0; at < p->whole_count; at += CHUNK_FLOATS) {
            const size_t k =
                p->whole_count - at < CHUNK_FLOATS ? p->whole_count - at : CHUNK_FLOATS;
            dt_status st = source_read(src, t, at * sizeof(float), k * sizeof(float), buf);
            if (st != DT_OK)
                return st;
            for (size_t e = 0; e < k; e++)
                if (!isfinite(buf[e]))
                    return dt_fail(DT_ERR_NONFINITE,
                                   "weights: %s: tensor '%s' holds %s at element %zu", src->path,
                                   p->name, isnan(buf[e]) ? "NaN" : "Inf", at + e);
        }
    }
    return DT_OK;
}

/* Elements [k0, k1) of this rank's part of tensor p from the source into dst, in runs of the
 * whole tensor's consecutive elements (all of it, a block of rows, or a row's columns). */
static dt_status copy_part(const dt_param_info *p, const source *src, size_t k0, size_t k1,
                           float *dst)
{
    const dt_st_tensor *t = source_find(src, p->name);
    for (size_t k = k0; k < k1;) {
        const size_t first = dt_param_whole_index(p, k);
        size_t n = 1;
        while (k + n < k1 && dt_param_whole_index(p, k + n) == first + n)
            n++;
        dt_status st =
            source_read(src, t, first * sizeof(float), n * sizeof(float), dst + (k - k0));
        if (st != DT_OK)
            return st;
        k += n;
    }
    return DT_OK;
}

/* Elements [lo, lo + n) of m's flat buffer from the source into out (ZeRO-3's slice, or the
 * whole buffer): each tensor's part of the range, straight into place. */
static dt_status copy_range(const dt_model *m, const source *src, size_t lo, size_t n, float *out)
{
    for (int i = 0; i < dt_model_tensor_count(m); i++) {
        const dt_param_info *p = dt_model_tensor(m, i);
        const size_t a = p->offset > lo ? p->offset : lo;
        const size_t b = p->offset + p->count < lo + n ? p->offset + p->count : lo + n;
        if (a >= b)
            continue;
        const dt_status st = copy_part(p, src, a - p->offset, b - p->offset, out + (a - lo));
        if (st != DT_OK)
            return st;
    }
    return DT_OK;
}

/* m's tensors (checked) from the source into its parameters: the whole tensor, or this
 * rank's part of a tensor-parallel split. */
static dt_status copy_tensors(dt_model *m, const source *src)
{
    return copy_range(m, src, 0, dt_model_param_count(m), dt_model_params(m));
}

static dt_status check_loadable(const dt_model *m, const char *path)
{
    if (dt_model_params((dt_model *)m) == NULL && !dt_model_has_windows(m))
        return dt_fail(DT_ERR_INVALID,
                       "weights: %s: the model is a description (dt_model_describe): it has no "
                       "parameters to load",
                       path);
    return DT_OK;
}

/* m's tensors checked against the whole model's (whole), then m's own checked finite: a
 * buffer of two chunks, nothing else held. */
static dt_status check_source(const dt_model *m, const dt_model *whole, const source *src)
{
    float *buf = NULL;
    dt_status st = check_loadable(m, src->path);
    if (st == DT_OK)
        st = dt_alloc(2 * CHUNK_FLOATS * sizeof(float), "weights chunk", (void **)&buf);
    if (st == DT_OK)
        st = check_table(whole, src, buf);
    if (st == DT_OK)
        st = check_finite(m, src, buf);
    dt_free(buf);
    return st;
}

/* Check everything before writing anything: a bad file leaves the model as it was. */
static dt_status load_from(dt_model *m, const source *src)
{
    dt_status st = check_source(m, m, src);
    return st == DT_OK ? copy_tensors(m, src) : st;
}

dt_status dt_weights_load(dt_model *m, const char *path)
{
    dt_st_file *f = NULL;
    dt_status st = check_loadable(m, path); /* before the file is opened */
    if (st == DT_OK)
        st = dt_st_open_stream(path, &f);
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

dt_status dt_weights_check_part(const dt_model *m, const dt_model *whole, const dt_st_file *f)
{
    const source src = {.path = dt_st_path(f), .file = f};
    return check_source(m, whole, &src);
}

dt_status dt_weights_copy_part(dt_model *m, const dt_st_file *f)
{
    const source src = {.path = dt_st_path(f), .file = f};
    return copy_tensors(m, &src);
}

dt_status dt_weights_copy_range(const dt_model *m, const dt_st_file *f, size_t lo, size_t n,
                                float *out)
{
    const source src = {.path = dt_st_path(f), .file = f};
    return copy_range(m, &src, lo, n, out);
}
