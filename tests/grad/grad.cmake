# Gradient tests (label grad): the double-precision reference layers against central finite
# differences, and the float kernels against the reference. ref_layers.c and grad_util.c
# are compiled into each test (they are small) so that no test depends on another part's
# targets; tests/ref uses them too.
set(DT_GRAD_SUPPORT ${CMAKE_CURRENT_LIST_DIR}/ref_layers.c ${CMAKE_CURRENT_LIST_DIR}/grad_util.c)

dt_add_test(NAME test_grad_layers
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_grad_layers.c ${DT_GRAD_SUPPORT}
            LABELS grad TIMEOUT 60)
dt_add_test(NAME test_grad_dropout
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_grad_dropout.c ${DT_GRAD_SUPPORT}
            LABELS grad TIMEOUT 60)
dt_add_test(NAME test_grad_loss
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_grad_loss.c ${DT_GRAD_SUPPORT}
            LABELS grad TIMEOUT 60)
# The transformer's kernels (src/tensor/tfm_kernels.h): forward against double references,
# backward against their finite differences, attention dropout's mask.
dt_add_test(NAME test_grad_tfm
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_grad_tfm.c ${DT_GRAD_SUPPORT}
            LABELS grad TIMEOUT 60)
# Label threads too: `make test-tsan` runs it under ThreadSanitizer.
dt_add_test(NAME test_threads
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_threads.c ${DT_GRAD_SUPPORT}
            LABELS grad threads TIMEOUT 60)
# The transformer's layer kinds and linear on (T, E) through the model, against double
# references and their finite differences, at 1 and 2 threads.
dt_add_test(NAME test_grad_gpt
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_grad_gpt.c ${DT_GRAD_SUPPORT}
            LABELS grad TIMEOUT 120)
