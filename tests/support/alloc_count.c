/* alloc_count.c — malloc, calloc, realloc, aligned_alloc, posix_memalign and free replaced
 * by counting wrappers around glibc's __libc_* entry points (see alloc_count.h). */
#include "alloc_count.h"

#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static volatile int counting;
static volatile long allocations;

void dt_alloc_count_enable(int on) { counting = on; }
void dt_alloc_count_reset(void) { allocations = 0; }
long dt_alloc_count(void) { return allocations; }

void *malloc(size_t n);
void *calloc(size_t a, size_t b);
void *realloc(void *p, size_t n);
void *aligned_alloc(size_t al, size_t n);
int posix_memalign(void **out, size_t al, size_t n);
void free(void *p);

void *malloc(size_t n)
{
    if (counting)
        allocations++;
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    if (counting)
        allocations++;
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    if (counting)
        allocations++;
    return __libc_realloc(p, n);
}

void *aligned_alloc(size_t al, size_t n)
{
    if (counting)
        allocations++;
    return __libc_memalign(al, n);
}

int posix_memalign(void **out, size_t al, size_t n)
{
    if (counting)
        allocations++;
    *out = __libc_memalign(al, n);
    return *out != NULL ? 0 : 12; /* ENOMEM */
}

void free(void *p) { __libc_free(p); }
