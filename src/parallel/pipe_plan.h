/* pipe_plan.h (internal) — the order in which each pipeline stage runs the forwards (F)
 * and backwards (B) of its micro-batches on its virtual stages (pipe_plan.c). Never
 * installed.
 *
 * A virtual stage is a run of consecutive layers on one stage: a contiguous split has one
 * per stage; the round-robin placement has one per layer, virtual stage v on stage
 * v mod P. Micro-batch j goes up through every virtual stage in F and back down in B. */
#ifndef DT_PARALLEL_PIPE_PLAN_H
#define DT_PARALLEL_PIPE_PLAN_H

#include "parallel/strategy.h"

typedef struct dt_pipe_op {
    int backward; /* 0: F, 1: B */
    int vs;       /* the virtual stage */
    int micro;
} dt_pipe_op;

typedef struct dt_pipe_layout {
    int stages;       /* P */
    int nv;           /* virtual stages */
    const int *owner; /* [nv] the stage each runs on (no two in a row on one stage) */
    int micro;        /* M */
    dt_pp_schedule sched;
    int max_requests; /* messages one stage may have in flight at once */
    int window;       /* of them, receives posted ahead of their op */
} dt_pipe_layout;

/* What stage `stage` runs: its ops in order (ops holds 2 x micro x its virtual stages),
 * the micro-batches it keeps in flight (slots) and how many of a virtual stage's sends may
 * be in flight (depth). DT_ERR_UNSUPPORTED when a stage holds too many virtual stages for
 * max_requests; DT_ERR_INVALID for a layout that breaks the rules above. */
dt_status dt_pipe_plan(const dt_pipe_layout *l, int stage, dt_pipe_op *ops, int *nops, int *slots,
                       int *depth);

#endif
