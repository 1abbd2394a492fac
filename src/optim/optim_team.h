/* optim_team.h — an optimizer step split over a thread team (the model's). */
#ifndef DT_OPTIM_TEAM_H
#define DT_OPTIM_TEAM_H

#include "core/pool.h"
#include "dtrain/optim.h"

/* dt_optim_step with the update split between `team`'s members (NULL, or a short buffer:
 * on the calling thread alone). The same bits either way. The rule reads every gradient
 * scaled by grad_scale (the clipping factor, dt_clip_coef; 1 for none), with the bits of
 * dt_clip_apply followed by dt_optim_step, and leaves grads as they are. */
void dt_optim_step_team(dt_optim *o, float *params, const float *grads, size_t count, double lr,
                        double grad_scale, dt_pool *team);

#endif
