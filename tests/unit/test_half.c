/* test_half.c — float32 <-> float16 / bfloat16 (src/core/half.h): every 16-bit pattern
 * widens to its value and narrows back to itself; hand-checked bit patterns; every rounding
 * boundary (each midpoint between neighbours and the floats on either side of it); random
 * floats against an independent rounding in double; the bulk functions against the scalar
 * ones. The reference decodes and rounds with frexp/ldexp/nearbyint, not with bits. */
#include "dt_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* A 16-bit format as numbers: mantissa bits, exponent bias; float16 (10, 15), bfloat16
 * (7, 127). Exponent bits are 15 - mbits. */
typedef struct fmt {
    const char *name;
    int mbits, bias;
    uint16_t (*narrow)(float);
    float (*widen)(uint16_t);
    void (*narrow_n)(const float *, uint16_t *, size_t);
    void (*widen_n)(const uint16_t *, float *, size_t);
} fmt;

static const fmt f16 = {"float16",      10, 15, dt_f32_to_f16, dt_f16_to_f32, dt_f32_to_f16_n,
                        dt_f16_to_f32_n};
static const fmt bf16 = {"bfloat16",      7, 127, dt_f32_to_bf16, dt_bf16_to_f32, dt_f32_to_bf16_n,
                         dt_bf16_to_f32_n};

static uint16_t inf_bits(const fmt *f)
{
    return (uint16_t)(0x7FFFu & ~((1u << f->mbits) - 1));
}

static int is_nan_bits(const fmt *f, uint16_t h)
{
    return (h & 0x7FFFu) > inf_bits(f);
}

/* The value of a finite pattern, from its fields (double holds every one exactly). */
static double decode(const fmt *f, uint16_t h)
{
    int e = (h & 0x7FFF) >> f->mbits, m = h & ((1 << f->mbits) - 1);
    double v = e == 0 ? ldexp(m, 1 - f->bias - f->mbits)
                      : ldexp(m + (1 << f->mbits), e - f->bias - f->mbits);
    return h & 0x8000 ? -v : v;
}

/* The pattern of a value the format holds exactly (or an infinity). */
static uint16_t encode(const fmt *f, double v)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double a = fabs(v);
    if (isinf(a))
        return sign | inf_bits(f);
    if (a == 0)
        return sign;
    int e2;
    frexp(a, &e2); /* a in [2^(e2-1), 2^e2) */
    int e = e2 - 1 + f->bias;
    if (e <= 0) /* subnormal: a multiple of the smallest step */
        return sign | (uint16_t)ldexp(a, f->bias - 1 + f->mbits);
    double m = ldexp(a, f->mbits - (e2 - 1)) - ldexp(1, f->mbits);
    return sign | (uint16_t)(((unsigned)e << f->mbits) | (unsigned)m);
}

/* x rounded to the format to nearest, ties to even (nearbyint in the default mode), and
 * past the largest finite value an infinity: the rule, computed in double. */
static double round_ref(const fmt *f, double x)
{
    if (x == 0 || isnan(x) || isinf(x))
        return x;
    int e2;
    frexp(fabs(x), &e2);
    int q = e2 - 1 - f->mbits;          /* the exponent of one unit in the last place */
    int q_min = 1 - f->bias - f->mbits; /* the subnormals' step */
    if (q < q_min)
        q = q_min;
    double r = ldexp(nearbyint(ldexp(x, -q)), q);
    double max =
        ldexp((1 << (f->mbits + 1)) - 1, (int)(inf_bits(f) >> f->mbits) - 1 - f->bias - f->mbits);
    return fabs(r) > max ? copysign(INFINITY, x) : r;
}

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* One conversion against its expected bits, failing loudly. */
#define EXPECT_NARROW(f, x, expect)                                                                \
    do {                                                                                           \
        uint16_t got_ = (f)->narrow(x);                                                            \
        if (got_ != (expect))                                                                      \
            fail_msg("%s(%a = 0x%08X): expected 0x%04X, got 0x%04X", (f)->name, (double)(x),       \
                     (unsigned)bits_of(x), (unsigned)(expect), (unsigned)got_);                    \
    } while (0)
#define EXPECT_WIDEN(f, h, expect_bits)                                                            \
    do {                                                                                           \
        uint32_t got_ = bits_of((f)->widen(h));                                                    \
        if (got_ != (expect_bits))                                                                 \
            fail_msg("%s widen 0x%04X: expected 0x%08X, got 0x%08X", (f)->name, (unsigned)(h),     \
                     (unsigned)(expect_bits), (unsigned)got_);                                     \
    } while (0)

/* float16 = sign | exponent (5 bits, bias 15) << 10 | mantissa (10 bits). */
static void test_f16_by_hand(void **state)
{
    (void)state;
    EXPECT_NARROW(&f16, 1.0f, 0x3C00);     /* exponent 15 = 01111, mantissa 0 */
    EXPECT_NARROW(&f16, -2.0f, 0xC000);    /* sign 1, exponent 16 = 10000 */
    EXPECT_NARROW(&f16, 65504.0f, 0x7BFF); /* (2 - 2^-10)·2^15: exponent 30, mantissa all ones */
    /* 65520 is halfway between 65504 (0x7BFF, odd) and 2^16 (would be 0x7C00): the tie goes
     * to the even side, 0x7C00, the infinity; one float below it stays finite. */
    EXPECT_NARROW(&f16, 65520.0f, 0x7C00);
    EXPECT_NARROW(&f16, nextafterf(65520.0f, 0.0f), 0x7BFF);
    EXPECT_NARROW(&f16, 1e30f, 0x7C00);
    EXPECT_NARROW(&f16, -INFINITY, 0xFC00);
    EXPECT_NARROW(&f16, 0x1p-24f, 0x0001);        /* the smallest subnormal: mantissa 1 */
    EXPECT_NARROW(&f16, 0x1p-25f, 0x0000);        /* halfway between 0 and 2^-24: even is 0 */
    EXPECT_NARROW(&f16, 0x1.000002p-25f, 0x0001); /* just above halfway */
    EXPECT_NARROW(&f16, 0x3p-25f, 0x0002);        /* 1.5·2^-24, between 0x0001 (odd) and 0x0002 */
    EXPECT_NARROW(&f16, 0x1p-14f, 0x0400);        /* the smallest normal: exponent 1 */
    EXPECT_NARROW(&f16, 0x3FFp-24f, 0x03FF);      /* the largest subnormal, 1023·2^-24 */
    /* 2^-14 - 2^-25 is halfway between 0x03FF (odd) and 0x0400: up to the normal. */
    EXPECT_NARROW(&f16, 0x7FFp-25f, 0x0400);
    /* Normal ties: 1 + 2^-11 is halfway between 0x3C00 (even) and 0x3C01; 1 + 3·2^-11
     * halfway between 0x3C01 (odd) and 0x3C02. */
    EXPECT_NARROW(&f16, 1.0f + 0x1p-11f, 0x3C00);
    EXPECT_NARROW(&f16, 1.0f + 0x3p-11f, 0x3C02);
    /* 0.1 = 1.6·2^-4: exponent 11 = 01011, mantissa 0.6·1024 = 614.4 -> 614 = 0x266. */
    EXPECT_NARROW(&f16, 0.1f, 0x2E66);
    EXPECT_NARROW(&f16, -0.0f, 0x8000);
    EXPECT_NARROW(&f16, 0x1p-149f, 0x0000); /* float32's smallest subnormal */
    /* NaN: sign kept, quiet bit 0x0200 set, the top 10 payload bits kept. */
    EXPECT_NARROW(&f16, float_of(0x7FC00000u), 0x7E00);
    EXPECT_NARROW(&f16, float_of(0xFFC00000u), 0xFE00);
    EXPECT_NARROW(&f16, float_of(0x7F802000u), 0x7E01); /* signalling, payload bit 13 */
    EXPECT_NARROW(&f16, float_of(0x7F800001u), 0x7E00); /* payload below the kept bits */
    /* Widening: 0x0001 = 2^-24 = float32 exponent 103 (0x33800000); 0x3C01 = 1 + 2^-10
     * (mantissa bit 13 of float32: 0x3F802000); 0x7C00 = +Inf; 0x7C01 a signalling NaN,
     * quieted: 0x7F800000 | 1 << 13 | 0x00400000. */
    EXPECT_WIDEN(&f16, 0x0001, 0x33800000u);
    EXPECT_WIDEN(&f16, 0x03FF, bits_of(0x3FFp-24f));
    EXPECT_WIDEN(&f16, 0x3C01, 0x3F802000u);
    EXPECT_WIDEN(&f16, 0x8000, 0x80000000u);
    EXPECT_WIDEN(&f16, 0x7C00, 0x7F800000u);
    EXPECT_WIDEN(&f16, 0xFC00, 0xFF800000u);
    EXPECT_WIDEN(&f16, 0x7C01, 0x7FC02000u);
    EXPECT_WIDEN(&f16, 0xFE00, 0xFFC00000u);
}

/* bfloat16 = the top half of a float32 (sign, 8 exponent bits, 7 mantissa bits). */
static void test_bf16_by_hand(void **state)
{
    (void)state;
    EXPECT_NARROW(&bf16, 1.0f, 0x3F80); /* 0x3F800000 */
    /* 1 + 2^-8 = 0x3F808000: the dropped half is exactly 0x8000, the kept 0x3F80 even. */
    EXPECT_NARROW(&bf16, 1.0f + 0x1p-8f, 0x3F80);
    /* 1 + 3·2^-8 = 0x3F818000: a tie with the kept 0x3F81 odd: up to 0x3F82. */
    EXPECT_NARROW(&bf16, 1.0f + 0x3p-8f, 0x3F82);
    EXPECT_NARROW(&bf16, float_of(0x3F808001u), 0x3F81); /* just above the tie */
    /* FLT_MAX = 0x7F7FFFFF: dropped 0xFFFF, above half: 0x7F7F + 1 = 0x7F80, the infinity. */
    EXPECT_NARROW(&bf16, float_of(0x7F7FFFFFu), 0x7F80);
    EXPECT_NARROW(&bf16, float_of(0x7F7F0000u), 0x7F7F); /* the largest finite, exact */
    EXPECT_NARROW(&bf16, float_of(0x7F7F8000u), 0x7F80); /* its tie, odd: to infinity */
    EXPECT_NARROW(&bf16, -0.0f, 0x8000);
    EXPECT_NARROW(&bf16, -3.0f, 0xC040);     /* 0xC0400000 */
    EXPECT_NARROW(&bf16, 0x1p-133f, 0x0001); /* 0x00010000: the smallest subnormal */
    EXPECT_NARROW(&bf16, 0x1p-149f, 0x0000); /* 0x00000001: far below half of it */
    EXPECT_NARROW(&bf16, 0x1p-134f, 0x0000); /* 0x00008000: a tie to even 0 */
    EXPECT_NARROW(&bf16, 0x3p-134f, 0x0002); /* 0x00018000: a tie, 0x0001 odd: up */
    /* NaN: sign kept, quiet bit 0x0040 set, the top payload bits kept. */
    EXPECT_NARROW(&bf16, float_of(0x7FC00000u), 0x7FC0);
    EXPECT_NARROW(&bf16, float_of(0xFFC00000u), 0xFFC0);
    EXPECT_NARROW(&bf16, float_of(0x7F800001u), 0x7FC0); /* signalling: quieted */
    EXPECT_NARROW(&bf16, float_of(0x7FA00000u), 0x7FE0);
    EXPECT_WIDEN(&bf16, 0x3F80, 0x3F800000u);
    EXPECT_WIDEN(&bf16, 0x0001, 0x00010000u);
    EXPECT_WIDEN(&bf16, 0xFF80, 0xFF800000u);
    EXPECT_WIDEN(&bf16, 0x7F81, 0x7FC10000u); /* signalling NaN, quieted */
}

/* Every pattern: widening gives the value its fields say, and narrowing gives the pattern
 * back (a NaN: a NaN of the same sign, the same pattern with the quiet bit set). */
static int round_trip_all(const fmt *f)
{
    uint16_t quiet = (uint16_t)(1u << (f->mbits - 1));
    int bad = 0;
    for (uint32_t i = 0; i <= 0xFFFF; i++) {
        uint16_t h = (uint16_t)i;
        float x = f->widen(h);
        uint16_t back = f->narrow(x);
        if (is_nan_bits(f, h)) {
            if (!isnan(x) || !signbit(x) != !(h & 0x8000) || back != (h | quiet)) {
                if (bad++ < 5)
                    fprintf(stderr, "%s NaN 0x%04X: widened 0x%08X, back 0x%04X, expected 0x%04X\n",
                            f->name, (unsigned)h, (unsigned)bits_of(x), (unsigned)back,
                            (unsigned)(h | quiet));
            }
            continue;
        }
        double v = (h & 0x7FFF) == inf_bits(f) ? (h & 0x8000 ? -INFINITY : INFINITY) : decode(f, h);
        if (bits_of(x) != bits_of((float)v) || back != h) {
            if (bad++ < 5)
                fprintf(stderr, "%s 0x%04X: widened %a (expected %a), back 0x%04X\n", f->name,
                        (unsigned)h, (double)x, v, (unsigned)back);
        }
    }
    if (bad)
        fprintf(stderr, "%s: %d of 65536 patterns wrong\n", f->name, bad);
    return bad == 0;
}

static void test_round_trip_every_pattern(void **state)
{
    (void)state;
    assert_true(round_trip_all(&f16));
    assert_true(round_trip_all(&bf16));
}

/* Every value the format holds, made as a float from its fields (not by the widening under
 * test), narrows to its pattern and widens back to the same float bits. */
static int representable_exact(const fmt *f)
{
    int bad = 0;
    for (uint32_t i = 0; i < inf_bits(f); i++)
        for (int s = 0; s < 2; s++) {
            uint16_t h = (uint16_t)(i | (s ? 0x8000u : 0));
            float x = (float)decode(f, h);
            float y = f->widen(f->narrow(x));
            if (bits_of(y) != bits_of(x) && bad++ < 5)
                fprintf(stderr, "%s: %a -> 0x%04X -> %a\n", f->name, (double)x,
                        (unsigned)f->narrow(x), (double)y);
        }
    return bad == 0;
}

static void test_representable_exact(void **state)
{
    (void)state;
    assert_true(representable_exact(&f16));
    assert_true(representable_exact(&bf16));
}

/* Between every two neighbours lo < hi (hi = the largest finite's successor 2^(emax+1) for
 * the last one): the midpoint goes to the even pattern, the float below it to lo, the float
 * above it to hi; both signs. Midpoints have one bit more than the format: floats. */
static int boundaries(const fmt *f)
{
    int bad = 0;
    for (uint32_t i = 0; i < inf_bits(f); i++) {
        uint16_t lo = (uint16_t)i, hi = (uint16_t)(i + 1);
        double vlo = decode(f, lo);
        double vhi =
            hi == inf_bits(f) ? 2 * decode(f, lo) - decode(f, (uint16_t)(lo - 1)) : decode(f, hi);
        float mid = (float)((vlo + vhi) / 2);
        if ((double)mid != (vlo + vhi) / 2) {
            fprintf(stderr, "%s: midpoint after 0x%04X not a float\n", f->name, (unsigned)lo);
            return 0;
        }
        float below = nextafterf(mid, 0.0f), above = nextafterf(mid, INFINITY);
        uint16_t even = (lo & 1) ? hi : lo;
        for (int s = 0; s < 2; s++) {
            uint16_t sg = s ? 0x8000 : 0;
            float m = s ? -mid : mid, b = s ? -below : below, a = s ? -above : above;
            if ((f->narrow(m) != (sg | even) || f->narrow(b) != (sg | lo) ||
                 f->narrow(a) != (sg | hi)) &&
                bad++ < 5)
                fprintf(stderr,
                        "%s: around %a: tie 0x%04X (expected 0x%04X), below 0x%04X "
                        "(0x%04X), above 0x%04X (0x%04X)\n",
                        f->name, (double)m, (unsigned)f->narrow(m), (unsigned)(sg | even),
                        (unsigned)f->narrow(b), (unsigned)(sg | lo), (unsigned)f->narrow(a),
                        (unsigned)(sg | hi));
        }
    }
    return bad == 0;
}

static void test_rounding_boundaries(void **state)
{
    (void)state;
    assert_true(boundaries(&f16));
    assert_true(boundaries(&bf16));
}

/* Random floats: every bit pattern alike, then exponents near the format's range. */
static int random_floats(const fmt *f, uint64_t seed)
{
    int bad = 0;
    uint64_t s = seed;
    for (int i = 0; i < (1 << 21); i++) {
        uint32_t u = (uint32_t)next_random(&s);
        if (i & 1) { /* float32 exponents from 12 below the format's smallest subnormal to
                        12 above its largest exponent, any sign and mantissa */
            int lo = 127 - f->bias - f->mbits - 12, hi = 127 + f->bias + 12;
            lo = lo < 0 ? 0 : lo;
            hi = hi > 255 ? 255 : hi;
            uint32_t e = (uint32_t)lo + (u >> 8) % (uint32_t)(hi - lo + 1);
            u = (u & 0x807FFFFFu) | (e << 23);
        }
        float x = float_of(u);
        uint16_t got = f->narrow(x);
        if (isnan(x)) {
            if (!is_nan_bits(f, got) || !(got & 0x8000) != !(u & 0x80000000u))
                if (bad++ < 5)
                    fprintf(stderr, "%s: NaN 0x%08X -> 0x%04X\n", f->name, (unsigned)u,
                            (unsigned)got);
            continue;
        }
        uint16_t expect = encode(f, round_ref(f, x));
        if (got != expect && bad++ < 5)
            fprintf(stderr, "%s: %a (0x%08X): expected 0x%04X, got 0x%04X\n", f->name, (double)x,
                    (unsigned)u, (unsigned)expect, (unsigned)got);
    }
    if (bad)
        fprintf(stderr, "%s: %d random floats rounded wrong\n", f->name, bad);
    return bad == 0;
}

static void test_random_against_reference(void **state)
{
    (void)state;
    assert_true(random_floats(&f16, 0x9E3779B97F4A7C15ull));
    assert_true(random_floats(&bf16, 0xD1B54A32D192ED03ull));
}

/* The bulk functions equal the scalar ones element by element, at lengths that leave
 * every possible tail after the vector loop. */
static int bulk(const fmt *f)
{
    size_t n = 65536 + 37;
    uint16_t *h = malloc(n * sizeof *h), *h2 = malloc(n * sizeof *h2);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    assert_true(h && h2 && x && y);
    uint64_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        h[i] = (uint16_t)i;
        x[i] = float_of((uint32_t)next_random(&s));
    }
    int bad = 0;
    for (size_t len = n - 17; len <= n; len++) {
        f->widen_n(h, y, len);
        f->narrow_n(x, h2, len);
        for (size_t i = 0; i < len; i++)
            if ((bits_of(y[i]) != bits_of(f->widen(h[i])) || h2[i] != f->narrow(x[i])) && bad++ < 5)
                fprintf(stderr,
                        "%s bulk, length %zu, index %zu: widen 0x%08X vs 0x%08X, narrow "
                        "0x%04X vs 0x%04X\n",
                        f->name, len, i, (unsigned)bits_of(y[i]), (unsigned)bits_of(f->widen(h[i])),
                        (unsigned)h2[i], (unsigned)f->narrow(x[i]));
    }
    free(h);
    free(h2);
    free(x);
    free(y);
    return bad == 0;
}

static void test_bulk_equals_scalar(void **state)
{
    (void)state;
    assert_true(bulk(&f16));
    assert_true(bulk(&bf16));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_by_hand),
        cmocka_unit_test(test_bf16_by_hand),
        cmocka_unit_test(test_round_trip_every_pattern),
        cmocka_unit_test(test_representable_exact),
        cmocka_unit_test(test_rounding_boundaries),
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_bulk_equals_scalar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
