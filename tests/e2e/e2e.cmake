dt_add_test(NAME test_e2e_pytorch SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_e2e.c
            LABELS ref TIMEOUT 120)
