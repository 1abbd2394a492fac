/* comm_test_util.c — see comm_test_util.h. */
#include "comm_test_util.h"

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

void ct_fill(dt_comm_dtype t, void *buf, size_t n, int member, uint64_t seed, int kind)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t h = draw(seed, member, i);
        int small = (int)(h % 17) - 8;
        double u = (double)(h >> 11) * 0x1.0p-53 * 2.0 - 1.0;
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
        default:
            abort();
        }
    }
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
