/* manifest.c — the manifest that completes a checkpoint set (checkpoint.h,
 * docs/checkpoint-format.md): JSON written with cJSON, wrapped with the CRC-32 of its own
 * bytes, {"crc32":"xxxxxxxx","manifest":{...}}, so that a flipped bit in a step number is
 * caught like one in a tensor. The wrapper's prefix has a fixed length, so the reader finds
 * the checksummed bytes without trusting the JSON first. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/checkpoint.h"

#define PREFIX_HEAD "{\"crc32\":\""
#define PREFIX_TAIL "\",\"manifest\":"
/* The readers below return at the first bad field: there is nothing to clean up. */
#define RETURN_IF_FAILED(expr)                                                                     \
    do {                                                                                           \
        dt_status rif_st_ = (expr);                                                                \
        if (rif_st_ != DT_OK)                                                                      \
            return rif_st_;                                                                        \
    } while (0)

enum { HEAD_LEN = 10, CRC_LEN = 8, TAIL_LEN = 13, PREFIX_LEN = HEAD_LEN + CRC_LEN + TAIL_LEN };

dt_status dt_ckpt_step_dir(const char *root, int64_t step, char *buf, size_t nbytes)
{
    const int n = snprintf(buf, nbytes, "%s/step-%09lld", root, (long long)step);
    if (n < 0 || (size_t)n >= nbytes)
        return dt_fail(DT_ERR_INVALID, "checkpoint: %s: the path is too long", root);
    return DT_OK;
}

static cJSON *files_json(const dt_ckpt_manifest *m)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr != NULL && i < m->nfiles; i++) {
        cJSON *f = cJSON_CreateObject();
        char crc[16];
        snprintf(crc, sizeof crc, "%08x", (unsigned)m->files[i].crc32);
        if (f == NULL || !cJSON_AddItemToArray(arr, f) ||
            cJSON_AddStringToObject(f, "name", m->files[i].name) == NULL ||
            cJSON_AddNumberToObject(f, "bytes", (double)m->files[i].bytes) == NULL ||
            cJSON_AddStringToObject(f, "crc32", crc) == NULL) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

static cJSON *manifest_json(const dt_ckpt_manifest *m)
{
    cJSON *o = cJSON_CreateObject(), *layout = cJSON_CreateObject(), *files = files_json(m);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)m->seed);
    int ok = o != NULL && layout != NULL && files != NULL;
    ok = ok && cJSON_AddStringToObject(o, "format", "dtrain-checkpoint") != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "version", m->version) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "step", (double)m->step) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "epoch", (double)m->epoch) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "epoch_step", (double)m->epoch_step) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "skipped", (double)m->skipped) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "global_batch", (double)m->global_batch) != NULL;
    ok = ok && cJSON_AddStringToObject(o, "seed", seed) != NULL;
    if (m->token_ids) { /* a text model's ids: no scaling to record */
        ok = ok && cJSON_AddStringToObject(o, "input", "token_ids") != NULL;
    } else {
        ok = ok && cJSON_AddNumberToObject(o, "input_mean", m->input_mean) != NULL;
        ok = ok && cJSON_AddNumberToObject(o, "input_std", m->input_std) != NULL;
    }
    ok = ok && cJSON_AddStringToObject(o, "optimizer", m->optimizer) != NULL;
    ok = ok && cJSON_AddNumberToObject(layout, "dp", m->dp) != NULL;
    ok = ok && cJSON_AddNumberToObject(layout, "tp", m->tp) != NULL;
    ok = ok && cJSON_AddNumberToObject(layout, "pp", m->pp) != NULL;
    ok = ok && cJSON_AddNumberToObject(layout, "zero", m->zero) != NULL;
    if (ok && cJSON_AddItemToObject(o, "layout", layout))
        layout = NULL;
    else
        ok = 0;
    if (ok && cJSON_AddItemToObject(o, "files", files))
        files = NULL;
    else
        ok = 0;
    cJSON_Delete(layout);
    cJSON_Delete(files);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

dt_status dt_ckpt_manifest_format(const dt_ckpt_manifest *m, char **out, size_t *nbytes)
{
    *out = NULL;
    cJSON *o = manifest_json(m);
    char *body = o != NULL ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (body == NULL)
        return dt_fail(DT_ERR_NOMEM, "checkpoint: cannot build the manifest");
    const size_t blen = strlen(body), n = PREFIX_LEN + blen + 2;
    char *text = NULL;
    dt_status st = dt_alloc(n + 1, "manifest", (void **)&text);
    if (st == DT_OK) {
        snprintf(text, n + 1, PREFIX_HEAD "%08x" PREFIX_TAIL "%s}\n",
                 (unsigned)dt_crc32(0, body, blen), body);
        *out = text;
        *nbytes = n;
    }
    cJSON_free(body);
    return st;
}

dt_status dt_ckpt_manifest_write(const char *dir, const dt_ckpt_manifest *m)
{
    char path[4096], *text = NULL;
    size_t n = 0;
    if (snprintf(path, sizeof path, "%s/%s", dir, DT_CKPT_MANIFEST) >= (int)sizeof path)
        return dt_fail(DT_ERR_INVALID, "checkpoint: %s: the path is too long", dir);
    dt_status st = dt_ckpt_manifest_format(m, &text, &n);
    if (st == DT_OK)
        st = dt_write_file_atomic(path, "checkpoint", text, n);
    dt_free(text);
    return st;
}

/* ---- reading ---- */

typedef struct reader {
    const char *origin;
    const cJSON *obj;
    const char *where; /* "" or "files[3]." */
} reader;

static dt_status bad(const reader *r, const char *key, const char *why)
{
    return dt_fail(DT_ERR_FORMAT, "checkpoint: %s: manifest field %s%s %s", r->origin, r->where,
                   key, why);
}

static dt_status get_int(const reader *r, const char *key, double lo, double hi, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->obj, key);
    if (!cJSON_IsNumber(v))
        return bad(r, key, "is missing or not a number");
    const double d = v->valuedouble;
    if (!(d >= lo && d <= hi) || floor(d) != d)
        return bad(r, key, "is not a whole number in range");
    *out = (int64_t)d;
    return DT_OK;
}

static dt_status get_double(const reader *r, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->obj, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return bad(r, key, "is missing or not a finite number");
    *out = v->valuedouble;
    return DT_OK;
}

static dt_status get_string(const reader *r, const char *key, char *buf, size_t nbytes)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->obj, key);
    if (!cJSON_IsString(v) || v->valuestring == NULL)
        return bad(r, key, "is missing or not a string");
    if (strlen(v->valuestring) >= nbytes || v->valuestring[0] == '\0')
        return bad(r, key, "is empty or too long");
    snprintf(buf, nbytes, "%s", v->valuestring);
    return DT_OK;
}

/* A file name stays inside the set's directory: no separators, no leading dot. */
static int name_ok(const char *s)
{
    if (s[0] == '.' || s[0] == '\0')
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '_' || *s == '-'))
            return 0;
    return 1;
}

static dt_status parse_hex32(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    if (strlen(s) != 8)
        return DT_ERR_FORMAT;
    for (int i = 0; i < 8; i++) {
        const char c = s[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return DT_ERR_FORMAT;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return DT_OK;
}

static dt_status parse_files(const reader *top, dt_ckpt_manifest *m)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(top->obj, "files");
    if (!cJSON_IsArray(arr))
        return bad(top, "files", "is missing or not an array");
    const int n = cJSON_GetArraySize(arr);
    if (n < 1 || n > DT_CKPT_MAX_FILES)
        return bad(top, "files", "must list 1 to 128 files");
    m->nfiles = n;
    for (int i = 0; i < n; i++) {
        char where[32], crc[16];
        snprintf(where, sizeof where, "files[%d].", i);
        const reader r = {top->origin, cJSON_GetArrayItem(arr, i), where};
        dt_ckpt_file *f = &m->files[i];
        int64_t bytes = 0;
        if (!cJSON_IsObject(r.obj))
            return bad(top, where, "is not an object");
        RETURN_IF_FAILED(get_string(&r, "name", f->name, sizeof f->name));
        if (!name_ok(f->name))
            return bad(&r, "name", "is not a plain file name");
        for (int k = 0; k < i; k++)
            if (strcmp(m->files[k].name, f->name) == 0)
                return bad(&r, "name", "is listed twice");
        RETURN_IF_FAILED(get_int(&r, "bytes", 8, 9007199254740992.0, &bytes));
        f->bytes = (uint64_t)bytes;
        RETURN_IF_FAILED(get_string(&r, "crc32", crc, sizeof crc));
        if (parse_hex32(crc, &f->crc32) != DT_OK)
            return bad(&r, "crc32", "is not 8 lower-case hex digits");
    }
    return DT_OK;
}

static dt_status parse_layout(const reader *top, dt_ckpt_manifest *m)
{
    const reader r = {top->origin, cJSON_GetObjectItemCaseSensitive(top->obj, "layout"), "layout."};
    int64_t dp, tp, pp, zero;
    if (!cJSON_IsObject(r.obj))
        return bad(top, "layout", "is missing or not an object");
    RETURN_IF_FAILED(get_int(&r, "dp", 1, 1 << 20, &dp));
    RETURN_IF_FAILED(get_int(&r, "tp", 1, 1 << 20, &tp));
    RETURN_IF_FAILED(get_int(&r, "pp", 1, 1 << 20, &pp));
    RETURN_IF_FAILED(get_int(&r, "zero", 0, 3, &zero));
    m->dp = (int)dp;
    m->tp = (int)tp;
    m->pp = (int)pp;
    m->zero = (int)zero;
    return DT_OK;
}

static dt_status parse_fields(const reader *r, dt_ckpt_manifest *m)
{
    char format[32], seed[32];
    int64_t version;
    const double big = 9007199254740992.0; /* 2^53: exact in a JSON number */
    RETURN_IF_FAILED(get_string(r, "format", format, sizeof format));
    if (strcmp(format, "dtrain-checkpoint") != 0)
        return bad(r, "format", "is not \"dtrain-checkpoint\"");
    RETURN_IF_FAILED(get_int(r, "version", 1, 1 << 20, &version));
    if (version != DT_CKPT_VERSION)
        return dt_fail(DT_ERR_UNSUPPORTED,
                       "checkpoint: %s: format version %lld (this dtrain reads version %d)",
                       r->origin, (long long)version, DT_CKPT_VERSION);
    m->version = (int)version;
    RETURN_IF_FAILED(get_int(r, "step", 0, big, &m->step));
    RETURN_IF_FAILED(get_int(r, "epoch", 0, big, &m->epoch));
    RETURN_IF_FAILED(get_int(r, "epoch_step", 0, big, &m->epoch_step));
    RETURN_IF_FAILED(get_int(r, "skipped", 0, big, &m->skipped));
    RETURN_IF_FAILED(get_int(r, "global_batch", 1, big, &m->global_batch));
    RETURN_IF_FAILED(get_string(r, "seed", seed, sizeof seed));
    char *end = NULL;
    m->seed = strtoull(seed, &end, 10);
    if (seed[0] < '0' || seed[0] > '9' || *end != '\0')
        return bad(r, "seed", "is not a decimal number");
    /* The model's input: token ids ("input", since text models), or images' scaling (every
     * set before them, and every image model's). */
    if (cJSON_GetObjectItemCaseSensitive(r->obj, "input") != NULL) {
        char input[32];
        RETURN_IF_FAILED(get_string(r, "input", input, sizeof input));
        if (strcmp(input, "token_ids") != 0)
            return bad(r, "input", "is not \"token_ids\"");
        m->token_ids = 1;
    } else {
        RETURN_IF_FAILED(get_double(r, "input_mean", &m->input_mean));
        RETURN_IF_FAILED(get_double(r, "input_std", &m->input_std));
    }
    RETURN_IF_FAILED(get_string(r, "optimizer", m->optimizer, sizeof m->optimizer));
    RETURN_IF_FAILED(parse_layout(r, m));
    return parse_files(r, m);
}

dt_status dt_ckpt_manifest_parse(const char *text, size_t n, const char *origin,
                                 dt_ckpt_manifest *out)
{
    memset(out, 0, sizeof *out);
    /* {"crc32":"xxxxxxxx","manifest":BODY}\n: the checksum first, over BODY's bytes. */
    size_t end = n;
    if (end > 0 && text[end - 1] == '\n')
        end--;
    if (end < PREFIX_LEN + 3 || text[end - 1] != '}' || memcmp(text, PREFIX_HEAD, HEAD_LEN) != 0 ||
        memcmp(text + HEAD_LEN + CRC_LEN, PREFIX_TAIL, TAIL_LEN) != 0)
        return dt_fail(DT_ERR_FORMAT,
                       "checkpoint: %s: not a dtrain manifest (it must begin "
                       "{\"crc32\":\"xxxxxxxx\",\"manifest\":)",
                       origin);
    char crc_text[CRC_LEN + 1];
    memcpy(crc_text, text + HEAD_LEN, CRC_LEN);
    crc_text[CRC_LEN] = '\0';
    uint32_t want = 0;
    if (parse_hex32(crc_text, &want) != DT_OK)
        return dt_fail(DT_ERR_FORMAT, "checkpoint: %s: the manifest's crc32 is not hex", origin);
    const char *body = text + PREFIX_LEN;
    const size_t blen = end - 1 - PREFIX_LEN;
    const uint32_t got = dt_crc32(0, body, blen);
    if (got != want)
        return dt_fail(DT_ERR_FORMAT,
                       "checkpoint: %s: the manifest is corrupt (crc32 %08x, recorded %08x)",
                       origin, (unsigned)got, (unsigned)want);
    cJSON *o = cJSON_ParseWithLength(body, blen);
    if (o == NULL || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return dt_fail(DT_ERR_FORMAT, "checkpoint: %s: the manifest is not a JSON object", origin);
    }
    const reader r = {origin, o, ""};
    dt_status st = parse_fields(&r, out);
    cJSON_Delete(o);
    return st;
}
