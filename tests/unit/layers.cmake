# The include graph follows docs/ARCHITECTURE.md's layer table (scripts/check-layers.py).
find_program(DT_LAYERS_PYTHON NAMES python3 REQUIRED)
add_test(NAME layers_include_graph
         COMMAND ${DT_LAYERS_PYTHON} ${PROJECT_SOURCE_DIR}/scripts/check-layers.py)
set_tests_properties(layers_include_graph PROPERTIES LABELS unit TIMEOUT 30)

# The trainer and the CLI ask a strategy, never test which one runs
# (scripts/check-strategy.py; docs/ARCHITECTURE.md, "Adding a strategy").
add_test(NAME strategy_no_kind_tests
         COMMAND ${DT_LAYERS_PYTHON} ${PROJECT_SOURCE_DIR}/scripts/check-strategy.py)
set_tests_properties(strategy_no_kind_tests PROPERTIES LABELS unit TIMEOUT 30)
