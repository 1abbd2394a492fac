# Federated partitions and round sampling (include/dtrain/fed.h): pure functions, no MPI.
dt_add_test(NAME test_fed_partition SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fed_partition.c
            LABELS unit TIMEOUT 60)
# The fedavg strategy end to end: FedAvg's identity with large-batch SGD, the same bytes on
# 1-3 ranks, sampling, checkpoints, the partition report, refusals.
dt_add_cli_test(NAME cli_fedavg MPI TIMEOUT 240
                COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_fedavg.sh ${DT_PYTHON3}
                EXPECT "cli_fedavg: all checks passed")
# FedAvg's weighted average on a case worked by hand.
dt_add_test(NAME test_fed_average SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fed_average.c
            LABELS unit TIMEOUT 30)
# FedAvg's identity over a strict subset: 3 of 6 clients of unequal sizes, one local
# full-batch step each, against one large-batch step over their samples (no MPI).
dt_add_test(NAME test_fed_subset SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fed_subset.c
            LABELS unit TIMEOUT 60)
