# Pipeline stages: the plan of which layer runs where (the pipeline itself is not built yet).
dt_add_test(NAME test_stages SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stages.c LABELS unit
            TIMEOUT 30)
# A model cut into stages computes what the whole model computes, bit for bit.
dt_add_test(NAME test_stage_model SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stage_model.c
            LABELS unit TIMEOUT 30)
