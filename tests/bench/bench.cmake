# The benchmark's start-up figures (bench/bench_train.c): the data loading and the start-up
# read in one process on one clock, so their difference cannot come out negative.
if(NOT DT_PYTHON3)
  find_program(DT_PYTHON3 NAMES python3)
endif()
dt_add_cli_test(NAME bench_startup TIMEOUT 30
                COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/startup.sh $<TARGET_FILE:bench_train>
                        ${DT_PYTHON3})

# bench/summarise.py on runs a time limit cut before their summaries (a lent machine's),
# --merge, and bench/gpt_layouts.py's grid layouts: synthetic JSON lines, no benchmark run.
add_test(NAME bench_summarise_partial
         COMMAND ${DT_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/summarise_partial.py ${PROJECT_SOURCE_DIR})
set_tests_properties(bench_summarise_partial PROPERTIES LABELS unit TIMEOUT 60)
