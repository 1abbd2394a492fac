# The parameter-server strategy end to end (docs/PARAMETER_SERVER.md): equivalences with
# one process and with ddp, the staleness bound, checkpoints, a NaN skipped.
dt_add_cli_test(NAME cli_ps COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_ps.sh MPI TIMEOUT 300
                EXPECT "cli_ps: all checks passed")
