dt_add_test(NAME test_config SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_config.c LABELS unit
            TIMEOUT 30)
