/* pipe_plan.c — each stage's order of forwards (F) and backwards (B) on its virtual stages
 * (pipe_plan.h), found by playing the whole pipeline through once with unit costs (F 1,
 * B 2): at each moment every idle stage takes the ready op its schedule prefers. GPipe
 * runs all of a stage's forwards before its backwards; 1F1B takes a backward whenever one
 * is ready. Either way the lowest micro-batch goes first, and a virtual stage runs its
 * micro-batches in order, forwards and backwards alike: its parameter gradients then sum
 * the micro-batches in the order one process sums them.
 *
 * An op is ready when what it waits for has run (pipe.c waits for exactly these):
 *   F(v, j): F(v - 1, j), whose output is its input; on a stage's lowest virtual stage,
 *            B(v, j - slots), the end of the micro-batch whose rows j takes over; and
 *            F(v + 1, j - depth), the receiver of the send whose request F(v, j) reuses.
 *   B(v, j): F(v, j); B(v + 1, j), whose input gradient is its output's; and
 *            B(v - 1, j - depth), the receiver of the send whose request B(v, j) reuses.
 * Slots: every micro-batch under GPipe; under 1F1B as many as there are virtual stages
 * from the stage's lowest to the last (P - s for a contiguous split: stage s keeps at most
 * P - s micro-batches of activations). Depth: the sends of one virtual stage in flight,
 * at most the slots and small enough that a stage's requests fit the comm layer's pool.
 *
 * Why running these orders for real never deadlocks: the play-through is one global order
 * of all ops in which everything an op waits for comes earlier. A stage runs its ops in
 * that order and waits only for those earlier ops (a receive whose sender has run, or a
 * send whose receiver has run), so the earliest op not yet run can always run. */
#include "parallel/pipe_plan.h"

typedef struct sim {
    const dt_pipe_layout *l;
    int *vlow, *slots, *depth, *fleft, *busy; /* [stages] */
    int *nextf, *nextb;                       /* [nv] the next micro-batch of each */
    int *tf, *tb;                             /* [nv x micro] when each op ended; -1: not run */
} sim;

static size_t at(const sim *s, int v, int j)
{
    return (size_t)v * (size_t)s->l->micro + (size_t)j;
}

static int ran_by(const int *t_end, size_t i, int t)
{
    return t_end[i] >= 0 && t_end[i] <= t;
}

static int f_ready(const sim *s, int v, int t)
{
    const dt_pipe_layout *l = s->l;
    const int j = s->nextf[v], r = l->owner[v];
    if (j >= l->micro)
        return 0;
    if (v > 0 && !ran_by(s->tf, at(s, v - 1, j), t))
        return 0;
    if (v == s->vlow[r] && j >= s->slots[r] && !ran_by(s->tb, at(s, v, j - s->slots[r]), t))
        return 0;
    return v == l->nv - 1 || j < s->depth[r] || ran_by(s->tf, at(s, v + 1, j - s->depth[r]), t);
}

static int b_ready(const sim *s, int v, int t)
{
    const dt_pipe_layout *l = s->l;
    const int j = s->nextb[v], r = l->owner[v];
    if (j >= l->micro || (l->sched == DT_PP_GPIPE && s->fleft[r] > 0))
        return 0;
    if (!ran_by(s->tf, at(s, v, j), t))
        return 0;
    if (v < l->nv - 1 && !ran_by(s->tb, at(s, v + 1, j), t))
        return 0;
    return v == 0 || j < s->depth[r] || ran_by(s->tb, at(s, v - 1, j - s->depth[r]), t);
}

/* Stage r's choice at time t: 1 and *op, or 0 when nothing is ready. Forwards: the lowest
 * micro-batch, then the lowest virtual stage; backwards: the lowest micro-batch, then the
 * highest virtual stage. */
static int pick(const sim *s, int r, int t, dt_pipe_op *op)
{
    const dt_pipe_layout *l = s->l;
    int fv = -1, bv = -1;
    for (int v = 0; v < l->nv; v++) {
        if (l->owner[v] != r)
            continue;
        if (f_ready(s, v, t) && (fv < 0 || s->nextf[v] < s->nextf[fv]))
            fv = v;
        if (b_ready(s, v, t) && (bv < 0 || s->nextb[v] <= s->nextb[bv]))
            bv = v;
    }
    const int take_b = bv >= 0 && (l->sched != DT_PP_GPIPE ? 1 : fv < 0);
    if (take_b) {
        *op = (dt_pipe_op){1, bv, s->nextb[bv]};
        return 1;
    }
    if (fv >= 0) {
        *op = (dt_pipe_op){0, fv, s->nextf[fv]};
        return 1;
    }
    return 0;
}

/* Each stage's lowest virtual stage, slots and depth; the layout's rules checked. */
static dt_status plan_stages(sim *s)
{
    const dt_pipe_layout *l = s->l;
    for (int r = 0; r < l->stages; r++)
        s->vlow[r] = -1;
    for (int v = 0; v < l->nv; v++) {
        const int r = l->owner[v];
        if (r < 0 || r >= l->stages || (v > 0 && l->owner[v - 1] == r))
            return dt_fail(DT_ERR_INVALID,
                           "pipeline: virtual stage %d on stage %d breaks the "
                           "layout (a stage, not the one before it)",
                           v, r);
        if (s->vlow[r] < 0)
            s->vlow[r] = v;
        s->fleft[r]++;
    }
    for (int r = 0; r < l->stages; r++) {
        if (s->vlow[r] < 0)
            return dt_fail(DT_ERR_INVALID, "pipeline: stage %d holds no layers", r);
        const int chunks = s->fleft[r];
        s->fleft[r] *= l->micro;
        const int deep = l->nv - s->vlow[r];
        s->slots[r] = l->sched == DT_PP_GPIPE || deep > l->micro ? l->micro : deep;
        const int fit = (l->max_requests - l->window) / (2 * chunks);
        if (fit < 1)
            return dt_fail(DT_ERR_UNSUPPORTED,
                           "parallel.pp_split: stage %d holds %d runs of layers, and the comm "
                           "layer keeps at most %d messages in flight per stage: use fewer "
                           "runs (a balanced split, or fewer layers)",
                           r, chunks, l->max_requests);
        s->depth[r] = fit < s->slots[r] ? fit : s->slots[r];
    }
    return DT_OK;
}

static dt_status play(sim *s, int stage, dt_pipe_op *ops, int *nops)
{
    const dt_pipe_layout *l = s->l;
    const int total = 2 * l->micro * l->nv;
    /* Some stage is busy at every moment, so the play ends within the ops' summed cost. */
    const long limit = 3L * total + 4;
    int ran = 0;
    *nops = 0;
    for (long t = 0; ran < total; t++) {
        if (t > limit)
            return dt_fail(DT_ERR_INVALID, "pipeline: no schedule found (%d of %d ops ran)", ran,
                           total);
        for (int r = 0; r < l->stages; r++) {
            dt_pipe_op op;
            if (s->busy[r] > t || !pick(s, r, (int)t, &op))
                continue;
            const int cost = op.backward ? 2 : 1;
            s->busy[r] = (int)t + cost;
            if (op.backward) {
                s->tb[at(s, op.vs, op.micro)] = (int)t + cost;
                s->nextb[op.vs]++;
            } else {
                s->tf[at(s, op.vs, op.micro)] = (int)t + cost;
                s->nextf[op.vs]++;
                s->fleft[r]--;
            }
            if (r == stage)
                ops[(*nops)++] = op;
            ran++;
        }
    }
    return DT_OK;
}

dt_status dt_pipe_plan(const dt_pipe_layout *l, int stage, dt_pipe_op *ops, int *nops, int *slots,
                       int *depth)
{
    DT_ASSERT(l != NULL && l->owner != NULL && l->nv >= 1 && l->micro >= 1 && stage >= 0 &&
              stage < l->stages && nops != NULL && slots != NULL && depth != NULL);
    dt_status st = DT_OK;
    sim s = {.l = l};
    const size_t P = (size_t)l->stages, V = (size_t)l->nv, VM = V * (size_t)l->micro;
    DT_TRY(dt_alloc(sizeof(int) * P * 5, "pipeline schedule", (void **)&s.vlow));
    DT_TRY(dt_alloc(sizeof(int) * V * 2, "pipeline schedule", (void **)&s.nextf));
    DT_TRY(dt_alloc(sizeof(int) * VM * 2, "pipeline schedule", (void **)&s.tf));
    s.slots = s.vlow + P;
    s.depth = s.vlow + 2 * P;
    s.fleft = s.vlow + 3 * P;
    s.busy = s.vlow + 4 * P;
    s.nextb = s.nextf + V;
    s.tb = s.tf + VM;
    for (size_t i = 0; i < P * 5; i++)
        s.vlow[i] = 0;
    for (size_t i = 0; i < V * 2; i++)
        s.nextf[i] = 0;
    for (size_t i = 0; i < VM * 2; i++)
        s.tf[i] = -1;
    DT_TRY(plan_stages(&s));
    *slots = s.slots[stage];
    *depth = s.depth[stage];
    if (ops != NULL)
        DT_TRY(play(&s, stage, ops, nops));
fail:
    dt_free(s.vlow);
    dt_free(s.nextf);
    dt_free(s.tf);
    return st;
}
