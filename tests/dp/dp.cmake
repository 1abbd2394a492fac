# Data-parallel equivalence: N ranks equal one process.
dt_add_mpi_test(NAME test_dp SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dp.c NP 1 2 3 4
                TIMEOUT 240)
# The step allocates nothing with the ring (malloc is replaced: not an ASan test).
dt_add_mpi_test(NAME test_dp_alloc SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dp_alloc.c
                ${PROJECT_SOURCE_DIR}/tests/support/alloc_count.c NP 2 TIMEOUT 120)
# The CLI under mpirun: a data-parallel run, and refusals that end the job (no hang).
dt_add_cli_test(NAME cli_dp COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_dp.sh MPI TIMEOUT 120)
