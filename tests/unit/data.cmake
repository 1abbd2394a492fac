# Data readers (IDX, CSV, synthetic, text), data set gather/split, and the safetensors format.
foreach(t IN ITEMS test_idx test_csv test_synth test_dataset test_safetensors test_text)
  dt_add_test(NAME ${t} SOURCES ${CMAKE_CURRENT_LIST_DIR}/${t}.c LABELS unit TIMEOUT 30)
endforeach()
# The text windows allocate nothing. It replaces malloc, so it is labelled alloc, not unit
# (the AddressSanitizer build runs the unit label).
dt_add_test(NAME test_text_alloc
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_text_alloc.c
                    ${PROJECT_SOURCE_DIR}/tests/support/alloc_count.c
            LABELS alloc TIMEOUT 30)
# What each step of a run takes: its samples (each epoch's permutation, the last batch's
# three modes) and its learning rate (a cosine over the whole run).
dt_add_test(NAME test_run_steps SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_run_steps.c
            LABELS unit TIMEOUT 30)
