# Where the time goes: the straggler named, the phase table, and a trace of both ranks on one
# clock (python3 reads the JSON, as scripts/check-layers.py needs python3 already).
dt_add_cli_test(NAME cli_obs COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_obs.sh MPI TIMEOUT 120)
# The recorder: totals, events, a full buffer that drops and counts.
dt_add_test(NAME test_obs SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_obs.c LABELS unit TIMEOUT 30)
# dtrain plot: a metrics file, a trace and bench-comm output as SVG pictures (parsed as XML).
dt_add_cli_test(NAME cli_plot COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/cli_plot.sh MPI TIMEOUT 120)
