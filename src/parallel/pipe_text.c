/* pipe_text.c — a pipeline stage's order of ops as text and back (pipe_plan.h), so that
 * --explain-layout can print what each stage runs and tests can write expected orders as
 * they read. The notation (docs/PIPELINE.md) is PyTorch's: "<v>F<j>" is the forward of
 * micro-batch j on virtual stage v, "<v>B<j>" its backward, ops separated by one space:
 * "0F0 0F1 0B0 0F2 0B1 0B2". Only one spelling of an order is accepted (decimal numbers
 * without leading zeros, one space between ops, none around them), so parsing and
 * formatting again gives back the same text. */
#include <limits.h>
#include <stdio.h>

#include "parallel/pipe_plan.h"

dt_status dt_pipe_order_format(const dt_pipe_op *ops, int nops, char *buf, size_t len)
{
    DT_ASSERT((ops != NULL || nops == 0) && nops >= 0 && buf != NULL && len > 0);
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < nops; i++) {
        const int n = snprintf(buf + o, len - o, i ? " %d%c%d" : "%d%c%d", ops[i].vs,
                               ops[i].backward ? 'B' : 'F', ops[i].micro);
        if (n < 0 || (size_t)n >= len - o) {
            buf[o] = '\0';
            return dt_fail(DT_ERR_INVALID,
                           "pipeline order: %d ops do not fit in %zu bytes (op %d does not)", nops,
                           len, i);
        }
        o += (size_t)n;
    }
    return DT_OK;
}

/* A number at text[*at] (no sign, no leading zero) into *v; 0 when there is none. */
static int number(const char *text, size_t *at, int *v)
{
    size_t i = *at;
    long n = 0;
    if (text[i] < '0' || text[i] > '9')
        return 0;
    if (text[i] == '0' && text[i + 1] >= '0' && text[i + 1] <= '9')
        return 0;
    for (; text[i] >= '0' && text[i] <= '9'; i++) {
        n = 10 * n + (text[i] - '0');
        if (n > INT_MAX)
            return 0;
    }
    *v = (int)n;
    *at = i;
    return 1;
}

/* The character at text[i], printable, for a message. */
static const char *shown(const char *text, size_t i, char *buf)
{
    if (text[i] == '\0')
        return "the end";
    if (text[i] >= ' ' && text[i] < 127)
        snprintf(buf, 16, "'%c'", text[i]);
    else
        snprintf(buf, 16, "byte %d", (unsigned char)text[i]);
    return buf;
}

dt_status dt_pipe_order_parse(const char *text, dt_pipe_op *ops, int cap, int *nops)
{
    DT_ASSERT(text != NULL && (ops != NULL || cap == 0) && cap >= 0 && nops != NULL);
    size_t at = 0;
    char c[16];
    *nops = 0;
    if (text[0] == '\0')
        return DT_OK;
    for (;;) {
        dt_pipe_op op;
        const size_t start = at;
        if (!number(text, &at, &op.vs))
            return dt_fail(DT_ERR_INVALID,
                           "pipeline order: at character %zu of \"%s\": expected a virtual stage "
                           "(a number without leading zeros), got %s",
                           at + 1, text, shown(text, at, c));
        if (text[at] != 'F' && text[at] != 'B')
            return dt_fail(DT_ERR_INVALID,
                           "pipeline order: at character %zu of \"%s\": expected F or B, got %s",
                           at + 1, text, shown(text, at, c));
        op.backward = text[at++] == 'B';
        if (!number(text, &at, &op.micro))
            return dt_fail(DT_ERR_INVALID,
                           "pipeline order: at character %zu of \"%s\": expected a micro-batch "
                           "(a number without leading zeros), got %s",
                           at + 1, text, shown(text, at, c));
        if (*nops == cap)
            return dt_fail(DT_ERR_INVALID,
                           "pipeline order: at character %zu of \"%s\": more than %d ops",
                           start + 1, text, cap);
        ops[(*nops)++] = op;
        if (text[at] == '\0')
            return DT_OK;
        if (text[at] != ' ' || text[at + 1] == '\0')
            return dt_fail(DT_ERR_INVALID,
                           "pipeline order: at character %zu of \"%s\": expected one space and "
                           "the next op, got %s",
                           at + 1, text,
                           text[at] == ' ' ? "a space at the end" : shown(text, at, c));
        at++;
    }
}

dt_status dt_pp_order_text(const int *stage_of, int nlayers, int stages, int micro,
                           dt_pp_schedule sched, int stage, char *buf, size_t len)
{
    DT_ASSERT(stage_of != NULL && nlayers >= 1 && stages >= 1 && buf != NULL && len > 0);
    if (micro < 1 || stage < 0 || stage >= stages)
        return dt_fail(DT_ERR_INVALID, "pipeline order: stage %d of %d, %d micro-batches", stage,
                       stages, micro);
    dt_status st = DT_OK;
    int *owner = NULL, nv = 0, nops = 0, slots, depth;
    dt_pipe_op *ops = NULL;
    DT_TRY(dt_alloc(sizeof(int) * (size_t)nlayers, "pipeline order", (void **)&owner));
    /* The virtual stages: the runs of consecutive layers on one stage, as dt_pipe_place. */
    for (int i = 0; i < nlayers; i++)
        if (i == 0 || stage_of[i] != stage_of[i - 1])
            owner[nv++] = stage_of[i];
    DT_TRY(dt_alloc(sizeof *ops * 2 * (size_t)micro * (size_t)nv, "pipeline order", (void **)&ops));
    /* pipe.c's make_plan plans with the same requests and window: the same order. */
    const dt_pipe_layout l = {.stages = stages,
                              .nv = nv,
                              .owner = owner,
                              .micro = micro,
                              .sched = sched,
                              .max_requests = DT_COMM_MAX_PENDING,
                              .window = DT_PIPE_WINDOW};
    DT_TRY(dt_pipe_plan(&l, stage, ops, &nops, &slots, &depth));
    DT_TRY(dt_pipe_order_format(ops, nops, buf, len));
fail:
    dt_free(owner);
    dt_free(ops);
    return st;
}
