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

/* Receives a stage posts ahead of their op (pipe.c); a part of the plan's layout. */
#define DT_PIPE_WINDOW 4

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

/* ops[0..nops) as text into buf[len] (docs/PIPELINE.md): "<v>F<j>" is the forward of
 * micro-batch j on virtual stage v, "<v>B<j>" its backward, one space between ops, e.g.
 * "0F0 0F1 0B0 0F2 0B1 0B2"; no ops: "". At most 24 bytes per op and the NUL.
 * DT_ERR_INVALID when buf is too small. */
dt_status dt_pipe_order_format(const dt_pipe_op *ops, int nops, char *buf, size_t len);

/* The text dt_pipe_order_format writes, back into ops[0..*nops) (at most cap). Only that
 * spelling is accepted (numbers without leading zeros, one space between ops and none
 * around them), so formatting what was parsed gives back the same text. DT_ERR_INVALID
 * naming the character (from 1) where the text goes wrong, or more than cap ops. */
dt_status dt_pipe_order_parse(const char *text, dt_pipe_op *ops, int cap, int *nops);

#endif
