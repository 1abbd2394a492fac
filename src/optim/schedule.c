/* schedule.c — learning rate as a function of the optimizer step, in double (optim.h).
 * STEP matches torch.optim.lr_scheduler.StepLR, COSINE matches CosineAnnealingLR's closed
 * form, the warm-up matches LinearLR(start_factor, 1.0, warmup_steps) chained before them. */
#include <math.h>

#include "dtrain/optim.h"

dt_status dt_schedule_check(const dt_schedule *s)
{
    if ((int)s->kind < 0 || s->kind >= DT_SCHED_KIND_COUNT)
        return dt_fail(DT_ERR_INVALID, "schedule: unknown kind %d", (int)s->kind);
    if (!(s->lr > 0.0))
        return dt_fail(DT_ERR_INVALID, "optim.lr must be > 0, got %g", s->lr);
    if (s->warmup_steps < 0 || !(s->warmup_start >= 0.0 && s->warmup_start <= 1.0))
        return dt_fail(DT_ERR_INVALID, "schedule.warmup_steps must be >= 0 and "
                       "schedule.warmup_start in [0, 1]");
    if (s->kind == DT_SCHED_STEP && (s->step_size < 1 || !(s->gamma > 0.0)))
        return dt_fail(DT_ERR_INVALID, "schedule.step_size must be >= 1 and schedule.gamma > 0");
    if (s->kind == DT_SCHED_COSINE && (s->total_steps < 1 || !(s->min_lr >= 0.0)))
        return dt_fail(DT_ERR_INVALID, "schedule.total_steps must be >= 1 and schedule.min_lr "
                       ">= 0 for a cosine schedule");
    return DT_OK;
}

double dt_schedule_lr(const dt_schedule *s, int64_t step)
{
    if (step < s->warmup_steps)
        return s->lr * (s->warmup_start +
                        (1.0 - s->warmup_start) * (double)step / (double)s->warmup_steps);
    const int64_t k = step - s->warmup_steps;
    switch (s->kind) {
    case DT_SCHED_STEP:
        return s->lr * pow(s->gamma, (double)(k / s->step_size));
    case DT_SCHED_COSINE: {
        const double pi = 3.14159265358979323846;
        double f = k >= s->total_steps ? 1.0 : (double)k / (double)s->total_steps;
        return s->min_lr + (s->lr - s->min_lr) * 0.5 * (1.0 + cos(pi * f));
    }
    default:
        return s->lr;
    }
}
