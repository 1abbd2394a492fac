/* comm_test_util.c — see comm_test_util.h. */
#include "comm_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t draw(uint64_t seed, int member, size_t i)
{
    return mix(seed * 0x100000001b3ull ^ ((uint64_t)(member + 1) << 40) ^ (uint64_t)i);
}

int ct_is_half(dt_comm_dtype t)
{
    return t == DT_COMM_FLOAT16 || t == DT_COMM_BFLOAT16;
}

/* Mantissa bits and exponent bias: float16 (10, 15), bfloat16 (7, 127); the exponent
 * field is the other 15 - mbits bits below the sign. */
static void half_format(dt_comm_dtype t, int *mbits, int *bias)
{
    *mbits = t == DT_COMM_FLOAT16 ? 10 : 7;
    *bias = t == DT_COMM_FLOAT16 ? 15 : 127;
}

double ct_half_value(dt_comm_dtype t, uint16_t h)
{
    int mb, bias;
    half_format(t, &mb, &bias);
    int e = (h & 0x7FFF) >> mb, m = h & ((1 << mb) - 1), emax = 0x7FFF >> mb;
    double v = e == emax ? (m ? NAN : INFINITY)
               : e == 0  ? ldexp(m, 1 - bias - mb)
                         : ldexp(m + (1 << mb), e - bias - mb);
    return h & 0x8000 ? -v : v;
}

uint16_t ct_half_round(dt_comm_dtype t, double x)
{
    int mb, bias;
    half_format(t, &mb, &bias);
    int emax = 0x7FFF >> mb;
    uint16_t sign = signbit(x) ? 0x8000 : 0, inf = (uint16_t)(emax << mb);
    double a = fabs(x);
    if (isnan(x))
        return sign | inf | (uint16_t)(1 << (mb - 1)); /* a quiet NaN */
    if (a == 0 || isinf(a))
        return sign | (a == 0 ? 0 : inf);
    int e2;
    frexp(a, &e2);                             /* a in [2^(e2-1), 2^e2) */
    int q = e2 - 1 - mb, qmin = 1 - bias - mb; /* the unit in the last place: 2^q */
    q = q < qmin ? qmin : q;
    double k = nearbyint(ldexp(a, -q)); /* ties to even in the default mode */
    if (k < ldexp(1, mb))               /* subnormal (only where q == qmin) */
        return sign | (uint16_t)k;
    if (k == ldexp(1, mb + 1)) { /* rounded up into the next binade */
        k /= 2;
        q++;
    }
    int be = q + mb + bias;
    if (be >= emax)
        return sign | inf;
    return sign | (uint16_t)((be << mb) | ((int)k - (1 << mb)));
}

double ct_half_unit(dt_comm_dtype t)
{
    return ldexp(1, t == DT_COMM_FLOAT16 ? -11 : -8);
}

double ct_half_tiny(dt_comm_dtype t)
{
    return ldexp(1, t == DT_COMM_FLOAT16 ? -25 : -134);
}

/* EXACT 16-bit data: small times 2^e, e drawn per element (member -1: the same for every
 * member) over [-24, 10] for float16 and [-133, 120] for bfloat16, so that a sum of 5
 * members (|sum| <= 40, 6 significant bits) is exact down to the subnormals. */
static double exact_half(dt_comm_dtype t, int small, uint64_t seed, size_t i)
{
    int lo = t == DT_COMM_FLOAT16 ? -24 : -133, hi = t == DT_COMM_FLOAT16 ? 10 : 120;
    return ldexp(small, lo + (int)(draw(seed, -1, i) % (uint64_t)(hi - lo + 1)));
}

void ct_fill(dt_comm_dtype t, void *buf, size_t n, int member, uint64_t seed, int kind)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t h = draw(seed, member, i);
        int small = (int)(h % 17) - 8;
        double u = (double)(h >> 11) * 0x1.0p-53 * 2.0 - 1.0;
        if (kind == CT_SPECIAL) /* RANDOM, about 1 in 8 a NaN, +inf or -inf (floats only) */
            u = h % 24 == 0 ? NAN : h % 24 == 1 ? INFINITY : h % 24 == 2 ? -INFINITY : u;
        switch (t) {
        case DT_COMM_FLOAT32:
            ((float *)buf)[i] = kind == CT_EXACT ? (float)small : (float)u;
            break;
        case DT_COMM_FLOAT64:
            ((double *)buf)[i] = kind == CT_EXACT ? small : u;
            break;
        case DT_COMM_INT32:
            ((int32_t *)buf)[i] = kind == CT_EXACT ? small : (int32_t)(uint32_t)h;
            break;
        case DT_COMM_INT64:
            ((int64_t *)buf)[i] = kind == CT_EXACT ? small : (int64_t)h;
            break;
        case DT_COMM_UINT8:
            ((uint8_t *)buf)[i] = (uint8_t)(kind == CT_EXACT ? h % 9 : h);
            break;
        case DT_COMM_FLOAT16:
        case DT_COMM_BFLOAT16:
            ((uint16_t *)buf)[i] =
                ct_half_round(t, kind == CT_EXACT ? exact_half(t, small, seed, i) : u);
            break;
        default:
            abort();
        }
    }
}

/* The 16-bit reference: values in double, each addition (and AVG's division) rounded back
 * by ct_half_round. MAX/MIN keep the chosen operand's bits: comm.h rounds it back, which
 * gives it unchanged (a NaN too: SPECIAL's are quiet, with no payload to lose). */
static void ref_half(dt_comm *c, dt_comm_dtype t, dt_comm_redop op, uint16_t *o, uint16_t *x,
                     size_t first, size_t n, size_t full, uint64_t seed, int kind)
{
    int n_members = dt_comm_size(c);
    for (int p = 0; p < n_members; p++) {
        ct_fill(t, x, full, dt_comm_world_rank(c, p), seed, kind);
        for (size_t i = 0; i < n; i++) {
            uint16_t a = o[i], b = x[first + i];
            double va = ct_half_value(t, a), vb = ct_half_value(t, b);
            if (p == 0)
                o[i] = b;
            else if (op == DT_COMM_MAX)
                o[i] = (va >= vb || isnan(va)) ? a : b;
            else if (op == DT_COMM_MIN)
                o[i] = (va <= vb || isnan(va)) ? a : b;
            else
                o[i] = ct_half_round(t, va + vb);
        }
    }
    if (op == DT_COMM_AVG)
        for (size_t i = 0; i < n; i++)
            o[i] = ct_half_round(t, ct_half_value(t, o[i]) / n_members);
}

/* The reference semantics of comm.h, written out per type. */
#define REF_LOOP(T, ADD, DIV, ISNAN)                                                               \
    do {                                                                                           \
        T *o = out;                                                                                \
        const T *x = tmp;                                                                          \
        for (int p = 0; p < n_members; p++) {                                                      \
            ct_fill(t, tmp, full, dt_comm_world_rank(c, p), seed, kind);                           \
            for (size_t i = 0; i < n; i++) {                                                       \
                T a = o[i], b = x[first + i];                                                      \
                if (p == 0)                                                                        \
                    o[i] = b;                                                                      \
                else if (op == DT_COMM_MAX)                                                        \
                    o[i] = (a >= b || ISNAN(a)) ? a : b;                                           \
                else if (op == DT_COMM_MIN)                                                        \
                    o[i] = (a <= b || ISNAN(a)) ? a : b;                                           \
                else                                                                               \
                    o[i] = ADD(a, b);                                                              \
            }                                                                                      \
        }                                                                                          \
        if (op == DT_COMM_AVG)                                                                     \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = DIV(o[i], n_members);                                                       \
    } while (0)

#define ISNAN_F(a) ((a) != (a))
#define ISNAN_NO(a) 0
#define ADD_PLAIN(a, b) ((a) + (b))
#define ADD_W32(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define ADD_W64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define ADD_W8(a, b) ((uint8_t)((a) + (b)))
#define DIV_F(a, n) ((a) / (float)(n))
#define DIV_D(a, n) ((a) / (double)(n))
#define DIV_I(a, n) ((a) / (n))
#define DIV_U8(a, n) ((uint8_t)((a) / (unsigned)(n)))

void ct_reference(dt_comm *c, dt_comm_dtype t, dt_comm_redop op, void *out, size_t first, size_t n,
                  size_t full, uint64_t seed, int kind)
{
    int n_members = dt_comm_size(c);
    void *tmp = ct_alloc(full * dt_comm_dtype_size(t) + 1);
    switch (t) {
    case DT_COMM_FLOAT32:
        REF_LOOP(float, ADD_PLAIN, DIV_F, ISNAN_F);
        break;
    case DT_COMM_FLOAT64:
        REF_LOOP(double, ADD_PLAIN, DIV_D, ISNAN_F);
        break;
    case DT_COMM_INT32:
        REF_LOOP(int32_t, ADD_W32, DIV_I, ISNAN_NO);
        break;
    case DT_COMM_INT64:
        REF_LOOP(int64_t, ADD_W64, DIV_I, ISNAN_NO);
        break;
    case DT_COMM_UINT8:
        REF_LOOP(uint8_t, ADD_W8, DIV_U8, ISNAN_NO);
        break;
    case DT_COMM_FLOAT16:
    case DT_COMM_BFLOAT16:
        ref_half(c, t, op, out, tmp, first, n, full, seed, kind);
        break;
    default:
        abort();
    }
    free(tmp);
}

static void show(dt_comm_dtype t, const void *p, size_t i, char *buf, size_t n)
{
    switch (t) {
    case DT_COMM_FLOAT32:
        snprintf(buf, n, "%.9g", (double)((const float *)p)[i]);
        break;
    case DT_COMM_FLOAT64:
        snprintf(buf, n, "%.17g", ((const double *)p)[i]);
        break;
    case DT_COMM_INT32:
        snprintf(buf, n, "%d", (int)((const int32_t *)p)[i]);
        break;
    case DT_COMM_INT64:
        snprintf(buf, n, "%lld", (long long)((const int64_t *)p)[i]);
        break;
    case DT_COMM_UINT8:
        snprintf(buf, n, "%u", (unsigned)((const uint8_t *)p)[i]);
        break;
    case DT_COMM_FLOAT16:
    case DT_COMM_BFLOAT16: {
        uint16_t h = ((const uint16_t *)p)[i];
        snprintf(buf, n, "%.9g (0x%04X)", ct_half_value(t, h), (unsigned)h);
        break;
    }
    default:
        snprintf(buf, n, "?");
        break;
    }
}

int ct_check(const char *name, dt_comm_dtype t, const void *got, const void *ref, size_t n)
{
    size_t es = dt_comm_dtype_size(t), bad = 0, first = 0;
    const unsigned char *g = got, *r = ref;
    for (size_t i = 0; i < n; i++)
        if (memcmp(g + i * es, r + i * es, es) != 0) {
            if (bad++ == 0)
                first = i;
        }
    if (bad == 0)
        return 1;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char e[64], a[64];
    show(t, ref, first, e, sizeof e);
    show(t, got, first, a, sizeof a);
    fprintf(stderr,
            "FAIL rank %d: %s (%s): %zu of %zu elements differ; first at index %zu: "
            "expected %s, got %s\n",
            rank, name, dt_comm_dtype_name(t), bad, n, first, e, a);
    return 0;
}

int ct_all(int ok)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

void *ct_alloc(size_t nbytes)
{
    void *p = calloc(1, nbytes ? nbytes : 1);
    if (p == NULL) {
        fprintf(stderr, "test: out of memory (%zu bytes)\n", nbytes);
        abort();
    }
    return p;
}
