/* train_memory.c — the memory lines at the start of `dtrain train` (train_memory.h): each
 * rank's planned bytes, and a GPT's planned memory beside the design's minimum
 * (docs/ARCHITECTURE.md, "A GPT's memory"). */
#include <stdio.h>
#include <string.h>

#include "cli/train_memory.h"

void dt_cli_print_gpt_memory(const dt_config *cfg, dt_trainer *t)
{
    dt_train_layout lay;
    dt_trainer_layout(t, &lay);
    /* The design's minimum (gpt_memory.c) is that of a rank holding the whole model, its
     * whole optimizer state and every activation: no tp, pp, ZeRO or recompute (each rank's
     * own line, dt_cli_print_rank_memory, covers those layouts). */
    if (lay.tp > 1 || lay.pp > 1 || cfg->parallel.zero != 0 ||
        cfg->train.recompute != DT_RECOMPUTE_NONE)
        return;
    /* The rows of one call: the global batch over the replicas and micro-batches. */
    const int64_t parts = (int64_t)lay.dp * dt_config_micro_batches(cfg);
    const int64_t batch = (dt_trainer_global_batch(t) + parts - 1) / parts;
    const int threads = cfg->train.threads > 0 ? cfg->train.threads : 1;
    dt_gpt_memory min;
    if (dt_gpt_memory_minimum(cfg, batch, threads, &min) != DT_OK) {
        dt_error_clear(); /* not a GPT: nothing to say */
        return;
    }
    const double planned = dt_trainer_planned_bytes(t),
                 act = (double)dt_model_activation_bytes(dt_trainer_model(t));
    printf("dtrain: memory planned %.2f MB, the design's minimum %.2f MB (%.3fx): parameters "
           "and gradients %.2f MB, %s state %.2f MB, activations and workspaces %.2f MB "
           "planned and %.2f MB at least (docs/ARCHITECTURE.md, \"A GPT's memory\")\n",
           planned / 1e6, min.total_bytes / 1e6, planned / min.total_bytes, min.weights_bytes / 1e6,
           dt_optim_kind_name(cfg->optim.kind), min.optim_bytes / 1e6, act / 1e6,
           (min.kept_bytes + min.grad_bytes + min.work_bytes) / 1e6);
}

dt_status dt_cli_print_rank_memory(const dt_config *cfg, const dt_cli_world *w, dt_trainer *t)
{
    dt_train_layout lay;
    dt_trainer_layout(t, &lay);
    const dt_model *m = dt_trainer_model(t), *whole = NULL;
    const dt_status st = dt_trainer_whole_model(t, &whole); /* a pipeline's: its description */
    if (st != DT_OK)
        return st;
    /* The optimizer state this rank holds: the trainer's figure (ZeRO-1's shard, a ps
     * server's shard, or the whole). */
    dt_figure fig[DT_FIGURES_MAX];
    double optim_bytes = 0;
    const int nfig = dt_trainer_describe(t, fig, DT_FIGURES_MAX);
    for (int i = 0; i < nfig && i < DT_FIGURES_MAX; i++)
        if (fig[i].name != NULL && strcmp(fig[i].name, "optim_state_bytes") == 0)
            optim_bytes = fig[i].value;
    dt_model_memory mem;
    dt_model_memory_info(m, &mem);
    size_t window = 0;
    const size_t held = dt_trainer_params_held(t, &window);
    const double params = (double)(held + window) * sizeof(float),
                 grads = (double)(held + dt_model_window_count(m)) * sizeof(float),
                 act = (double)dt_model_activation_bytes(m);
    /* ZeRO-3: the rank's slice and the windows a layer passes through (its own, and the
     * next one's prefetch); the gradients: the slice and one */
    char whose[128];
    if (window > 0)
        snprintf(whose, sizeof whose, "a slice of %zu of the model's %zu, and %s of %zu", held,
                 dt_model_whole_param_count(whole),
                 dt_model_param_windows(m) == 2 ? "two windows" : "a window",
                 dt_model_window_count(m));
    else
        snprintf(whose, sizeof whose, "%zu of the model's %zu", held,
                 dt_model_whole_param_count(whole));
    char where[96] = "";
    if (w->size > 1 && lay.dp_rank < 0) /* a rank outside the data-parallel grid: ps's servers */
        snprintf(where, sizeof where, " (%s)", lay.role);
    else if (w->size > 1)
        snprintf(where, sizeof where, " (dp %d, tp %d, pp %d)", lay.dp_rank, lay.tp_rank,
                 lay.pp_rank);
    /* The blocks' per-position part only where the model has blocks (a GPT): what sequence
     * parallelism divides. */
    char seq[96] = "";
    if (mem.seq_bytes > 0)
        snprintf(seq, sizeof seq, ", of them the blocks' per-position %.2f MB",
                 (double)mem.seq_bytes / 1e6);
    /* "on rank N" only where there are ranks to tell apart */
    char who[128] = "";
    if (w->size > 1)
        snprintf(who, sizeof who, " on rank %d%s", w->rank, where);
    char line[DT_CLI_LINE_MAX];
    snprintf(line, sizeof line,
             "dtrain: memory planned%s: %.2f MB: parameters %.2f MB (%s), gradients %.2f MB, "
             "%s state %.2f MB, activations and workspaces %.2f MB (kept for backward %.2f "
             "MB%s)",
             who, dt_trainer_planned_bytes(t) / 1e6, params / 1e6, whose, grads / 1e6,
             dt_optim_kind_name(cfg->optim.kind), optim_bytes / 1e6, act / 1e6,
             (double)(mem.kept_bytes + mem.state_bytes) / 1e6, seq);
    return dt_cli_print_ranks(w, line);
}
