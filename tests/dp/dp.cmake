# Data-parallel equivalence: N ranks equal one process.
dt_add_mpi_test(NAME test_dp SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dp.c NP 1 2 3 4
                TIMEOUT 240)
# The step allocates nothing with the ring. Label alloc: malloc is replaced, so no
# sanitizer build runs it (they replace malloc themselves).
dt_add_mpi_test(NAME test_dp_alloc SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dp_alloc.c
                ${PROJECT_SOURCE_DIR}/tests/support/alloc_count.c NP 2 TIMEOUT 120 LABELS alloc)
# The CLI under mpirun: a data-parallel run, and refusals that end the job (no hang).
# Label threads: one run trains a rank on 2 threads (`make test-tsan` runs it).
dt_add_cli_test(NAME cli_dp COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_dp.sh MPI TIMEOUT 120
                LABELS threads)
