# Pipeline stages: the plan of which layer runs where.
dt_add_test(NAME test_stages SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stages.c LABELS unit
            TIMEOUT 30)
# A model cut into stages computes what the whole model computes, bit for bit.
dt_add_test(NAME test_stage_model SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stage_model.c
            LABELS unit TIMEOUT 30)
# Pipeline parallelism: 2 ranks are pp 2, 3 ranks pp 3, 4 ranks dp 2 x pp 2 and
# tp 2 x pp 2; GPipe and 1F1B each equal single-process training.
dt_add_mpi_test(NAME test_pp SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pp.c NP 2 3 LONG_NP 4 TIMEOUT 300)
# The CLI: --explain-layout's stages, pp 2 on the MLP bit for bit against one process, whole
# weights across layouts, refusals without a hang.
dt_add_cli_test(NAME cli_pp COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_pp.sh MPI TIMEOUT 180)
# Activation recompute changes no bit: models with and without it, micro-batches in rows,
# 20 training steps; the kept activations are the segments' first boundaries.
dt_add_test(NAME test_recompute SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_recompute.c LABELS unit
            TIMEOUT 120)
# Stages of separate runs (round-robin placement) compute what the whole model computes.
dt_add_test(NAME test_stage_runs SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stage_runs.c
            LABELS unit TIMEOUT 30)
# The pipeline's orders, compared as text ("0F0 0F1 0B0 ..."): textbook GPipe and 1F1B for
# contiguous stages; the text form parses back and bad text is refused by position;
# round-robin orders that run to the end under the pipeline's waits. Reads an internal header.
dt_add_test(NAME test_pipe_plan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pipe_plan.c LABELS unit
            TIMEOUT 30)
target_include_directories(test_pipe_plan PRIVATE ${PROJECT_SOURCE_DIR}/src)
