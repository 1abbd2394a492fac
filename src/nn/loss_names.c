/* loss_names.c — the loss kinds' names as the config writes them; one table both ways. */
#include <string.h>

#include "core/names.h"
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
    int k = 0;
    dt_status st = dt_name_parse(loss_names, DT_LOSS_KIND_COUNT, name, "loss", &k);
    if (st == DT_OK)
        *out = (dt_loss_kind)k;
    return st;
}
