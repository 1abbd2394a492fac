/* st_meta.c — a dtrain weight file's metadata (st_meta.h): the one builder that --save-weights
 * (src/train/weights.c) and `dtrain export` (src/ckpt/ckpt_set.c) share, so that the two
 * files cannot drift apart. */
#include <stdio.h>

#include "ckpt/st_meta.h"

dt_status dt_st_write_weights(const char *path, const dt_st_tensor *tensors, int n,
                              double input_mean, double input_std)
{
    char mean[32], std[32];
    snprintf(mean, sizeof mean, "%.17g", input_mean);
    snprintf(std, sizeof std, "%.17g", input_std);
    const char *meta[] = {DT_ST_META_BASE,
                          "input_mean",
                          mean,
                          "input_std",
                          std,
                          "input_scaling",
                          "(x/255 - input_mean)/input_std"};
    return dt_st_write(path, tensors, n, meta, (int)(sizeof meta / sizeof meta[0]) / 2);
}
