# The MPI test harness (dt_test_mpi.c): its cases pass at 1 and 2 ranks, and a rank that
# fails an assertion, or leaves a case while another waits for it in a collective, ends the
# job within 10 s (harness_fails_fast.sh plants both behind DT_TEST_PLANT).
dt_add_mpi_test(NAME test_mpi_harness SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mpi_harness.c
                NP 1 2 TIMEOUT 60)
add_test(NAME harness_fails_fast
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/harness_fails_fast.sh $<TARGET_FILE:test_mpi_harness>)
set_tests_properties(harness_fails_fast PROPERTIES LABELS mpi TIMEOUT 120 RESOURCE_LOCK mpi
                     ENVIRONMENT "${DT_TEST_ENV};MPIRUN=${MPIEXEC_BIN}")
