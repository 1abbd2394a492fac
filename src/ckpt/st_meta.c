/* st_meta.c — a dtrain weight file's metadata (st_meta.h): the one builder that --save-weights
 * (src/train/weights.c, src/train/trainer_weights.c) and `dtrain export`
 * (src/ckpt/ckpt_set.c) share, so that the files cannot drift apart. */
#include <stdio.h>

#include "ckpt/st_meta.h"

void dt_st_weights_meta_fill(dt_st_weights_meta *m, const dt_st_input *input)
{
    if (input->token_ids) { /* ids index the embedding's table: nothing scales them */
        const char *pairs[] = {DT_ST_META_BASE, "input", "token_ids"};
        m->npairs = (int)(sizeof pairs / sizeof pairs[0]) / 2;
        for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
            m->pairs[k] = pairs[k];
        return;
    }
    snprintf(m->mean, sizeof m->mean, "%.17g", input->mean);
    snprintf(m->std, sizeof m->std, "%.17g", input->std);
    const char *pairs[] = {DT_ST_META_BASE,
                           "input_mean",
                           m->mean,
                           "input_std",
                           m->std,
                           "input_scaling",
                           "(x/255 - input_mean)/input_std"};
    _Static_assert(sizeof pairs / sizeof pairs[0] == 2 * DT_ST_META_WEIGHTS_PAIRS,
                   "DT_ST_META_WEIGHTS_PAIRS counts the pairs");
    m->npairs = DT_ST_META_WEIGHTS_PAIRS;
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
        m->pairs[k] = pairs[k];
}

dt_status dt_st_write_weights(const char *path, const dt_st_tensor *tensors, int n,
                              const dt_st_input *input)
{
    dt_st_weights_meta m;
    dt_st_weights_meta_fill(&m, input);
    return dt_st_write(path, tensors, n, m.pairs, m.npairs);
}
