/* test_text_alloc.c — the text windows allocate nothing (text.h): the fill functions run in
 * every training step and evaluation. Counts malloc and friends (alloc_count.h), so it is
 * labelled alloc, not unit (the AddressSanitizer build replaces malloc itself). */
#include "dt_test.h"

#include <stdio.h>
#include <string.h>

#include "alloc_count.h"
#include "dtrain/text.h"

static void test_fill_allocates_nothing(void **state)
{
    (void)state;
    char bytes[4096], path[512];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (char)(i * 7);
    snprintf(path, sizeof path, "%s/corpus.txt", dt_test_tmpdir());
    assert_int_equal(dt_test_write_file(path, bytes, sizeof bytes), 0);
    dt_text t;
    DT_ASSERT_OK(dt_text_load(path, 0.25, &t));
    dt_text_windows w;
    DT_ASSERT_OK(dt_text_windows_init(&t, 32, 5, &w));
    static int32_t in[16 * 32], tg[16 * 32];
    int64_t offs[16];
    const int64_t nval = dt_text_val_count(&w);

    dt_alloc_count_reset();
    dt_alloc_count_enable(1);
    long sum = 0;
    for (int64_t s = 0; s < 100; s++) {
        dt_text_train_fill(&w, s, 0, 16, in, tg);
        dt_text_step_offsets(&w, s, 16, offs);
        sum += in[0] + tg[16 * 32 - 1] + (long)offs[15];
    }
    for (int64_t i = 0; i + 16 <= nval; i += 16)
        dt_text_val_fill(&w, i, 16, in, tg);
    dt_alloc_count_enable(0);
    if (dt_alloc_count() != 0)
        print_error("100 steps of 16 text windows and %lld validation windows made %ld "
                    "allocations, expected none\n",
                    (long long)nval, dt_alloc_count());
    assert_int_equal(dt_alloc_count(), 0);
    assert_true(sum >= 0);
    dt_text_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fill_allocates_nothing)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
