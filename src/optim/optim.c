/* optim.c — SGD, Adam and AdamW on flat ranges, with PyTorch 1.13's update order
 * (torch/optim/_functional sgd/adam/adamw, single-tensor path). See optim.h. */
#include <math.h>
#include <string.h>

#include "dtrain/optim.h"
#include "optim/optim_team.h"
#include "tensor/vmath.h"

struct dt_optim {
    dt_optim_config cfg;
    size_t count;
    int64_t t;
    int nbufs;
    float *buf[2]; /* SGD: momentum buffer; Adam: exp_avg, exp_avg_sq */
    /* dt_optim_set_decay's ranges in this optimizer's own indices [0, count), sorted; when
     * `grouped` is 0 every element decays. */
    int grouped, ndecay;
    dt_range *decay;
};

dt_status dt_optim_config_check(const dt_optim_config *c)
{
    if ((int)c->kind < 0 || c->kind >= DT_OPTIM_KIND_COUNT)
        return dt_fail(DT_ERR_INVALID, "optim: unknown kind %d", (int)c->kind);
    if ((int)c->decay < 0 || c->decay >= DT_DECAY_RULE_COUNT)
        return dt_fail(DT_ERR_INVALID, "optim.decay: unknown rule %d", (int)c->decay);
    if (!(c->clip_norm >= 0.0 && isfinite(c->clip_norm)))
        return dt_fail(DT_ERR_INVALID, "optim.clip_norm must be >= 0 and finite, got %g",
                       c->clip_norm);
    if (!(c->weight_decay >= 0.0))
        return dt_fail(DT_ERR_INVALID, "optim.weight_decay must be >= 0, got %g", c->weight_decay);
    if (c->kind == DT_OPTIM_SGD) {
        if (!(c->momentum >= 0.0))
            return dt_fail(DT_ERR_INVALID, "optim.momentum must be >= 0, got %g", c->momentum);
        if (c->nesterov && (c->momentum <= 0.0 || c->dampening != 0.0))
            return dt_fail(DT_ERR_INVALID,
                           "optim.nesterov requires optim.momentum > 0 and optim.dampening = 0");
        return DT_OK;
    }
    if (!(c->beta1 >= 0.0 && c->beta1 < 1.0) || !(c->beta2 >= 0.0 && c->beta2 < 1.0))
        return dt_fail(DT_ERR_INVALID, "optim.beta1 and optim.beta2 must be in [0, 1), got %g, %g",
                       c->beta1, c->beta2);
    if (!(c->eps >= 0.0))
        return dt_fail(DT_ERR_INVALID, "optim.eps must be >= 0, got %g", c->eps);
    return DT_OK;
}

dt_status dt_optim_create(const dt_optim_config *cfg, size_t count, dt_optim **out)
{
    DT_ASSERT(cfg != NULL && out != NULL);
    dt_status st = DT_OK;
    dt_optim *o = NULL;
    *out = NULL;
    DT_TRY(dt_optim_config_check(cfg));
    DT_TRY(dt_alloc(sizeof *o, "optimizer", (void **)&o));
    o->cfg = *cfg;
    o->count = count;
    o->nbufs = cfg->kind == DT_OPTIM_SGD ? (cfg->momentum != 0.0 ? 1 : 0) : 2;
    for (int i = 0; i < o->nbufs; i++)
        DT_TRY(dt_alloc(count * sizeof(float), "optimizer state", (void **)&o->buf[i]));
    *out = o;
    return DT_OK;
fail:
    dt_optim_free(o);
    return st;
}

void dt_optim_free(dt_optim *o)
{
    if (o == NULL)
        return;
    dt_free(o->buf[0]);
    dt_free(o->buf[1]);
    dt_free(o->decay);
    dt_free(o);
}

/* The update rules read each gradient as (float)(g * gs): gs is the clipping factor
 * (dt_clip_coef, 1 without clipping), rounded once to float as dt_clip_apply's scaled
 * gradient is, so scaling here gives the bits of scaling the buffer first and saves a pass
 * over it (with gs 1 the product is g itself). Compiled for the CPU that runs them
 * (DT_VEC_CLONES): IEEE division and square root round the same in every vector width, so
 * the bits do not depend on the clone. */
DT_VEC_CLONES
static void sgd_step(const dt_optim_config *c, double weight_decay, float *restrict p,
                     const float *restrict g, float *restrict buf, size_t n, float lr, int first,
                     double gs)
{
    const float wd = (float)weight_decay, mu = (float)c->momentum;
    const float damp = (float)(1.0 - c->dampening);
    for (size_t i = 0; i < n; i++) {
        float d = (float)((double)g[i] * gs);
        if (wd != 0.0f)
            d = d + wd * p[i];
        if (buf != NULL) {
            /* The buffer starts as d itself (no dampening on the first step). */
            buf[i] = first ? d : mu * buf[i] + damp * d;
            d = c->nesterov ? d + mu * buf[i] : buf[i];
        }
        p[i] = p[i] - lr * d;
    }
}

DT_VEC_CLONES
static void adam_step(const dt_optim_config *c, double weight_decay, float *restrict p,
                      const float *restrict g, float *restrict m, float *restrict v, size_t n,
                      double lr, int64_t t, int decoupled, double gs)
{
    /* Corrections in double: in float, 1 - 0.999 is off by 1.3e-5 relative (docs/NOTES.md). */
    const double bc1 = 1.0 - pow(c->beta1, (double)t);
    const double bc2 = 1.0 - pow(c->beta2, (double)t);
    const float step_size = (float)(lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
    const float omb1 = (float)(1.0 - c->beta1), omb2 = (float)(1.0 - c->beta2);
    const float wd = (float)weight_decay;
    const float decay = (float)(1.0 - lr * weight_decay);
    for (size_t i = 0; i < n; i++) {
        float gi = (float)((double)g[i] * gs);
        if (decoupled)
            p[i] = p[i] * decay;
        else if (wd != 0.0f)
            gi = gi + wd * p[i];
        m[i] = b1 * m[i] + omb1 * gi;
        v[i] = b2 * v[i] + omb2 * gi * gi;
        /* PyTorch: denom = sqrt(v) / sqrt(bc2) + eps; addcdiv computes p + (-step*m)/denom */
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] = p[i] + (-step_size * m[i]) / denom;
    }
}

/* The update of [lo, hi) with weight decay wd (the config's, or 0 outside the groups) and
 * the gradients scaled by gs. */
static void update_range(dt_optim *o, float *params, const float *grads, size_t lo, size_t hi,
                         double lr, double wd, double gs)
{
    if (lo >= hi)
        return;
    const int64_t t = o->t + 1; /* the step being taken */
    float *p = params + lo, *m = o->buf[0] != NULL ? o->buf[0] + lo : NULL; /* SGD, no momentum */
    const float *g = grads + lo;
    const size_t n = hi - lo;
    switch (o->cfg.kind) {
    case DT_OPTIM_SGD:
        sgd_step(&o->cfg, wd, p, g, m, n, (float)lr, t == 1, gs);
        break;
    case DT_OPTIM_ADAM:
        adam_step(&o->cfg, wd, p, g, m, o->buf[1] + lo, n, lr, t, 0, gs);
        break;
    case DT_OPTIM_ADAMW:
        adam_step(&o->cfg, wd, p, g, m, o->buf[1] + lo, n, lr, t, 1, gs);
        break;
    default:
        DT_ASSERT(0 && "unknown optimizer kind");
    }
}

static void step_part(dt_optim *o, float *params, const float *grads, size_t lo, size_t hi,
                      double lr, double gs)
{
    DT_ASSERT(o != NULL && lo <= hi && hi <= o->count);
    const double wd = o->cfg.weight_decay;
    if (!o->grouped || wd == 0.0) {
        update_range(o, params, grads, lo, hi, lr, wd, gs);
        return;
    }
    /* Alternate runs without and with decay: the gap before each decayed range, the
     * range, and what follows the last. The update is element-wise, so the pieces give
     * the bits of one call with per-element decay. */
    size_t at = lo;
    for (int r = 0; r < o->ndecay && at < hi; r++) {
        const size_t a = o->decay[r].offset, b = a + o->decay[r].count;
        if (b <= at)
            continue;
        const size_t start = a > at ? (a < hi ? a : hi) : at, end = b < hi ? b : hi;
        update_range(o, params, grads, at, start, lr, 0.0, gs);
        update_range(o, params, grads, start, end, lr, wd, gs);
        at = end;
    }
    update_range(o, params, grads, at, hi, lr, 0.0, gs);
}

void dt_optim_step_part(dt_optim *o, float *params, const float *grads, size_t lo, size_t hi,
                        double lr)
{
    step_part(o, params, grads, lo, hi, lr, 1.0);
}

dt_status dt_optim_set_decay(dt_optim *o, size_t base, const dt_range *ranges, int n)
{
    DT_ASSERT(o != NULL && n >= 0 && (n == 0 || ranges != NULL));
    dt_range *own = NULL;
    int kept = 0;
    for (int r = 1; r < n; r++)
        if (ranges[r].offset < ranges[r - 1].offset + ranges[r - 1].count)
            return dt_fail(DT_ERR_INVALID,
                           "optim: decay range %d (from %zu) begins before range %d ends (%zu)", r,
                           ranges[r].offset, r - 1, ranges[r - 1].offset + ranges[r - 1].count);
    if (n > 0) {
        dt_status st = dt_alloc(sizeof *own * (size_t)n, "decay ranges", (void **)&own);
        if (st != DT_OK)
            return st;
    }
    /* Each range's part inside [base, base + count), in the optimizer's own indices. */
    for (int r = 0; r < n; r++) {
        const size_t a = ranges[r].offset, b = a + ranges[r].count;
        const size_t lo = a > base ? a - base : 0;
        const size_t hi = b > base ? (b - base < o->count ? b - base : o->count) : 0;
        if (lo < hi)
            own[kept++] = (dt_range){lo, hi - lo};
    }
    dt_free(o->decay);
    o->decay = own;
    o->ndecay = kept;
    o->grouped = 1;
    return DT_OK;
}

size_t dt_optim_decayed_count(const dt_optim *o)
{
    if (!o->grouped)
        return o->count;
    size_t n = 0;
    for (int r = 0; r < o->ndecay; r++)
        n += o->decay[r].count;
    return n;
}

/* dt_grad_sumsq's loop, compiled for the CPU that runs it (a public function stays a plain
 * symbol: a clone would export an ifunc). */
DT_VEC_CLONES
static double sumsq16(const float *g, size_t n)
{
    /* Sixteen partial sums: two AVX-512 registers of doubles (eight SSE2 ones on plain
     * x86-64), enough independent additions to keep up with memory; double holds any
     * float's square. The order is fixed, so the bits do not depend on the CPU. */
    enum { W = 16 };
    double s[W] = {0};
    size_t i = 0;
    for (; i + W <= n; i += W)
        for (int k = 0; k < W; k++)
            s[k] += (double)g[i + k] * (double)g[i + k];
    for (; i < n; i++)
        s[0] += (double)g[i] * (double)g[i];
    for (int w = W / 2; w > 0; w /= 2)
        for (int k = 0; k < w; k++)
            s[k] += s[k + w];
    return s[0];
}

double dt_grad_sumsq(const float *g, size_t n)
{
    return sumsq16(g, n);
}

double dt_clip_coef(double sumsq, double max_norm)
{
    const double total = sqrt(sumsq);
    const double coef = max_norm / (total + 1e-6);
    return isfinite(total) && coef < 1.0 ? coef : 1.0;
}

double dt_clip_apply(float *g, size_t n, double sumsq, double max_norm)
{
    const double coef = dt_clip_coef(sumsq, max_norm);
    if (coef < 1.0)
        for (size_t i = 0; i < n; i++)
            g[i] = (float)((double)g[i] * coef);
    return sqrt(sumsq);
}

void dt_optim_count_step(dt_optim *o)
{
    o->t++;
}

void dt_optim_step(dt_optim *o, float *params, const float *grads, size_t count, double lr)
{
    DT_ASSERT(o != NULL && count == o->count);
    dt_optim_step_part(o, params, grads, 0, count, lr);
    dt_optim_count_step(o);
}

int64_t dt_optim_steps(const dt_optim *o)
{
    return o->t;
}
void dt_optim_set_steps(dt_optim *o, int64_t t)
{
    o->t = t;
}

int dt_optim_state_buffers(dt_optim *o, float **bufs, int max)
{
    for (int i = 0; i < o->nbufs && i < max; i++)
        bufs[i] = o->buf[i];
    return o->nbufs;
}

const char *dt_optim_state_name(const dt_optim *o, int b)
{
    if (b < 0 || b >= o->nbufs)
        return NULL;
    if (o->cfg.kind == DT_OPTIM_SGD)
        return "momentum_buffer";
    return b == 0 ? "exp_avg" : "exp_avg_sq";
}

size_t dt_optim_state_bytes(const dt_optim *o)
{
    return (size_t)o->nbufs * o->count * sizeof(float);
}

#define DT_OPTIM_PAR_MIN 16384

typedef struct optim_job {
    dt_optim *o;
    float *params;
    const float *grads;
    size_t count;
    double lr, gs;
} optim_job;

static void step_member(void *ctx, int t, int n)
{
    const optim_job *j = ctx;
    int64_t lo, hi; /* in 16-float lines, so that no two members share a cache line */
    dt_pool_share((int64_t)((j->count + 15) / 16), t, n, &lo, &hi);
    size_t a = (size_t)lo * 16, b = (size_t)hi * 16 < j->count ? (size_t)hi * 16 : j->count;
    if (a < b)
        step_part(j->o, j->params, j->grads, a, b, j->lr, j->gs);
}

void dt_optim_step_team(dt_optim *o, float *params, const float *grads, size_t count, double lr,
                        double grad_scale, dt_pool *team)
{
    DT_ASSERT(o != NULL && count == o->count);
    /* Adam's update is 3 divisions or roots per element: worth a team from a few 10,000s
     * (the MLP's 101,770 parameters took a quarter of its step on one thread). */
    optim_job j = {
        .o = o, .params = params, .grads = grads, .count = count, .lr = lr, .gs = grad_scale};
    dt_pool_run(count >= DT_OPTIM_PAR_MIN ? team : NULL, step_member, &j);
    dt_optim_count_step(o);
}
