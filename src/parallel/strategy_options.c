/* strategy_options.c — the options' words (pipeline schedules, compression modes) and the
 * registry settings as a strategy reads them from its options: what every strategy may
 * call without reaching the registry (registry.h says why). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/strategy_impl.h"

const char *dt_pp_schedule_name(dt_pp_schedule s)
{
    static const char *const names[DT_PP_SCHEDULE_COUNT] = {"1f1b", "gpipe"};
    return (int)s >= 0 && s < DT_PP_SCHEDULE_COUNT ? names[s] : NULL;
}

dt_status dt_compress_parse(const char *text, dt_compress_options *out)
{
    static const char *const names[DT_COMPRESS_COUNT] = {"none", "fp16", "bf16", "topk",
                                                         "powersgd"};
    const char *colon = strchr(text, ':');
    const size_t len = colon != NULL ? (size_t)(colon - text) : strlen(text);
    dt_compress_options o = {.kind = DT_COMPRESS_COUNT, .error_feedback = 1};
    for (int k = 0; k < DT_COMPRESS_COUNT; k++)
        if (strlen(names[k]) == len && strncmp(text, names[k], len) == 0)
            o.kind = (dt_compress_kind)k;
    const int takes = o.kind == DT_COMPRESS_TOPK || o.kind == DT_COMPRESS_POWERSGD;
    if (o.kind == DT_COMPRESS_COUNT || takes != (colon != NULL))
        return dt_fail(DT_ERR_INVALID,
                       "'%s': none, fp16, bf16, topk:RATIO (0 < RATIO <= 1) or powersgd:RANK",
                       text);
    if (o.kind == DT_COMPRESS_TOPK) {
        char *end = NULL;
        o.ratio = strtod(colon + 1, &end);
        if (end == colon + 1 || *end != '\0' || !(o.ratio > 0.0 && o.ratio <= 1.0))
            return dt_fail(DT_ERR_INVALID, "'%s': topk's ratio must be in (0, 1]", text);
    }
    if (o.kind == DT_COMPRESS_POWERSGD) {
        char *end = NULL;
        const long r = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end != '\0' || r < 1 || r > 4096)
            return dt_fail(DT_ERR_INVALID, "'%s': powersgd's rank must be 1 to 4096", text);
        o.rank = (int)r;
    }
    *out = o;
    return DT_OK;
}

void dt_compress_format(const dt_compress_options *o, char *buf, size_t nbytes)
{
    switch (o->kind) {
    case DT_COMPRESS_FP16:
        snprintf(buf, nbytes, "fp16");
        return;
    case DT_COMPRESS_BF16:
        snprintf(buf, nbytes, "bf16");
        return;
    case DT_COMPRESS_TOPK:
        /* The shortest decimal that reads back as the same double: 0.1, not 0.1000...01. */
        for (int digits = 1; digits <= 17; digits++) {
            snprintf(buf, nbytes, "topk:%.*g", digits, o->ratio);
            if (strtod(buf + 5, NULL) == o->ratio)
                break;
        }
        return;
    case DT_COMPRESS_POWERSGD:
        snprintf(buf, nbytes, "powersgd:%d", o->rank);
        return;
    default:
        snprintf(buf, nbytes, "none");
        return;
    }
}

dt_status dt_strategy_options_get(const dt_strategy_options *o, const char *key, double *value)
{
    DT_ASSERT(o != NULL && key != NULL && value != NULL);
    for (int k = 0; k < o->nsettings; k++)
        if (strcmp(o->settings[k].key, key) == 0) {
            *value = o->settings[k].value;
            return DT_OK;
        }
    return dt_fail(DT_ERR_INVALID, "%s: no strategy has such a setting", key);
}

double dt_strategy_setting_get(const dt_strategy_options *o, const char *key)
{
    double v = 0.0;
    /* The options were made by dt_strategy_options_default, which holds every row's. */
    DT_ASSERT(dt_strategy_options_get(o, key, &v) == DT_OK);
    return v;
}

const char *dt_strategy_setting_given(const dt_strategy_options *o, const char *key)
{
    for (int k = 0; k < o->nsettings; k++)
        if (strcmp(o->settings[k].key, key) == 0)
            return o->settings[k].given;
    return NULL;
}

double dt_compress_predict_bytes(const dt_compress_options *c, double grad, int buckets)
{
    if (c->kind == DT_COMPRESS_FP16 || c->kind == DT_COMPRESS_BF16)
        return grad / 2;
    if (c->kind == DT_COMPRESS_TOPK) /* ceil per bucket: at most one entry more each */
        return 8.0 * ceil(c->ratio * grad / sizeof(float)) + 8.0 * (buckets - 1);
    return grad;
}
