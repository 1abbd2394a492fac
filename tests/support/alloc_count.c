/* alloc_count.c — malloc, calloc, realloc, aligned_alloc, posix_memalign and free replaced
 * by counting wrappers around glibc's __libc_* entry points (see alloc_count.h). */
#define _GNU_SOURCE /* dladdr */
#include "alloc_count.h"

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static volatile int counting;
static volatile long allocations, mpi_allocations;
static __thread int looking; /* dladdr below must not count itself */

void dt_alloc_count_enable(int on)
{
    counting = on;
}
void dt_alloc_count_reset(void)
{
    allocations = mpi_allocations = 0;
}
long dt_alloc_count(void)
{
    return allocations;
}
long dt_alloc_count_mpi(void)
{
    return mpi_allocations;
}

/* Whether the code that called the allocator lives in Open MPI (its libraries and plugins,
 * and the PMIx, libevent and hwloc libraries it runs on). */
static int from_mpi(void *caller)
{
    static const char *const libs[] = {"openmpi", "libmpi",   "libopen-pal", "libopen-rte",
                                       "libpmix", "libevent", "libhwloc"};
    Dl_info info;
    looking = 1;
    const int found = dladdr(caller, &info) != 0 && info.dli_fname != NULL;
    looking = 0;
    if (!found)
        return 0;
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        if (strstr(info.dli_fname, libs[i]) != NULL)
            return 1;
    return 0;
}

static void count(void *caller)
{
    if (!counting || looking)
        return;
    if (from_mpi(caller))
        mpi_allocations++;
    else
        allocations++;
}

void *malloc(size_t n);
void *calloc(size_t a, size_t b);
void *realloc(void *p, size_t n);
void *aligned_alloc(size_t al, size_t n);
int posix_memalign(void **out, size_t al, size_t n);
void free(void *p);

void *malloc(size_t n)
{
    count(__builtin_return_address(0));
    return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    count(__builtin_return_address(0));
    return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    count(__builtin_return_address(0));
    return __libc_realloc(p, n);
}

void *aligned_alloc(size_t al, size_t n)
{
    count(__builtin_return_address(0));
    return __libc_memalign(al, n);
}

int posix_memalign(void **out, size_t al, size_t n)
{
    count(__builtin_return_address(0));
    *out = __libc_memalign(al, n);
    return *out != NULL ? 0 : 12; /* ENOMEM */
}

void free(void *p)
{
    __libc_free(p);
}
