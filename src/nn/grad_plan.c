/* grad_plan.c — where backward keeps the gradients of the activations.
 *
 * Backward runs layer L-1 down to layer 0; call layer i's backward "time i" (the loss
 * writes the output's gradient at time L). Layer i reads dy = G(i+1) and writes
 * dx = G(i). A layer whose backward may run in place (bwd_in_place) writes G(i) over
 * G(i+1), so gradients form chains: a chain's top gradient G(k) is written at time k, and
 * its lowest, G(j), is read for the last time at time j-1 (-1 for the model input's,
 * which the caller reads after backward). Two chains may share a buffer when these
 * intervals [j-1, k] do not meet.
 *
 * Any buffer serves, activations' included: an activation buffer is free for a chain
 * written at time k when every backward that reads it (as x: bwd_reads_x, or as y:
 * needs_output) ran before, at a time above k — or at time k itself when that reader is
 * the chain's own producer writing dx over its x (bwd_dx_over_x). The model's input and
 * output buffers are never used: their callers own them. What fits nowhere goes to extra
 * buffers, grown as needed. Chains are placed largest first, each in the smallest free
 * activation buffer that holds it, else the smallest extra one, else the extra one that
 * must grow least: for the seeds' ConvNet this leaves one extra buffer of a fifth of the
 * largest activation, where two full-size ping-pong buffers were needed before (ReLU
 * then reads its mask bits, not its output: relu.c).
 *
 * Rows apart (a pipeline stage's model): micro-batches in flight in different rows of the
 * same buffers must never touch each other's memory. A gradient shares a buffer only with
 * activations and gradients of the same size per sample, so that its rows are exactly
 * theirs: row r of a gradient of 2 floats per sample would otherwise lie over rows 2r and
 * 2r + 1 of an activation of 1, another micro-batch's. The plan assumes one forward, then
 * one backward: a backward that re-runs a forward segment (gradient checkpointing) would
 * refill activation buffers that hold gradients by then, and must be planned with that. */
#include <limits.h>
#include <string.h>

#include "nn/grad_plan.h"

typedef struct chain {
    int top, bottom; /* boundaries k >= j */
    int lo, hi;      /* live from time hi = k down to time lo = j - 1 */
    size_t floats;
    int store; /* as plan->store */
} chain;

static int meets(const chain *a, const chain *b)
{
    return a->lo <= b->hi && b->lo <= a->hi;
}

/* Whether chain c may go where chains[0..n) with store == where already are. */
static int no_conflict(const chain *chains, int n, const chain *c, int where)
{
    for (int i = 0; i < n; i++)
        if (chains[i].store == where && meets(&chains[i], c))
            return 0;
    return 1;
}

/* last_read[s]: the earliest backward time at which activation buffer s is still read
 * (INT_MAX: never; INT_MIN: the model's input or output, which are never used). */
static void plan_last_reads(const dt_layer *layers, int L, const int *sid, int nstore,
                            int *last_read)
{
    for (int s = 0; s < nstore; s++)
        last_read[s] = INT_MAX;
    for (int i = 0; i < L; i++) {
        const dt_layer_ops *o = layers[i].ops;
        if (o->bwd_reads_x && i < last_read[sid[i]])
            last_read[sid[i]] = i;
        if (o->needs_output && i < last_read[sid[i + 1]])
            last_read[sid[i + 1]] = i;
    }
    last_read[sid[0]] = INT_MIN; /* the caller's */
    last_read[sid[L]] = INT_MIN;
}

/* Cuts the boundaries L..0 into chains, from the top: a chain runs down through every
 * layer whose backward writes dx over dy. Each is sized for its largest gradient and left
 * unplaced. Returns the number of chains (at most L + 1). */
static int plan_chains(const dt_layer *layers, int L, const size_t *need, chain *ch)
{
    int nch = 0;
    for (int k = L; k >= 0;) {
        chain *c = &ch[nch++];
        c->top = k;
        c->floats = need[k];
        int j = k;
        while (j > 0 && layers[j - 1].ops->bwd_in_place) {
            j--;
            if (need[j] > c->floats)
                c->floats = need[j];
        }
        c->bottom = j;
        c->hi = k;
        c->lo = j - 1;
        c->store = INT_MIN; /* unplaced */
        k = j - 1;
    }
    return nch;
}

/* order[]: the chains largest first (ties: higher first), by insertion sort: a few dozen
 * chains at most. */
static void plan_order(const chain *ch, int nch, int *order)
{
    for (int i = 0; i < nch; i++) {
        int v = i, p = i;
        while (p > 0 &&
               (ch[order[p - 1]].floats < ch[v].floats ||
                (ch[order[p - 1]].floats == ch[v].floats && ch[order[p - 1]].top < ch[v].top))) {
            order[p] = order[p - 1];
            p--;
        }
        order[p] = v;
    }
}

/* The smallest activation buffer that holds chain c and is free by the time c is written
 * (its last reader ran above c's top, or is c's producer writing dx over its own x), and
 * whose chains placed so far do not meet c; -1 when none. */
static int plan_pick_activation(const dt_layer *layers, int L, const int *sid, int nstore,
                                const size_t *cap, const int *last_read, const chain *ch, int nch,
                                const chain *c, int rows_apart)
{
    const int k = c->top;
    int best = -1;
    for (int s = 0; s < nstore; s++) {
        if (cap[s] < c->floats || last_read[s] == INT_MIN || (rows_apart && cap[s] != c->floats))
            continue;
        int free_then = k < last_read[s];
        if (!free_then && k == last_read[s] && k < L && layers[k].ops->bwd_dx_over_x &&
            s == sid[k] && s != sid[k + 1])
            free_then = 1; /* the producer writes dx over its own x, sample by sample */
        if (free_then && no_conflict(ch, nch, c, s) && (best < 0 || cap[s] < cap[best]))
            best = s;
    }
    return best;
}

/* Puts chain c in an extra buffer: the smallest whose chains do not meet c that holds it,
 * else the one that grows least, else a new one. *where is -1 - e for extra buffer e. */
static dt_status plan_pick_extra(dt_grad_plan *plan, const chain *ch, int nch, const chain *c,
                                 int rows_apart, int *where)
{
    int fit = -1, grow = -1;
    for (int e = 0; e < plan->nextra; e++) {
        if (!no_conflict(ch, nch, c, -1 - e) || (rows_apart && plan->extra_floats[e] != c->floats))
            continue;
        if (plan->extra_floats[e] >= c->floats) {
            if (fit < 0 || plan->extra_floats[e] < plan->extra_floats[fit])
                fit = e;
        } else if (grow < 0 || plan->extra_floats[e] > plan->extra_floats[grow]) {
            grow = e;
        }
    }
    int e = fit >= 0 ? fit : grow;
    if (e < 0) {
        if (plan->nextra == DT_GRAD_PLAN_MAX_EXTRA)
            return dt_fail(DT_ERR_INVALID, "model: more than %d gradient buffers needed",
                           DT_GRAD_PLAN_MAX_EXTRA);
        e = plan->nextra++;
        plan->extra_floats[e] = 0;
    }
    if (plan->extra_floats[e] < c->floats)
        plan->extra_floats[e] = c->floats;
    *where = -1 - e;
    return DT_OK;
}

dt_status dt_grad_plan_make(const dt_layer *layers, int nlayers, const int *sid, int nstore,
                            const size_t *cap, const size_t *need, int rows_apart,
                            dt_grad_plan *plan)
{
    DT_ASSERT(layers != NULL && nlayers >= 1 && sid != NULL && plan != NULL && nstore >= 1);
    dt_status st = DT_OK;
    const int L = nlayers;
    int *last_read = NULL, *order = NULL;
    chain *ch = NULL;
    DT_TRY(dt_alloc(sizeof(int) * (size_t)nstore, "gradient plan", (void **)&last_read));
    DT_TRY(dt_alloc(sizeof(chain) * (size_t)(L + 1), "gradient plan", (void **)&ch));
    DT_TRY(dt_alloc(sizeof(int) * (size_t)(L + 1), "gradient plan", (void **)&order));

    plan_last_reads(layers, L, sid, nstore, last_read);
    const int nch = plan_chains(layers, L, need, ch);
    plan_order(ch, nch, order);
    /* Largest first, each where it fits best; a placed chain keeps its place. */
    plan->nextra = 0;
    for (int oi = 0; oi < nch; oi++) {
        chain *c = &ch[order[oi]];
        int where =
            plan_pick_activation(layers, L, sid, nstore, cap, last_read, ch, nch, c, rows_apart);
        if (where < 0)
            DT_TRY(plan_pick_extra(plan, ch, nch, c, rows_apart, &where));
        c->store = where;
    }
    for (int i = 0; i < nch; i++)
        for (int b = ch[i].bottom; b <= ch[i].top; b++)
            plan->store[b] = ch[i].store;
fail:
    dt_free(last_read);
    dt_free(ch);
    dt_free(order);
    return st;
}
