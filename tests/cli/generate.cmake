# dtrain generate and dtrain export --format hf on the tiny GPT of tests/infer/gpt_fixture.c
# (tests/cli/generate.sh): the sources agree, the context rule past block_size, a cut
# prompt, one seed's bytes twice, the export's files and names, and every refusal.
foreach(case run export errors)
  dt_add_cli_test(NAME cli_generate_${case} TIMEOUT 60
                  COMMAND sh ${DT_CLI_DIR}/generate.sh $<TARGET_FILE:gpt_fixture> ${DT_PYTHON3}
                          ${case})
endforeach()
