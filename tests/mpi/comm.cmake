# The comm layer's tests. MPI tests run at 1-4 ranks (the collectives) or 2-3 ranks in
# `make test`, and at 4 and 5 in the long tier,
# oversubscribed on 2 cores, one at a time (dt_add_mpi_test's resource lock).
set(DT_COMM_TEST_SUPPORT ${CMAKE_CURRENT_LIST_DIR}/comm_test_util.c
    ${CMAKE_CURRENT_LIST_DIR}/comm_cases.c)

# The single-process world without MPI: a plain unit test.
dt_add_test(NAME test_comm_self SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_comm_self.c LABELS unit
            TIMEOUT 30)

dt_add_mpi_test(NAME test_comm_coll SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_comm_coll.c
                ${DT_COMM_TEST_SUPPORT} NP 1 2 3 4 LONG_NP 5 TIMEOUT 120)
dt_add_mpi_test(NAME test_comm_det SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_comm_det.c
                ${DT_COMM_TEST_SUPPORT} NP 1 2 3 LONG_NP 4 5 TIMEOUT 120)
# It leaves MPI operations that never complete, by design: under LeakSanitizer what Open
# MPI holds for them is suppressed too (tests/mpi/lsan_watchdog.supp says why).
set(DT_WATCHDOG_ENV)
if(DT_SANITIZE)
  set(DT_WATCHDOG_ENV
      "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan_watchdog.supp:print_suppressions=0")
endif()
dt_add_mpi_test(NAME test_comm_watchdog SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_comm_watchdog.c
                ${DT_COMM_TEST_SUPPORT} NP 2 3 LONG_NP 4 5 TIMEOUT 60 ENV ${DT_WATCHDOG_ENV})
dt_add_mpi_test(NAME test_comm_check SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_comm_check.c
                ${DT_COMM_TEST_SUPPORT} NP 2 3 LONG_NP 4 5 TIMEOUT 60)

# Programs run by shell scripts (not by dt_add_mpi_test): built like the tests.
function(dt_comm_program name)
  add_executable(${name} ${ARGN})
  target_compile_options(${name} PRIVATE ${DT_WARNINGS} ${DT_FLAGS})
  target_link_libraries(${name} PRIVATE dt_testsupport)
endfunction()

dt_comm_program(test_comm_kill ${CMAKE_CURRENT_LIST_DIR}/test_comm_kill.c)
# The scripts print their verdict line only when every check passed (EXPECT ignores the
# exit status).
foreach(np 2 4)
  dt_add_cli_test(NAME test_comm_kill_np${np} MPI LABELS mpi TIMEOUT 30
                  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/comm_kill.sh ${MPIEXEC_BIN}
                          $<TARGET_FILE:test_comm_kill> ${np}
                  EXPECT "killed rank ended the job")
endforeach()

# bench-comm through its entry point (src/cli/cmd_bench_comm.c), at small sizes.
dt_comm_program(bench_comm_driver ${CMAKE_CURRENT_LIST_DIR}/bench_comm_driver.c
                ${PROJECT_SOURCE_DIR}/src/cli/cmd_bench_comm.c
                ${PROJECT_SOURCE_DIR}/src/cli/cli_number.c)
target_include_directories(bench_comm_driver PRIVATE ${PROJECT_SOURCE_DIR}/src/cli)
target_compile_definitions(bench_comm_driver PRIVATE _POSIX_C_SOURCE=200809L)
foreach(np 2 4)
  dt_add_cli_test(NAME test_bench_comm_np${np} MPI LABELS mpi TIMEOUT 120
                  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/bench_comm.sh ${MPIEXEC_BIN}
                          $<TARGET_FILE:bench_comm_driver> ${np}
                  EXPECT "bench-comm ok")
endforeach()
