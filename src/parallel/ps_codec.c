/* ps_codec.c — how a ps worker's push carries its gradient shard under parallel.compress
 * (docs/COMPRESSION.md): fp16 / bf16 cast (no error feedback, as ddp);
 * topk:R as the shard's ceil(R n) largest entries of gradient + residual, (indices, values),
 * the residual keeping the rest; powersgd:K as each worker's own low-rank factors
 * (ps_psgd.c). The server decodes every push to a dense shard before it sums or applies
 * it. A float32 push (none, or a step of parallel.compress_warmup) is copied as it is,
 * flagged, by ps.c and ps_server.c. */
#include <string.h>

#include "core/half.h"
#include "parallel/compress.h"
#include "parallel/ps.h"
#include "parallel/ps_psgd.h"

size_t dt_ps_payload_bytes(const dt_ps *ps, int s)
{
    const dt_compress_options *o = &ps->base.opt.compress;
    const size_t cnt = ps->shard_cnt[s];
    switch (o->kind) {
    case DT_COMPRESS_FP16:
    case DT_COMPRESS_BF16:
        return cnt * sizeof(uint16_t);
    case DT_COMPRESS_TOPK:
        return cnt > 0 ? dt_topk_count(cnt, o->ratio) * (sizeof(uint32_t) + sizeof(float)) : 0;
    case DT_COMPRESS_POWERSGD:
        return dt_ps_psgd_bytes(ps->psgd, s);
    default:
        return cnt * sizeof(float);
    }
}

void dt_ps_encode(dt_ps *ps, int s, const float *grads, uint8_t *out)
{
    const dt_compress_options *o = &ps->base.opt.compress;
    const size_t off = ps->shard_off[s], cnt = ps->shard_cnt[s];
    const float *g = grads + off;
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
        if (ps->resid != NULL)
            dt_topk_feedback(g, ps->resid + off, cnt, k, idx, val, ps->scratch);
        else
            dt_topk_select(g, cnt, k, idx, val, ps->scratch);
    } else {
        /* float32 pushes (none, or a warm-up step) go as they are, flagged: ps.c */
        DT_ASSERT(o->kind == DT_COMPRESS_POWERSGD);
        dt_ps_psgd_write(ps->psgd, s, grads, out);
    }
}

void dt_ps_decode(dt_ps *ps, const uint8_t *in, float *dense)
{
    const dt_compress_options *o = &ps->base.opt.compress;
    const size_t cnt = ps->shard_cnt[ps->server];
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
        DT_ASSERT(o->kind == DT_COMPRESS_POWERSGD); /* float32: ps_server.c copies it */
        dt_ps_psgd_read(ps->psgd, ps->server, ps->shard_off[ps->server], in, dense);
    }
}
