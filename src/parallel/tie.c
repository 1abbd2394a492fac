/* tie.c — the embedding group (Megatron-LM's): a GPT's token embedding and the head that
 * shares its table, on different pipeline stages. The head's stage holds a copy of the table
 * (src/nn/lm_head.c), which starts equal (drawn from the embedding's keys, or loaded under the
 * same name); every step the two gradients, each already reduced over its dp group, are summed
 * between the two stages, so both copies take the same update and stay bitwise equal (a sum
 * of two is the same bits in either order). Whole-model gathers and checkpoints take the
 * original only (dt_param_info.tie). Under round-robin or explicit splits the group is
 * whichever stages hold the embedding and the head; none when one stage holds both. */
#include "parallel/strategy_impl.h"

/* Whether this stage holds a tied table (the original or the copy). */
static int holds_tied(const dt_model *m)
{
    for (int i = 0; i < dt_model_tensor_count(m); i++)
        if (dt_model_tensor(m, i)->tie != DT_TIE_NONE)
            return 1;
    return 0;
}

dt_status dt_strategy_tie_group(dt_strategy *s)
{
    if (s->info.pp_size < 2 || s->tie_ready)
        return DT_OK;
    /* every stage of the pipeline, once: the members and the rest */
    const int member = holds_tied(s->model);
    dt_comm *c = NULL;
    dt_status st = dt_comm_split(dt_grid_comm(s->grid, DT_GRID_PP), member ? 0 : 1, s->info.pp_rank,
                                 "embedding group", &c);
    if (st != DT_OK)
        return st;
    if (member && dt_comm_size(c) > 1)
        s->tie_comm = c;
    else
        dt_comm_free(c);
    s->tie_ready = 1;
    return DT_OK;
}

dt_status dt_strategy_sum_tied(dt_strategy *s)
{
    if (s->tie_comm == NULL)
        return DT_OK;
    float *g = dt_model_grads(s->model);
    for (int i = 0; i < dt_model_tensor_count(s->model); i++) {
        const dt_param_info *p = dt_model_tensor(s->model, i);
        if (p->tie == DT_TIE_NONE)
            continue;
        dt_status st = dt_comm_allreduce(s->tie_comm, g + p->offset, g + p->offset, p->count,
                                         DT_COMM_FLOAT32, DT_COMM_SUM);
        if (st != DT_OK)
            return st;
    }
    return DT_OK;
}
