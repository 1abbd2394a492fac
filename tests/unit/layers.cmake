# The include graph follows docs/ARCHITECTURE.md's layer table (scripts/check-layers.py).
find_program(DT_LAYERS_PYTHON NAMES python3 REQUIRED)
add_test(NAME layers_include_graph
         COMMAND ${DT_LAYERS_PYTHON} ${PROJECT_SOURCE_DIR}/scripts/check-layers.py)
set_tests_properties(layers_include_graph PROPERTIES LABELS unit TIMEOUT 30)
