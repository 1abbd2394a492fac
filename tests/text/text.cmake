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
