# Data-parallel equivalence (issue 12): N ranks equal one process.
dt_add_mpi_test(NAME test_dp SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dp.c NP 1 2 3 4
                TIMEOUT 240)
# The step allocates nothing with the ring (malloc is replaced: not an ASan test).
dt_add_mpi_test(NAME test_dp_alloc SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dp_alloc.c
                ${PROJECT_SOURCE_DIR}/tests/support/alloc_count.c NP 2 TIMEOUT 120)
