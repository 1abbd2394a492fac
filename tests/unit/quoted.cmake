# Every figure a benchmark summary in README.md or docs/BENCHMARKS.md quotes is in the
# table of docs/BENCHMARKS.md it names (scripts/check-quoted.py; docs/BENCHMARKS.md, "How
# the figures flow").
find_program(DT_QUOTED_PYTHON NAMES python3 REQUIRED)
add_test(NAME docs_quoted_numbers
         COMMAND ${DT_QUOTED_PYTHON} ${PROJECT_SOURCE_DIR}/scripts/check-quoted.py)
set_tests_properties(docs_quoted_numbers PROPERTIES LABELS unit TIMEOUT 30)
