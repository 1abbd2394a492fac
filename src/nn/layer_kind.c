/* layer_kind.c — the layer kinds' names (the words a config uses), PyTorch's default
 * layer arguments. One name table serves both
 * directions so that a kind's name cannot differ between parsing and printing. */
#include <stdio.h>
#include <string.h>

#include "core/names.h"
#include "dtrain/nn.h"

static const char *const layer_names[DT_LAYER_KIND_COUNT] = {
    [DT_LAYER_LINEAR] = "linear",
    [DT_LAYER_CONV2D] = "conv2d",
    [DT_LAYER_MAXPOOL2D] = "maxpool2d",
    [DT_LAYER_RELU] = "relu",
    [DT_LAYER_DROPOUT] = "dropout",
    [DT_LAYER_FLATTEN] = "flatten",
    [DT_LAYER_LOG_SOFTMAX] = "log_softmax",
    [DT_LAYER_LAYERNORM] = "layernorm",
    [DT_LAYER_GELU] = "gelu",
    [DT_LAYER_EMBEDDING] = "embedding",
    [DT_LAYER_POSITION] = "position",
    [DT_LAYER_CAUSAL_ATTENTION] = "causal_attention",
    [DT_LAYER_BLOCK] = "block",
    [DT_LAYER_LM_HEAD] = "lm_head",
};

dt_layer_spec dt_layer_spec_default(dt_layer_kind kind)
{
    DT_ASSERT((int)kind >= 0 && kind < DT_LAYER_KIND_COUNT);
    dt_layer_spec s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    /* torch.nn.Conv2d: stride 1, padding 0, bias on. torch.nn.MaxPool2d: stride None,
     * which means the kernel size (0 here). torch.nn.Dropout: p 0.5. Attention dropout is
     * off unless asked for (p 0), and so are a block's (p and attn_p 0); the other kinds keep 0.5
     * in p, unused, so that the existing models' signatures (dt_model_signature hashes p) do not
     * change. */
    s.stride = kind == DT_LAYER_MAXPOOL2D ? 0 : 1;
    s.padding = 0;
    s.bias = 1;
    s.p = kind == DT_LAYER_CAUSAL_ATTENTION || kind == DT_LAYER_BLOCK ? 0.0 : 0.5;
    return s;
}

const char *dt_layer_kind_name(dt_layer_kind kind)
{
    if ((int)kind < 0 || kind >= DT_LAYER_KIND_COUNT)
        return "unknown";
    return layer_names[kind];
}

dt_status dt_layer_kind_parse(const char *name, dt_layer_kind *out)
{
    DT_ASSERT(name != NULL && out != NULL);
    int k = 0;
    dt_status st = dt_name_parse(layer_names, DT_LAYER_KIND_COUNT, name, "layer kind", &k);
    if (st == DT_OK)
        *out = (dt_layer_kind)k;
    return st;
}
