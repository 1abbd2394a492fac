# Engine tests owned with the training loop. test_alloc_step replaces malloc, so it is not
# labelled unit (the AddressSanitizer build runs the unit label).
dt_add_test(NAME test_alloc_step SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_alloc_step.c
            ${PROJECT_SOURCE_DIR}/tests/support/alloc_count.c LABELS alloc TIMEOUT 60)
# The ConvNet's weights out and back in, and PyTorch's state_dict in its 4-D layout
# (tests/e2e/convnet_init.safetensors).
dt_add_test(NAME test_weights_convnet SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_weights_convnet.c
            LABELS unit TIMEOUT 30)
