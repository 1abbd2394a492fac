/* names.c — optimizer and schedule kinds' names (one table both ways) and the default
 * settings, which are PyTorch 1.13's: torch.optim.SGD (momentum 0, dampening 0, nesterov
 * off, weight_decay 0), Adam (betas (0.9, 0.999), eps 1e-8, weight_decay 0) and AdamW
 * (the same with weight_decay 0.01). lr is not here: it belongs to the schedule. */
#include <string.h>

#include "core/names.h"
#include "dtrain/optim.h"

static const char *const optim_names[DT_OPTIM_KIND_COUNT] = {
    [DT_OPTIM_SGD] = "sgd",
    [DT_OPTIM_ADAM] = "adam",
    [DT_OPTIM_ADAMW] = "adamw",
};

static const char *const decay_names[DT_DECAY_RULE_COUNT] = {
    [DT_DECAY_AUTO] = "auto",
    [DT_DECAY_ALL] = "all",
    [DT_DECAY_MATRICES] = "matrices",
};

static const char *const sched_names[DT_SCHED_KIND_COUNT] = {
    [DT_SCHED_CONSTANT] = "constant",
    [DT_SCHED_STEP] = "step",
    [DT_SCHED_COSINE] = "cosine",
};

dt_optim_config dt_optim_config_default(dt_optim_kind kind)
{
    DT_ASSERT((int)kind >= 0 && kind < DT_OPTIM_KIND_COUNT);
    dt_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.momentum = 0.0;
    c.dampening = 0.0;
    c.nesterov = 0;
    c.weight_decay = kind == DT_OPTIM_ADAMW ? 0.01 : 0.0;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.decay = DT_DECAY_AUTO;
    c.clip_norm = 0.0;
    return c;
}

const char *dt_optim_kind_name(dt_optim_kind kind)
{
    if ((int)kind < 0 || kind >= DT_OPTIM_KIND_COUNT)
        return "unknown";
    return optim_names[kind];
}

dt_status dt_optim_kind_parse(const char *name, dt_optim_kind *out)
{
    DT_ASSERT(name != NULL && out != NULL);
    int k = 0;
    dt_status st = dt_name_parse(optim_names, DT_OPTIM_KIND_COUNT, name, "optimizer", &k);
    if (st == DT_OK)
        *out = (dt_optim_kind)k;
    return st;
}

const char *dt_decay_rule_name(dt_decay_rule rule)
{
    if ((int)rule < 0 || rule >= DT_DECAY_RULE_COUNT)
        return "unknown";
    return decay_names[rule];
}

dt_status dt_decay_rule_parse(const char *name, dt_decay_rule *out)
{
    DT_ASSERT(name != NULL && out != NULL);
    int k = 0;
    dt_status st = dt_name_parse(decay_names, DT_DECAY_RULE_COUNT, name, "decay rule", &k);
    if (st == DT_OK)
        *out = (dt_decay_rule)k;
    return st;
}

dt_schedule dt_schedule_default(void)
{
    dt_schedule s;
    memset(&s, 0, sizeof s);
    s.kind = DT_SCHED_CONSTANT;
    s.lr = 1e-3; /* torch.optim.Adam's default, and the seeds' ConvNet's */
    s.warmup_steps = 0;
    s.warmup_start = 0.0;
    s.step_size = 1;
    s.gamma = 0.1; /* torch.optim.lr_scheduler.StepLR's default */
    s.total_steps = 0;
    s.min_lr = 0.0; /* CosineAnnealingLR's eta_min */
    return s;
}

const char *dt_sched_kind_name(dt_sched_kind kind)
{
    if ((int)kind < 0 || kind >= DT_SCHED_KIND_COUNT)
        return "unknown";
    return sched_names[kind];
}

dt_status dt_sched_kind_parse(const char *name, dt_sched_kind *out)
{
    DT_ASSERT(name != NULL && out != NULL);
    int k = 0;
    dt_status st = dt_name_parse(sched_names, DT_SCHED_KIND_COUNT, name, "schedule", &k);
    if (st == DT_OK)
        *out = (dt_sched_kind)k;
    return st;
}
