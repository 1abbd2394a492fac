/* decay.c — which of a model's tensors weight decay applies to (optim.decay): every one, or
 * those of two or more dimensions (weights, conv kernels, embeddings; not biases nor
 * LayerNorm gains), as nanoGPT and Megatron-LM group a transformer's parameters. The rule
 * becomes ranges of the flat buffer once, when the run is set up (optim.c applies them). */
#include "dtrain/optim.h"

dt_decay_rule dt_decay_rule_resolve(dt_decay_rule rule, const dt_layer_spec *specs, int nlayers)
{
    if (rule != DT_DECAY_AUTO)
        return rule;
    for (int i = 0; i < nlayers; i++)
        if (specs[i].kind == DT_LAYER_EMBEDDING)
            return DT_DECAY_MATRICES;
    return DT_DECAY_ALL;
}

dt_status dt_optim_decay_model(dt_optim *o, size_t base, const dt_model *m, dt_decay_rule rule)
{
    DT_ASSERT(o != NULL && m != NULL && rule != DT_DECAY_AUTO);
    if (rule == DT_DECAY_ALL)
        return DT_OK;
    const int nt = dt_model_tensor_count(m);
    dt_range *r = NULL;
    int n = 0;
    if (nt > 0) {
        dt_status st = dt_alloc(sizeof *r * (size_t)nt, "decay ranges", (void **)&r);
        if (st != DT_OK)
            return st;
    }
    /* Tensors lie in the flat buffer in order; neighbours that both decay merge. */
    for (int k = 0; k < nt; k++) {
        const dt_param_info *t = dt_model_tensor(m, k);
        if (t->ndim < 2 || t->count == 0)
            continue;
        if (n > 0 && r[n - 1].offset + r[n - 1].count == t->offset)
            r[n - 1].count += t->count;
        else
            r[n++] = (dt_range){t->offset, t->count};
    }
    dt_status st = dt_optim_set_decay(o, base, r, n);
    dt_free(r);
    return st;
}
