dt_add_test(NAME test_core SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_core.c LABELS unit TIMEOUT 30)
