# Fuzz harnesses for the input readers (tests/fuzz/fuzz_<reader>.c). Every build replays
# the committed corpus, crash reproducers included, through each harness: test
# fuzz_<reader>_replay, label unit, so `make test-asan` replays it under the sanitizers.
# With DT_FUZZ=ON (clang) the libFuzzer executables fuzz_<reader> are built as well;
# `make fuzz` runs them (tests/fuzz/run.sh).
set(DT_FUZZ_READERS idx csv config safetensors manifest)
set(DT_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})

# dt_add_fuzz_target(READER r): the libFuzzer executable fuzz_r. Its main() is libFuzzer's;
# the library and the harness carry the coverage instrumentation (DT_FLAGS under DT_FUZZ).
function(dt_add_fuzz_target)
  cmake_parse_arguments(F "" "READER" "" ${ARGN})
  add_executable(fuzz_${F_READER} ${DT_FUZZ_DIR}/fuzz_${F_READER}.c ${DT_FUZZ_DIR}/fuzz_util.c)
  target_compile_options(fuzz_${F_READER} PRIVATE ${DT_WARNINGS} ${DT_FLAGS})
  target_compile_definitions(fuzz_${F_READER} PRIVATE _POSIX_C_SOURCE=200809L)
  target_link_options(fuzz_${F_READER} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(fuzz_${F_READER} PRIVATE dtrain_static ZLIB::ZLIB)
endfunction()

foreach(r IN LISTS DT_FUZZ_READERS)
  dt_add_test(NAME fuzz_${r}_replay
              SOURCES ${DT_FUZZ_DIR}/fuzz_${r}.c ${DT_FUZZ_DIR}/fuzz_util.c
                      ${DT_FUZZ_DIR}/replay_main.c
              LABELS unit TIMEOUT 60 ARGS ${DT_FUZZ_DIR}/corpus/${r} LIBS ZLIB::ZLIB)
  if(DT_FUZZ)
    dt_add_fuzz_target(READER ${r})
  endif()
endforeach()
