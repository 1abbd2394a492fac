# Engine tests owned with the training loop. test_alloc_step replaces malloc, so it is not
# labelled unit (the AddressSanitizer build runs the unit label).
dt_add_test(NAME test_alloc_step SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_alloc_step.c
            ${PROJECT_SOURCE_DIR}/tests/support/alloc_count.c LABELS alloc TIMEOUT 60)
