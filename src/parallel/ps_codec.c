/* ps_codec.c — how a ps worker's push carries its gradient shard under parallel.compress
 * (docs/COMPRESSION.md): float32 as it is; fp16 / bf16 cast (no error feedback, as ddp);
 * topk:R as the shard's ceil(R n) largest entries of gradient + residual, (indices, values),
 * the residual keeping the rest. The server decodes every push to a dense shard before it
 * sums or applies it. */
#include <string.h>

#include "core/half.h"
#include "parallel/compress.h"
#include "parallel/ps.h"

size_t dt_ps_payload_bytes(const dt_compress_options *o, size_t cnt)
{
    switch (o->kind) {
    case DT_COMPRESS_FP16:
    case DT_COMPRESS_BF16:
        return cnt * sizeof(uint16_t);
    case DT_COMPRESS_TOPK:
        return cnt > 0 ? dt_topk_count(cnt, o->ratio) * (sizeof(uint32_t) + sizeof(float)) : 0;
    default:
        return cnt * sizeof(float);
    }
}

void dt_ps_encode(const dt_compress_options *o, const float *g, float *e, size_t cnt, uint8_t *out,
                  uint32_t *scratch)
{
    if (o->kind == DT_COMPRESS_FP16) {
        dt_f32_to_f16_n(g, (uint16_t *)(void *)out, cnt);
    } else if (o->kind == DT_COMPRESS_BF16) {
        dt_f32_to_bf16_n(g, (uint16_t *)(void *)out, cnt);
    } else if (o->kind == DT_COMPRESS_TOPK) {
        if (cnt == 0)
            return;
        const size_t k = dt_topk_count(cnt, o->ratio);
        uint32_t *idx = (uint32_t *)(void *)out;
        float *val = (float *)(void *)(out + k * sizeof(uint32_t));
        if (e != NULL)
            dt_topk_feedback(g, e, cnt, k, idx, val, scratch);
        else
            dt_topk_select(g, cnt, k, idx, val, scratch);
    } else {
        memcpy(out, g, cnt * sizeof(float));
    }
}

void dt_ps_decode(const dt_compress_options *o, const uint8_t *in, size_t cnt, float *dense)
{
    if (o->kind == DT_COMPRESS_FP16) {
        dt_f16_to_f32_n((const uint16_t *)(const void *)in, dense, cnt);
    } else if (o->kind == DT_COMPRESS_BF16) {
        dt_bf16_to_f32_n((const uint16_t *)(const void *)in, dense, cnt);
    } else if (o->kind == DT_COMPRESS_TOPK) {
        memset(dense, 0, cnt * sizeof(float));
        if (cnt == 0)
            return;
        const size_t k = dt_topk_count(cnt, o->ratio);
        dt_sparse_add(dense, (const uint32_t *)(const void *)in,
                      (const float *)(const void *)(in + k * sizeof(uint32_t)), k);
    } else {
        memcpy(dense, in, cnt * sizeof(float));
    }
}
