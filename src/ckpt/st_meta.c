/* st_meta.c — a dtrain weight file's metadata (st_meta.h): the one builder that --save-weights
 * (src/train/weights.c) and `dtrain export` (src/ckpt/ckpt_set.c) share, so that the two
 * files cannot drift apart. */
#include <stdio.h>

#include "ckpt/st_meta.h"

dt_status dt_st_write_weights(const char *path, const dt_st_tensor *tensors, int n,
                              const dt_st_input *input)
{
    if (input->token_ids) { /* ids index the embedding's table: nothing scales them */
        const char *meta[] = {DT_ST_META_BASE, "input", "token_ids"};
        return dt_st_write(path, tensors, n, meta, (int)(sizeof meta / sizeof meta[0]) / 2);
    }
    char mean[32], std[32];
    snprintf(mean, sizeof mean, "%.17g", input->mean);
    snprintf(std, sizeof std, "%.17g", input->std);
    const char *meta[] = {DT_ST_META_BASE,
                          "input_mean",
                          mean,
                          "input_std",
                          std,
                          "input_scaling",
                          "(x/255 - input_mean)/input_std"};
    return dt_st_write(path, tensors, n, meta, (int)(sizeof meta / sizeof meta[0]) / 2);
}
