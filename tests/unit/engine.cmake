# Engine tests owned with the training loop. test_alloc_step replaces malloc, so it is not
# labelled unit (the AddressSanitizer build runs the unit label); it runs under every
# OpenBLAS kernel set this CPU executes (test_alloc_step_<set>).
add_executable(test_alloc_step ${CMAKE_CURRENT_LIST_DIR}/test_alloc_step.c
               ${PROJECT_SOURCE_DIR}/tests/support/alloc_count.c)
target_compile_options(test_alloc_step PRIVATE ${DT_WARNINGS} ${DT_FLAGS})
target_link_libraries(test_alloc_step PRIVATE dt_testsupport)
dt_add_coretype_tests(NAME test_alloc_step LABELS alloc TIMEOUT 60
                      COMMAND $<TARGET_FILE:test_alloc_step>)
# The ConvNet's weights out and back in, and PyTorch's state_dict in its 4-D layout
# (tests/e2e/convnet_init.safetensors).
dt_add_test(NAME test_weights_convnet SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_weights_convnet.c
            LABELS unit TIMEOUT 30)
# optim.decay's rules in a run (auto keeps every-tensor decay without an embedding) and
# optim.clip_norm's refusals.
dt_add_test(NAME test_optim_setup SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_optim_setup.c
            LABELS unit TIMEOUT 30)
# The GPT as a model: recompute keeps its bits with dropout on, activation memory linear in
# T, and the tied head's refusals.
dt_add_test(NAME test_gpt_model SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpt_model.c
            LABELS unit TIMEOUT 60)
