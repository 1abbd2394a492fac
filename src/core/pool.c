/* pool.c — see pool.h. A run publishes (fn, ctx) under a new generation number; members
 * spin on the generation for up to POOL_SPIN_S (within a step the model's runs come back to
 * back, microseconds to a millisecond apart), yielding now and then so that an oversubscribed core
 * is not starved, then sleep on a condition variable (between steps: data, optimizer, evaluation).
 * The caller waits for the count of finished members the same way. */
#include "core/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

/* How long a member spins for the next run, and the caller for the members, before
 * sleeping; and how many polls between a yield and a look at the clock. 5 ms covers the
 * gaps within a training step and the members' imbalance (0.1 and 1 ms cost the ConvNet
 * 4-10% at 2 threads in condition-variable wake-ups); evaluation or I/O puts them to sleep. */
#define POOL_SPIN_S 5e-3
#define POOL_POLLS 256

/* The bookkeeping of one bounded spin: call once per empty poll; every POOL_POLLS polls it
 * yields and looks at the clock, and returns 0 once POOL_SPIN_S has passed. */
typedef struct pool_spin {
    unsigned polls;
    double t0;
} pool_spin;

static int spin_on(pool_spin *s)
{
    if (++s->polls % POOL_POLLS != 0)
        return 1;
    const double t = dt_now();
    if (s->t0 < 0)
        s->t0 = t;
    else if (t - s->t0 > POOL_SPIN_S)
        return 0;
    sched_yield();
    return 1;
}

struct dt_pool {
    int n;
    pthread_t *threads;
    int started; /* threads successfully created */
    pthread_mutex_t mu;
    pthread_cond_t wake, done_cv;
    atomic_uint_fast64_t gen; /* incremented by each run (and by free, to stop) */
    atomic_int done;          /* members 1..n-1 finished with the current run */
    atomic_int stop;
    dt_pool_fn fn;
    void *ctx;
};

typedef struct member {
    dt_pool *p;
    int t;
} member;

static void *member_main(void *arg)
{
    member *me = arg;
    dt_pool *p = me->p;
    uint_fast64_t seen = 0;
    for (;;) {
        uint_fast64_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        for (pool_spin sp = {0, -1.0}; g == seen && spin_on(&sp);)
            g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen)
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        seen = g;
        if (atomic_load_explicit(&p->stop, memory_order_acquire))
            return NULL;
        p->fn(p->ctx, me->t, p->n);
        if (atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel) + 1 == p->n - 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

dt_status dt_pool_create(int n, dt_pool **out)
{
    dt_status st = DT_OK;
    dt_pool *p = NULL;
    *out = NULL;
    DT_ASSERT(n >= 1);
    /* The members' (pool, index) pairs live right after the pool. */
    DT_TRY(dt_alloc(sizeof *p + sizeof(member) * (size_t)n, "thread pool", (void **)&p));
    p->n = n;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->stop, 0);
    DT_TRY(dt_alloc(sizeof(pthread_t) * (size_t)n, "thread pool", (void **)&p->threads));
    member *ms = (member *)(p + 1);
    for (int t = 1; t < n; t++) {
        ms[t] = (member){p, t};
        int err = pthread_create(&p->threads[t], NULL, member_main, &ms[t]);
        if (err != 0) {
            st = dt_fail(DT_ERR_NOMEM, "thread pool: cannot start thread %d of %d (error %d)", t, n,
                         err);
            goto fail;
        }
        p->started = t;
    }
    *out = p;
    return DT_OK;
fail:
    dt_pool_free(p);
    return st;
}

void dt_pool_free(dt_pool *p)
{
    if (p == NULL)
        return;
    if (p->threads != NULL && p->started > 0) {
        pthread_mutex_lock(&p->mu);
        atomic_store_explicit(&p->stop, 1, memory_order_release);
        atomic_fetch_add_explicit(&p->gen, 1, memory_order_acq_rel);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int t = 1; t <= p->started; t++)
            pthread_join(p->threads[t], NULL);
    }
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done_cv);
    pthread_mutex_destroy(&p->mu);
    dt_free(p->threads);
    dt_free(p);
}

int dt_pool_size(const dt_pool *p)
{
    return p != NULL ? p->n : 1;
}

void dt_pool_run(dt_pool *p, dt_pool_fn fn, void *ctx)
{
    if (p == NULL || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    /* The lock orders the new generation against a member about to sleep. */
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_acq_rel);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    const int others = p->n - 1;
    int done = atomic_load_explicit(&p->done, memory_order_acquire);
    for (pool_spin sp = {0, -1.0}; done < others && spin_on(&sp);)
        done = atomic_load_explicit(&p->done, memory_order_acquire);
    if (done < others) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->done, memory_order_acquire) < others)
            pthread_cond_wait(&p->done_cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
