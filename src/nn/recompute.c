/* recompute.c — the recompute setting (model.h): "none", "every-K" or "sqrt", and the
 * segment length it gives a model. The recompute itself is model_run.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/model.h"

int dt_model_recompute_layers(int setting, int nlayers)
{
    if (setting == DT_RECOMPUTE_SQRT)
        return (int)ceil(sqrt((double)(nlayers > 0 ? nlayers : 1)));
    return setting > 0 ? setting : 0;
}

dt_status dt_recompute_parse(const char *text, int *setting)
{
    if (strcmp(text, "none") == 0) {
        *setting = DT_RECOMPUTE_NONE;
        return DT_OK;
    }
    if (strcmp(text, "sqrt") == 0) {
        *setting = DT_RECOMPUTE_SQRT;
        return DT_OK;
    }
    if (strcmp(text, "block") == 0) {
        *setting = DT_RECOMPUTE_BLOCK;
        return DT_OK;
    }
    if (strncmp(text, "every-", 6) == 0) {
        char *end = NULL;
        const long k = strtol(text + 6, &end, 10);
        if (end != text + 6 && *end == '\0' && k >= 1 && k <= 1000000) {
            *setting = (int)k;
            return DT_OK;
        }
    }
    return dt_fail(DT_ERR_INVALID,
                   "recompute '%s': expected none, sqrt, every-K with K >= 1 (layers per "
                   "segment) or block (each transformer block re-runs its inside)",
                   text);
}

void dt_recompute_format(int setting, char *buf, size_t nbytes)
{
    if (setting == DT_RECOMPUTE_SQRT)
        snprintf(buf, nbytes, "sqrt");
    else if (setting == DT_RECOMPUTE_BLOCK)
        snprintf(buf, nbytes, "block");
    else if (setting <= 0)
        snprintf(buf, nbytes, "none");
    else
        snprintf(buf, nbytes, "every-%d", setting);
}
