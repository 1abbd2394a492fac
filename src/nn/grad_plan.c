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
 * same buffers must never touch each other's memory. A gradient in a buffer of the
 * planned rows shares it only with activations and gradients of the same size per
 * sample, so that its rows are exactly theirs: row r of a gradient of 2 floats per sample
 * would otherwise lie over rows 2r and 2r + 1 of an activation of 1, another
 * micro-batch's. Only the model's input and output gradients outlive one backward call
 * (the pipeline sends and receives them); when one call's rows are fewer than the planned
 * rows (split_rows), every other gradient goes to buffers of one call's rows at row 0.
 *
 * Recompute (gradient checkpointing, docs/PIPELINE.md): the layers are cut into segments
 * [ckpt[k], ckpt[k+1]); only each segment's first boundary, the input and the output
 * are kept from forward to backward, the boundaries inside a segment live in working
 * buffers shared by all segments. Backward takes the segments from the top; before
 * segment k's layers it re-runs their forward (all but the last layer, whose output is
 * kept) from boundary ckpt[k], which reads that buffer and refills the working ones. So:
 *   - a kept buffer is read once more, between time ckpt[k+1] and time ckpt[k+1] - 1;
 *   - a working buffer takes only a chain that lives inside one segment's backward, and
 *     only after that segment's own reads of it.
 *
 * Joins (a stage of several runs, model_runs.c): a join's input boundary is the run
 * below's output, its output boundary the run above's input. Their gradients are received
 * and sent between backward calls, with other micro-batches' calls and other runs'
 * in between, so each has an extra buffer of its own (the planned rows) that no other
 * chain shares, and the two activations are never used for gradients, like the model's
 * input and output. So has the input's gradient of a pipeline stage after the first
 * (own_input), which the stage sends while its next micro-batches run. */
#include <limits.h>
#include <string.h>

#include "nn/grad_plan.h"

typedef struct chain {
    int top, bottom; /* boundaries k >= j */
    int lo, hi;      /* live from time hi = k down to time lo = j - 1 */
    size_t floats;   /* per sample */
    int edge;        /* holds the model's input or output gradient: the planned rows */
    int joined;      /* holds a join's input or output gradient: a buffer of its own */
    int store;       /* as plan->store */
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

/* The segment holding layer i. */
static int segment_of(const dt_grad_plan_in *in, int i)
{
    int k = 0;
    while (k + 1 < in->nseg && in->ckpt[k + 1] <= i)
        k++;
    return k;
}

/* The earliest time a backward layer in [a, b) reads buffer s (INT_MAX: none). */
static int first_read(const dt_grad_plan_in *in, int s, int a, int b)
{
    int t = INT_MAX;
    for (int i = a; i < b; i++) {
        const dt_layer_ops *o = in->layers[i].ops;
        if (((o->bwd_reads_x && in->sid[i] == s) || (o->needs_output && in->sid[i + 1] == s)) &&
            i < t)
            t = i;
    }
    return t;
}

/* last_read[s] of a kept buffer: the earliest backward time at which it is still read
 * (INT_MAX: never; INT_MIN: the model's input or output, which are never used). A
 * segment's recompute reads its first boundary just before time ckpt[k+1] - 1. */
static void plan_last_reads(const dt_grad_plan_in *in, int *last_read)
{
    const int L = in->nlayers;
    for (int s = 0; s < in->nstore; s++)
        last_read[s] = first_read(in, s, 0, L);
    for (int k = 1; k < in->nseg; k++) {
        const int s = in->sid[in->ckpt[k]];
        if (in->ckpt[k + 1] - in->ckpt[k] >= 2 && in->ckpt[k + 1] < last_read[s])
            last_read[s] = in->ckpt[k + 1];
    }
    last_read[in->sid[0]] = INT_MIN; /* the caller's */
    last_read[in->sid[L]] = INT_MIN;
    for (int i = 0; in->join != NULL && i < L; i++)
        if (in->join[i]) { /* the pipeline's, as the model's input and output are */
            last_read[in->sid[i]] = INT_MIN;
            last_read[in->sid[i + 1]] = INT_MIN;
        }
}

/* Whether boundary b is a join's input or output. */
static int at_join(const dt_grad_plan_in *in, int b)
{
    return in->join != NULL && ((b < in->nlayers && in->join[b]) || (b > 0 && in->join[b - 1]));
}

/* Cuts the boundaries L..0 into chains, from the top: a chain runs down through every
 * layer whose backward writes dx over dy. Each is sized for its largest gradient and left
 * unplaced. Returns the number of chains (at most L + 1). */
static int plan_chains(const dt_grad_plan_in *in, chain *ch)
{
    const int L = in->nlayers;
    int nch = 0;
    for (int k = L; k >= 0;) {
        chain *c = &ch[nch++];
        c->top = k;
        c->floats = in->need[k];
        int j = k;
        /* A join's gradient is a chain of its own: the pipeline sends and receives it. */
        while (j > 0 && in->layers[j - 1].ops->bwd_in_place && !at_join(in, j) &&
               !at_join(in, j - 1)) {
            j--;
            if (in->need[j] > c->floats)
                c->floats = in->need[j];
        }
        c->bottom = j;
        c->hi = k;
        c->lo = j - 1;
        c->joined = at_join(in, k) || at_join(in, j) || (j == 0 && in->own_input);
        c->edge = k == L || j == 0 || c->joined;
        if (c->joined) { /* live throughout: it meets every other chain */
            c->lo = -1;
            c->hi = L + 1;
        }
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

/* Whether the producer of chain c (layer c->top) writes dx over its own x in buffer s,
 * sample by sample, when it is also that buffer's last reader. */
static int producer_over_x(const dt_grad_plan_in *in, const chain *c, int s)
{
    const int k = c->top;
    return k < in->nlayers && in->layers[k].ops->bwd_dx_over_x && s == in->sid[k] &&
           s != in->sid[k + 1];
}

/* Whether working buffer s is free for chain c: c lives inside one segment's backward
 * and is written after that segment's reads of s. */
static int working_free(const dt_grad_plan_in *in, const chain *c, int s)
{
    if (c->edge)
        return 0;
    const int k = segment_of(in, c->hi);
    const int a = in->ckpt[k], b = in->ckpt[k + 1];
    if (c->lo < a)
        return 0; /* read in the segment below, after its recompute refilled s */
    const int rd = first_read(in, s, a, b);
    return c->hi < rd || (c->hi == rd && producer_over_x(in, c, s));
}

/* The smallest activation buffer that holds chain c and is free by the time c is written
 * and whose chains placed so far do not meet c; -1 when none. */
static int plan_pick_activation(const dt_grad_plan_in *in, const int *last_read, const chain *ch,
                                int nch, const chain *c)
{
    int best = -1;
    if (c->joined)
        return -1;
    for (int s = 0; s < in->nstore; s++) {
        const size_t cap = in->cap[s];
        int free_then;
        if (in->working[s]) {
            free_then = cap >= c->floats && working_free(in, c, s);
        } else {
            if (cap < c->floats || last_read[s] == INT_MIN || (in->rows_apart && cap != c->floats))
                continue;
            free_then =
                c->top < last_read[s] || (c->top == last_read[s] && producer_over_x(in, c, s));
        }
        if (free_then && no_conflict(ch, nch, c, s) && (best < 0 || cap < in->cap[best]))
            best = s;
    }
    return best;
}

/* Puts chain c in an extra buffer of its kind (the planned rows for an edge chain, or for
 * every chain without split_rows; one call's rows otherwise): the smallest whose chains
 * do not meet c that holds it, else the one that grows least, else a new one. *where is
 * -1 - e for extra buffer e. */
static dt_status plan_pick_extra(const dt_grad_plan_in *in, dt_grad_plan *plan, const chain *ch,
                                 int nch, const chain *c, int *where)
{
    const int rowed = c->edge || !in->split_rows;
    const int same_size = rowed && in->rows_apart;
    int fit = -1, grow = -1;
    for (int e = 0; e < plan->nextra; e++) {
        if (plan->extra_rowed[e] != rowed || !no_conflict(ch, nch, c, -1 - e) ||
            (same_size && plan->extra_floats[e] != c->floats))
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
        plan->extra_rowed[e] = (unsigned char)rowed;
    }
    if (plan->extra_floats[e] < c->floats)
        plan->extra_floats[e] = c->floats;
    *where = -1 - e;
    return DT_OK;
}

dt_status dt_grad_plan_make(const dt_grad_plan_in *in, dt_grad_plan *plan)
{
    DT_ASSERT(in != NULL && in->layers != NULL && in->nlayers >= 1 && in->sid != NULL &&
              in->nstore >= 1 && in->nseg >= 1 && plan != NULL);
    dt_status st = DT_OK;
    const int L = in->nlayers;
    int *last_read = NULL, *order = NULL;
    chain *ch = NULL;
    DT_TRY(dt_alloc(sizeof(int) * (size_t)in->nstore, "gradient plan", (void **)&last_read));
    DT_TRY(dt_alloc(sizeof(chain) * (size_t)(L + 1), "gradient plan", (void **)&ch));
    DT_TRY(dt_alloc(sizeof(int) * (size_t)(L + 1), "gradient plan", (void **)&order));

    plan_last_reads(in, last_read);
    const int nch = plan_chains(in, ch);
    plan_order(ch, nch, order);
    /* Largest first, each where it fits best; a placed chain keeps its place. */
    plan->nextra = 0;
    for (int oi = 0; oi < nch; oi++) {
        chain *c = &ch[order[oi]];
        int where = plan_pick_activation(in, last_read, ch, nch, c);
        if (where < 0)
            DT_TRY(plan_pick_extra(in, plan, ch, nch, c, &where));
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

int dt_grad_plan_rowed(const dt_grad_plan_in *in, const dt_grad_plan *plan, int i)
{
    const int w = plan->store[i];
    return w >= 0 ? !in->working[w] : plan->extra_rowed[-1 - w];
}
