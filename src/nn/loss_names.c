/* loss_names.c — the loss kinds' names as the config writes them; one table both ways. */
#include <string.h>

#include "dtrain/loss.h"

static const char *const loss_names[DT_LOSS_KIND_COUNT] = {
    [DT_LOSS_CROSS_ENTROPY] = "cross_entropy",
    [DT_LOSS_NLL] = "nll",
    [DT_LOSS_MSE] = "mse",
};

const char *dt_loss_kind_name(dt_loss_kind kind)
{
    if ((int)kind < 0 || kind >= DT_LOSS_KIND_COUNT)
        return "unknown";
    return loss_names[kind];
}

dt_status dt_loss_kind_parse(const char *name, dt_loss_kind *out)
{
    DT_ASSERT(name != NULL && out != NULL);
    for (int k = 0; k < DT_LOSS_KIND_COUNT; k++) {
        if (strcmp(name, loss_names[k]) == 0) {
            *out = (dt_loss_kind)k;
            return DT_OK;
        }
    }
    return dt_fail(DT_ERR_INVALID, "unknown loss '%s' (one of: cross_entropy, nll, mse)", name);
}
