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
/* The blocks counted in bytes: an open-addressing table of (pointer, size) under a spin
 * lock (the allocator is called from every thread); a freed slot becomes a tombstone. */
#define TOMB ((void *)1)
static struct {
    void *p;
    size_t n;
} track[2 * DT_ALLOC_TRACK_MAX];
static volatile int track_lock;
static long long live_bytes, peak_bytes;
static int tracked, overflow;

static void lock(void)
{
    while (__atomic_test_and_set(&track_lock, __ATOMIC_ACQUIRE))
        ;
}
static void unlock(void)
{
    __atomic_clear(&track_lock, __ATOMIC_RELEASE);
}
static size_t slot_of(const void *p)
{
    return ((size_t)p >> 4) * 2654435761u % (2 * DT_ALLOC_TRACK_MAX);
}

static void track_add(void *p, size_t n)
{
    if (p == NULL)
        return;
    lock();
    if (tracked >= DT_ALLOC_TRACK_MAX) {
        overflow = 1;
        unlock();
        return;
    }
    size_t i = slot_of(p);
    while (track[i].p != NULL && track[i].p != TOMB)
        i = (i + 1) % (2 * DT_ALLOC_TRACK_MAX);
    track[i].p = p;
    track[i].n = n;
    tracked++;
    live_bytes += (long long)n;
    if (live_bytes > peak_bytes)
        peak_bytes = live_bytes;
    unlock();
}

static void track_remove(void *p)
{
    if (p == NULL || tracked == 0)
        return;
    lock();
    for (size_t i = slot_of(p), k = 0; track[i].p != NULL && k < 2 * DT_ALLOC_TRACK_MAX;
         i = (i + 1) % (2 * DT_ALLOC_TRACK_MAX), k++)
        if (track[i].p == p) {
            track[i].p = TOMB;
            live_bytes -= (long long)track[i].n;
            tracked--;
            break;
        }
    unlock();
}

void dt_alloc_count_reset(void)
{
    allocations = mpi_allocations = 0;
    lock();
    memset(track, 0, sizeof track);
    tracked = overflow = 0;
    live_bytes = peak_bytes = 0;
    unlock();
}

long long dt_alloc_count_live_bytes(void)
{
    return live_bytes;
}
long long dt_alloc_count_peak_bytes(void)
{
    return peak_bytes;
}
int dt_alloc_count_overflow(void)
{
    return overflow;
}
long dt_alloc_count(void)
{
    return allocations;
}
long dt_alloc_count_mpi(void)
{
    return mpi_allocations;
}

/* Whether the code that called the allocator lives in the MPI library: Open MPI (its
 * libraries and plugins, and the PMIx, libevent and hwloc libraries it runs on) or MPICH
 * (libmpich, and the UCX and libfabric transports under it). */
static int from_mpi(void *caller)
{
    static const char *const libs[] = {"openmpi", "libmpi",   "libopen-pal", "libopen-rte",
                                       "libpmix", "libevent", "libhwloc",    "libmpich",
                                       "libucp",  "libucs",   "libuct",      "libfabric"};
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

/* 1 when the block being allocated is to be counted in bytes too. */
static int count(void *caller)
{
    if (!counting || looking)
        return 0;
    if (from_mpi(caller)) {
        mpi_allocations++;
        return 0;
    }
    allocations++;
    return 1;
}

void *malloc(size_t n);
void *calloc(size_t a, size_t b);
void *realloc(void *p, size_t n);
void *aligned_alloc(size_t al, size_t n);
int posix_memalign(void **out, size_t al, size_t n);
void free(void *p);

void *malloc(size_t n)
{
    const int bytes = count(__builtin_return_address(0));
    void *p = __libc_malloc(n);
    if (bytes)
        track_add(p, n);
    return p;
}

void *calloc(size_t a, size_t b)
{
    const int bytes = count(__builtin_return_address(0));
    void *p = __libc_calloc(a, b);
    if (bytes)
        track_add(p, a * b);
    return p;
}

void *realloc(void *p, size_t n)
{
    const int bytes = count(__builtin_return_address(0));
    track_remove(p);
    void *q = __libc_realloc(p, n);
    if (bytes)
        track_add(q, n);
    return q;
}

void *aligned_alloc(size_t al, size_t n)
{
    const int bytes = count(__builtin_return_address(0));
    void *p = __libc_memalign(al, n);
    if (bytes)
        track_add(p, n);
    return p;
}

int posix_memalign(void **out, size_t al, size_t n)
{
    const int bytes = count(__builtin_return_address(0));
    *out = __libc_memalign(al, n);
    if (bytes)
        track_add(*out, n);
    return *out != NULL ? 0 : 12; /* ENOMEM */
}

void free(void *p)
{
    track_remove(p);
    __libc_free(p);
}
