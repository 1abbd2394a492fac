# Using a trained GPT (generate.h): the key-value cache against the model's own forward, the
# context rule, sampling, the errors, a tied lm_head.weight in a weights file.
dt_add_test(NAME test_generate SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_generate.c
            LABELS unit TIMEOUT 60)
# The cache allocates nothing per token. It replaces malloc, so it is labelled alloc, not
# unit (the AddressSanitizer build runs the unit label).
dt_add_test(NAME test_generate_alloc
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_generate_alloc.c
                    ${PROJECT_SOURCE_DIR}/tests/support/alloc_count.c
            LABELS alloc TIMEOUT 30)
# A tiny GPT's config, weights file and checkpoint set for the CLI tests (tests/cli/generate.sh).
add_executable(gpt_fixture ${CMAKE_CURRENT_LIST_DIR}/gpt_fixture.c)
target_compile_options(gpt_fixture PRIVATE ${DT_WARNINGS} ${DT_FLAGS})
target_link_libraries(gpt_fixture PRIVATE dt_testsupport)
