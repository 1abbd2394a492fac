/* test_generate_alloc.c — generation with the key-value cache allocates nothing after
 * dt_gpt_create (generate.h): the prompt, 60 tokens one at a time and, past block_size 16,
 * the cache rebuilt from the last 15 tokens at every step, sampled with top_k. Counts malloc
 * and friends (alloc_count.h), so it is labelled alloc, not unit (the AddressSanitizer build
 * replaces malloc itself). */
#include "dt_test.h"

#include <stdio.h>

#include "alloc_count.h"
#include "dtrain/config.h"
#include "dtrain/generate.h"
#include "dtrain/model.h"

static void test_generate_allocates_nothing(void **state)
{
    (void)state;
    static const char *const text[] = {"embedding 256 32", "position",  "block 4",
                                       "block 4",          "layernorm", "lm_head"};
    dt_layer_spec specs[6];
    for (int i = 0; i < 6; i++)
        DT_ASSERT_OK(dt_layer_spec_parse(text[i], &specs[i]));
    const dt_shape in = {.ndim = 1, .d = {16}};
    dt_model *m = NULL;
    DT_ASSERT_OK(dt_model_create(specs, 6, &in, 1, &m));
    dt_model_init_params(m, 3);
    dt_gpt *g = NULL;
    DT_ASSERT_OK(dt_gpt_create(m, &g));
    int32_t prompt[5] = {72, 101, 108, 108, 111}, out[60];
    const dt_gen_options o = {.sample = {.temperature = 0.8, .top_k = 20, .seed = 2}, .tokens = 60};
    dt_alloc_count_reset();
    dt_alloc_count_enable(1);
    const dt_status st = dt_gpt_generate(g, prompt, 5, &o, out);
    dt_alloc_count_enable(0);
    DT_ASSERT_OK(st);
    if (dt_alloc_count() != 0)
        print_error("generating 60 tokens with the cache made %ld allocations, expected none\n",
                    dt_alloc_count());
    assert_int_equal(dt_alloc_count(), 0);
    dt_gpt_free(g);
    dt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_generate_allocates_nothing)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
