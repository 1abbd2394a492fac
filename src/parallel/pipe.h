/* pipe.h (internal) — a pipeline stage: its schedule of micro-batch forwards and
 * backwards, and the activations and gradients it exchanges with the stages beside it
 * (pipe.c). Any strategy runs its micro-steps through it when the grid has pp > 1: the
 * data-parallel reduction of a stage's gradients (among the ranks that hold the same stage
 * and tensor-parallel shard) is the strategy's, as without a pipeline. Never installed. */
#ifndef DT_PARALLEL_PIPE_H
#define DT_PARALLEL_PIPE_H

#include "parallel/strategy_impl.h"

/* The pipeline of stage dt_comm_rank(pp) of dt_comm_size(pp) running `micro` micro-batches
 * per step in `sched`. `pp` is borrowed. */
dt_status dt_pipe_create(dt_comm *pp, dt_pp_schedule sched, int micro, dt_pipe **out);
void dt_pipe_free(dt_pipe *p);

/* The stage each of the whole model's nlayers layers runs on (a contiguous split, or the
 * round-robin placement's runs of layers); until it is called, one run per stage. Changes
 * the slots. Before dt_pipe_attach. */
dt_status dt_pipe_place(dt_pipe *p, const int *stage_of, int nlayers);

/* Micro-batches this stage keeps in flight (dt_strategy_info.slots). */
int dt_pipe_slots(const dt_pipe *p);

/* Sizes the pipeline for the stage's model, planned for slots x rows samples. Allocates;
 * later calls do not. */
dt_status dt_pipe_attach(dt_pipe *p, dt_model *m);

/* One step's micro-batches of this replica (as dt_strategy_micro_steps) through the stage
 * in the schedule's order: the first stage loads inputs, the last loads targets and
 * computes the loss (adding its sum to *loss_sum; 0 on other stages), activations go
 * forward and their gradients back as non-blocking messages. `last_hooks` go to the
 * stage's last backward, after `before_last` (may be NULL). */
dt_status dt_pipe_step(dt_strategy *s, const dt_step_plan *plan, const dt_step_io *io,
                       const dt_backward_hooks *last_hooks,
                       dt_status (*before_last)(dt_strategy *s), double *loss_sum);

/* This replica's share of the test set through the pipeline (forwards only); the last
 * stage adds the sums. */
dt_status dt_pipe_evaluate(dt_strategy *s, int64_t n_test, const dt_step_io *io, double *loss_sum,
                           double *correct);

/* values[0..n) = the values of the stage that runs the last layer, on every stage.
 * Collective over the pipeline. */
dt_status dt_pipe_share(dt_pipe *p, double *values, int n);
/* The stage (rank in the pipeline's group) that runs the whole model's last layer. */
int dt_pipe_last_stage(const dt_pipe *p);
/* Where the stage's forwards, backwards, loads and waits are timed (obs.h), or NULL. */
void dt_pipe_set_obs(dt_pipe *p, dt_obs *obs);

/* whole[0..n): each stage holds its own tensors there and zeros elsewhere; afterwards every
 * stage holds every stage's. Exact: the bit patterns are summed as integers, each element
 * nonzero on one stage at most. Collective over the pipeline. */
dt_status dt_pipe_combine(dt_pipe *p, float *whole, size_t n);
/* n floats from stage `stage` (send, read there) to stage 0 (recv, written there): one
 * message between the two, under a tag of its own, outside any step; nothing on the other
 * stages, nor for stage 0. A weight file's tensor on its way to the rank that writes it. */
dt_status dt_pipe_to_first(dt_pipe *p, int stage, const float *send, float *recv, size_t n);

/* The stage's figures over `steps` optimizer steps (dt_strategy_describe). */
void dt_pipe_describe(const dt_pipe *p, int64_t steps, dt_figures *out);

#endif
