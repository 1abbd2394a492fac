/* dp.h — synchronous data parallelism (internal to the library): the trainer calls these
 * around each optimizer step; everything else about the strategy lives in dp.c.
 *
 *   start:   every rank checks the model signature, rank 0's parameters are broadcast;
 *   begin:   before the backward of a step's last micro-step;
 *   hooks:   grads_ready closes gradient buckets (contiguous ranges of the flat gradient
 *            buffer in backward order) and starts their non-blocking all-reduce (SUM);
 *            progress advances pending all-reduces between layers and conv chunks;
 *   finish:  waits for every bucket and sums the step's loss across ranks (in rank order);
 *   optim:   the optimizer step (on the whole buffer, or on this rank's ZeRO-1 slice
 *            followed by an all-gather of the parameters). */
#ifndef DT_PARALLEL_DP_H
#define DT_PARALLEL_DP_H

#include "dtrain/config.h"
#include "dtrain/model.h"
#include "dtrain/optim.h"

typedef struct dt_comm dt_comm;
typedef struct dt_dp dt_dp;

/* This rank's place in the data-parallel group of `world` under cfg's layout; refuses
 * a layout that does not fit the world size. Collective-free. */
dt_status dt_dp_layout(dt_comm *world, const dt_config *cfg, int *dp_rank, int *dp_size);
dt_status dt_dp_create(dt_comm *world, dt_model *m, const dt_config *cfg, dt_dp **out);
void dt_dp_free(dt_dp *dp);
/* Elements the optimizer owns on this rank: the whole model, or the ZeRO-1 slice. */
size_t dt_dp_optim_count(const dt_dp *dp);
dt_status dt_dp_start(dt_dp *dp);
dt_status dt_dp_begin(dt_dp *dp);
const dt_backward_hooks *dt_dp_hooks(dt_dp *dp);
dt_status dt_dp_finish(dt_dp *dp, double *loss_sum);
dt_status dt_dp_optim_step(dt_dp *dp, dt_optim *o, double lr);
/* Sums n doubles across the data-parallel group, in place. */
dt_status dt_dp_sum_doubles(dt_dp *dp, double *vals, int n);

/* Communication figures since creation (dt_train_comm_stats in train.h). */
void dt_dp_stats(const dt_dp *dp, double *wait_s, double *exposed_s, int64_t *steps, int *buckets,
                 size_t *bytes_per_step);
/* Runs one step's bucket all-reduces `reps` times, blocking, on a scratch copy of the
 * gradients, and returns the median time of one round. Collective. */
dt_status dt_dp_time_alone(dt_dp *dp, int reps, double *seconds);

#endif
