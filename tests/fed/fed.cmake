# Federated partitions and round sampling (include/dtrain/fed.h): pure functions, no MPI.
dt_add_test(NAME test_fed_partition SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fed_partition.c
            LABELS unit TIMEOUT 60)
