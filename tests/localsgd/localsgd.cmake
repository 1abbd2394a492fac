# Local SGD (src/parallel/localsgd.c): H = 1 is ddp, the replicas equal after each average
# and apart between them, the warm-up is ddp's, a NaN skipped together; dp 2 on 2 ranks,
# dp 2 x tp 2 and dp 2 x pp 2 on 4.
dt_add_mpi_test(NAME test_localsgd SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_localsgd.c NP 2 4
                TIMEOUT 120)
# The command line: H = 1's weights file against ddp's, the warm-up against ddp's, the bytes
# per step the metrics report, and the refusals.
dt_add_cli_test(NAME cli_localsgd MPI TIMEOUT 120
                COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_localsgd.sh ${DT_PYTHON3}
                EXPECT "cli_localsgd: all checks passed")
