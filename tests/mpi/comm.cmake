# The comm layer's tests (issue 11). MPI tests run at 1-4 ranks (5 under the slow label),
# oversubscribed on 2 cores, one at a time (dt_add_mpi_test's resource lock).
set(DT_COMM_TEST_SUPPORT ${CMAKE_CURRENT_LIST_DIR}/comm_test_util.c
    ${CMAKE_CURRENT_LIST_DIR}/comm_cases.c)

dt_add_mpi_test(NAME test_comm_coll SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_comm_coll.c
                ${DT_COMM_TEST_SUPPORT} NP 1 2 3 4 SLOW_NP 5 TIMEOUT 120)
dt_add_mpi_test(NAME test_comm_det SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_comm_det.c
                ${DT_COMM_TEST_SUPPORT} NP 1 2 3 4 SLOW_NP 5 TIMEOUT 120)
