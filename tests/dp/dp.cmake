# Data-parallel equivalence: N ranks equal one process.
dt_add_mpi_test(NAME test_dp SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dp.c NP 1 2 3 LONG_NP 4
                TIMEOUT 240)
# A training run allocates nothing, on 2 ranks, under every OpenBLAS kernel set this CPU
# runs (test_dp_alloc_np2_<set>; OpenBLAS's AVX-512 kernels malloc where others do not).
# Label alloc: malloc is replaced, so no sanitizer build runs it (they replace malloc
# themselves).
add_executable(test_dp_alloc ${CMAKE_CURRENT_LIST_DIR}/test_dp_alloc.c
               ${PROJECT_SOURCE_DIR}/tests/support/alloc_count.c)
target_compile_options(test_dp_alloc PRIVATE ${DT_WARNINGS} ${DT_FLAGS})
target_link_libraries(test_dp_alloc PRIVATE dt_testsupport)
dt_add_coretype_tests(NAME test_dp_alloc_np2 MPI TIMEOUT 120 LABELS mpi alloc
                      COMMAND ${MPIEXEC_BIN} -np 2 --oversubscribe $<TARGET_FILE:test_dp_alloc>)
# The CLI under mpirun: a data-parallel run, and refusals that end the job (no hang).
# Label threads: one run trains a rank on 2 threads (`make test-tsan` runs it).
dt_add_cli_test(NAME cli_dp COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_dp.sh ${DT_PYTHON3} MPI
                TIMEOUT 120 LABELS threads)
