# Training on data.kind text (issue 37): the trainer's windows, per-token loss, validation
# and eval_every (C), and the CLI end to end: ddp on 2 ranks equals one process, a resumed
# run equals an uninterrupted one, the metrics' eval records and the refusals.
dt_add_test(NAME test_text_train SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_text_train.c LABELS unit
            TIMEOUT 30)
dt_add_cli_test(NAME cli_text COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_text.sh ${DT_PYTHON3} MPI
                TIMEOUT 180)
# A GPT's planned memory within 10% of the design's minimum (docs/ARCHITECTURE.md, "A GPT's
# memory"), the minimum from the config alone.
dt_add_test(NAME test_gpt_memory SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpt_memory.c LABELS unit
            TIMEOUT 30)
# The GPT across layouts against one process, from the files a user gets (issue 38's tests,
# tests/text/gpt_layouts.py): tp 2 and 3 (heads 2 + 1, one each), pp 2 under GPipe and
# 1F1B and pp 3 with the tied table on two stages (M not a multiple of P), round robin, dp 2
# x tp 2, dp 2 x tp 2 with sequence parallelism, dp 2 x pp 2 with ZeRO-1: 20 SGD steps
# within 1e-5 with every copy checked bitwise equal
# (--check-replicas), AdamW losses within 1e-4, clipping on every step, recompute per block
# bit-exact, hf export, a dp 2 + ZeRO-1 set resumed at tp 2 x pp 2, tp 2 x pp 2 with
# sequence parallelism, and every layout's traced bytes per step, rank by rank and group by
# group, equal to `dtrain plan --json`'s. The long tier: dp 2 x tp 2 x pp 2 on 8 ranks and
# further combinations.
dt_add_cli_test(NAME cli_gpt_layouts MPI TIMEOUT 300
                COMMAND ${DT_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/gpt_layouts.py --dtrain
                        $<TARGET_FILE:dtrain> --mpirun ${MPIEXEC_BIN} --tier test)
dt_add_cli_test(NAME cli_gpt_layouts_long MPI TIMEOUT 900 LABELS long
                COMMAND ${DT_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/gpt_layouts.py --dtrain
                        $<TARGET_FILE:dtrain> --mpirun ${MPIEXEC_BIN} --tier long)
# `dtrain train`'s per-rank memory lines (src/cli/train_memory.c): one process holds the whole
# model; at tp 2 each rank holds half of every split tensor and the AdamW state follows;
# sequence parallelism keeps fewer per-position activations.
dt_add_cli_test(NAME cli_rank_memory COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_rank_memory.sh MPI
                TIMEOUT 60)
