# Pipeline stages: the plan of which layer runs where (the pipeline itself is not built yet).
dt_add_test(NAME test_stages SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stages.c LABELS unit
            TIMEOUT 30)
