/* lm_head.c — GPT-2's language-model head: logits (T, V) = x (T, E) @ wte^T, the transpose
 * of the model's token embedding table wte (V, E), with no bias and no tensor of its own
 * (Hugging Face's tie_word_embeddings). The model points w and dw at the embedding's table
 * and its gradient (model.c, bind_ties), so backward adds the head's share of the table's
 * gradient to the embedding's in place: the gradient of the tied tensor is the sum of both
 * uses, the head's first (backward runs top down), as autograd sums them.
 *
 * The products are linear.c's with W = wte as (out, in): the layer runs linear's forward
 * and backward on itself (no bias: b and db stay NULL).
 *
 * On a pipeline stage without the embedding the head holds a copy of the table, a tensor of
 * its own under the embedding's name (dt_param_info.tie, DT_TIE_COPY), drawn from the
 * embedding's keys so that it starts equal; the strategy sums the two gradients every step
 * (Megatron-LM's embedding group), so the copies stay equal. */
#include "nn/layer_internal.h"

static dt_status lm_head_plan(dt_layer *l)
{
    /* vocab and out_features (E) come from the tied embedding (model_tp.c). */
    if (l->in.ndim < 1 || l->in.ndim > 2 || l->in.d[l->in.ndim - 1] != l->spec.out_features)
        return dt_fail(DT_ERR_INVALID,
                       "layer %d (lm_head): input must be (positions, %lld) or (%lld), the width "
                       "of the embedding it shares (layer %d)",
                       l->index, (long long)l->spec.out_features, (long long)l->spec.out_features,
                       l->tie);
    l->out = l->in;
    l->out.d[l->in.ndim - 1] = l->spec.vocab;
    l->weight_count = 0;
    l->bias_count = 0;
    return DT_OK;
}

/* Only a copy across stages has a tensor: the table's shape (V, E). */
static int lm_head_weight_shape(const dt_layer *l, int64_t shape[DT_MAX_DIMS])
{
    shape[0] = l->spec.vocab;
    shape[1] = l->spec.out_features;
    return 2;
}

static int64_t lm_head_fan_in(const dt_layer *l)
{
    return l->spec.out_features;
}

static void lm_head_forward(dt_layer *l, const float *x, float *y, int64_t batch,
                            const dt_forward_ctx *ctx)
{
    dt_linear_ops.forward(l, x, y, batch, ctx);
}

static dt_status lm_head_backward(dt_layer *l, const float *x, const float *y, const float *dy,
                                  float *dx, int64_t batch, const dt_backward_hooks *hooks)
{
    return dt_linear_ops.backward(l, x, y, dy, dx, batch, hooks);
}

const dt_layer_ops dt_lm_head_ops = {
    .kind = DT_LAYER_LM_HEAD,
    .bwd_reads_x = 1,
    .bwd_dx_over_x = 1,
    .init = DT_INIT_NORMAL,
    .plan = lm_head_plan,
    .weight_shape = lm_head_weight_shape,
    .fan_in = lm_head_fan_in,
    .forward = lm_head_forward,
    .backward = lm_head_backward,
};
