/* gpt_memory.c — a GPT's memory on one rank that holds the whole model: what the design
 * needs at least, from a formula over the config alone (docs/ARCHITECTURE.md, "A GPT's
 * memory"), and what the trainer planned, so that `dtrain train` and bench/bench_train.c
 * print the two side by side.
 *
 * The minimum is worked out here from V, E, T, each block's heads and dropout, the batch,
 * the threads and the optimizer, never from the sizes the model's planner or the layers'
 * plan functions chose (src/nn/model.c, block.c): a planner that keeps a buffer twice, or
 * sizes a workspace for every layer, then shows as a ratio above 1, where a sum of its own
 * fields would agree with it whatever it did. */
#include "dtrain/generate.h"
#include "tensor/tfm_kernels.h"
#include "train/trainer_internal.h"

/* Bytes of n one-bit flags per sample: a dropout mask. */
static double bits(double n)
{
    return (double)(((int64_t)n + 7) / 8);
}

dt_status dt_gpt_memory_minimum(const dt_config *cfg, int64_t batch, int threads,
                                dt_gpt_memory *out)
{
    DT_ASSERT(cfg != NULL && out != NULL);
    dt_gpt_form f;
    dt_status st = dt_gpt_form_of(cfg->layers, cfg->nlayers, &f);
    if (st != DT_OK)
        return st;
    if (cfg->block_size < 1)
        return dt_fail(DT_ERR_INVALID, "a GPT's memory: model.block_size is not set");
    if (batch < 1 || threads < 1)
        return dt_fail(DT_ERR_INVALID, "a GPT's memory: batch %lld and threads %d must be >= 1",
                       (long long)batch, threads);
    const double V = (double)f.vocab, E = (double)f.embd, T = (double)cfg->block_size,
                 B = (double)batch, TE = T * E, F = sizeof(float);
    /* Per sample: the ids (the embedding's backward reads them), the embeddings' sum x0 and
     * its dropout bits, then the final LayerNorm's mean and 1/std and its output (the head's
     * input), and the logits. */
    double params = V * E + TE + 2.0 * E, floats = T + TE + 2.0 * T + TE + T * V,
           mask = f.embd_pdrop > 0 ? bits(TE) : 0.0, tiles = 0.0;
    for (int b = f.first_block; b < f.first_block + f.nblocks; b++) {
        const dt_layer_spec *s = &cfg->layers[b];
        const double H = (double)s->heads, D = H > 0 ? E / H : 0.0;
        /* ln_1, c_attn (E, 3E), c_proj (E, E), ln_2, c_fc (E, 4E), c_proj (4E, E), biases */
        params += 12.0 * E * E + 13.0 * E;
        /* its output (the next one's input), q k v, the attention's output and its
         * log-sum-exp per (head, query), x1, c_fc's output before the GELU, both
         * LayerNorms' mean and 1/std, and a bit per element of each residual dropout */
        floats += TE + 3.0 * TE + TE + H * T + TE + 4.0 * TE + 4.0 * T;
        mask += s->p > 0 ? 2.0 * bits(TE) : 0.0;
        /* one thread's attention: two tiles of scores, a tile's product with V, the rows'
         * D_i and one head's k^T and v^T (tfm_kernels.h) */
        const double tile = (double)DT_ATTN_TILE;
        const double t = 2.0 * tile * tile + tile * D + T + 2.0 * T * D;
        if (t > tiles)
            tiles = t;
    }
    const int adam = cfg->optim.kind == DT_OPTIM_ADAM || cfg->optim.kind == DT_OPTIM_ADAMW;
    const double moments = adam ? 2.0 : (cfg->optim.momentum != 0.0 ? 1.0 : 0.0);
    *out = (dt_gpt_memory){
        .params = (int64_t)params,
        .weights_bytes = 2.0 * params * F,
        .optim_bytes = moments * params * F,
        .kept_bytes = B * (floats * F + mask),
        /* the head's input gradient, written while the logits' gradient and the head's
         * input are still read; every later one fits a buffer backward has finished with */
        .grad_bytes = B * TE * F,
        /* a block's backward rows (9 TE per sample), once for all blocks, and the
         * attention's tiles on each thread */
        .work_bytes = (9.0 * B * TE + (double)threads * tiles) * F,
    };
    out->total_bytes =
        out->weights_bytes + out->optim_bytes + out->kept_bytes + out->grad_bytes + out->work_bytes;
    return DT_OK;
}

size_t dt_trainer_params_held(const dt_trainer *t, size_t *window)
{
    /* the running layer's, and with a prefetch the next one's */
    *window = (size_t)dt_model_param_windows(t->model) * dt_model_window_count(t->model);
    if (!dt_model_has_windows(t->model))
        return dt_model_param_count(t->model);
    size_t lo = 0, n = 0;
    int sharded = 0;
    dt_strategy_optim_range(t->strategy, &lo, &n, &sharded);
    return n;
}

double dt_trainer_planned_bytes(const dt_trainer *t)
{
    size_t window = 0;
    const size_t held = dt_trainer_params_held(t, &window);
    /* the parameters' slice and windows, the gradients' slice and one window */
    return (double)dt_model_activation_bytes(t->model) +
           (2.0 * (double)held + (double)window + (double)dt_model_window_count(t->model)) *
               sizeof(float) +
           (double)dt_optim_state_bytes(t->optim);
}
