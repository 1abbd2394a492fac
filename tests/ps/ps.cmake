# The parameter-server strategy end to end (docs/PARAMETER_SERVER.md): equivalences with
# one process and with ddp, the staleness bound, checkpoints, a NaN skipped.
dt_add_cli_test(NAME cli_ps COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_ps.sh ${DT_PYTHON3} MPI
                TIMEOUT 300
                EXPECT "cli_ps: all checks passed")
# PowerSGD for ps pushes (src/parallel/ps_psgd.c), without MPI: payload sizes, factors cut to
# shards and read back, error feedback, warm start, a NaN's Q drawn afresh.
dt_add_test(NAME test_ps_psgd SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ps_psgd.c LABELS unit
            TIMEOUT 60)
# Top-k pushes cut into server shards (src/parallel/ps_codec.c), without MPI: each shard's
# own residual, sent values and decoding, over two pushes.
dt_add_test(NAME test_ps_codec SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ps_codec.c LABELS unit
            TIMEOUT 30)
# Top-k pushes over 2 servers against the same selection on 1 (a regression whose first
# shard's gradient is 0): the same bytes.
dt_add_cli_test(NAME cli_ps_topk_shards COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_ps_topk_shards.sh
                MPI TIMEOUT 120 EXPECT "cli_ps_topk_shards: all checks passed")
