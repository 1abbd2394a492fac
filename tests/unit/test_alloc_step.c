/* test_alloc_step.c — the training step allocates nothing (DESIGN.md: planned memory).
 * This program replaces malloc and friends for the whole process (OpenBLAS included) with
 * counting wrappers around glibc's, and counts calls between the second and the last
 * step of short runs of an MLP and a ConvNet. Not run under AddressSanitizer, which
 * replaces malloc itself. */
#include "dt_test.h"

#include <stdio.h>
#include <string.h>

#include "dtrain/train.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static volatile int counting;
static volatile long allocations;

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
    return *out ? 0 : 12;
}
void free(void *p) { __libc_free(p); }

static dt_status count_from_step_2(void *ctx, const dt_step_info *s)
{
    (void)ctx;
    if (s->step == 1)
        counting = 1; /* the first step may warm up BLAS buffers */
    return DT_OK;
}

static void run_counted(dt_config *cfg, const char *what)
{
    dt_trainer *t = NULL;
    DT_ASSERT_OK(dt_trainer_create(cfg, NULL, &t));
    allocations = 0;
    dt_train_callbacks cb = {.on_step = count_from_step_2};
    DT_ASSERT_OK(dt_trainer_run(t, &cb));
    counting = 0;
    if (allocations != 0)
        fprintf(stderr, "%s: %ld allocations during steps 2..%lld\n", what, allocations,
                (long long)cfg->train.max_steps);
    assert_int_equal(allocations, 0);
    dt_trainer_free(t);
}

static void test_mlp_step_allocates_nothing(void **state)
{
    (void)state;
    dt_config cfg = dt_config_default();
    DT_ASSERT_OK(dt_config_set(&cfg, "model.layers=flatten, linear 128, relu, dropout 0.2, "
                                     "linear 10", "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "loss.kind=cross_entropy", "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "train.max_steps=6", "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "train.eval=off", "test"));
    run_counted(&cfg, "mlp");
}

static void test_convnet_step_allocates_nothing(void **state)
{
    (void)state;
    dt_config cfg = dt_config_default(); /* the ConvNet */
    DT_ASSERT_OK(dt_config_set(&cfg, "train.max_steps=3", "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "train.batch=16", "test"));
    DT_ASSERT_OK(dt_config_set(&cfg, "train.eval=off", "test"));
    run_counted(&cfg, "convnet");
}

int main(void)
{
    dt_blas_set_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_step_allocates_nothing),
        cmocka_unit_test(test_convnet_step_allocates_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
