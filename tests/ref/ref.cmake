# PyTorch reference tests (label ref): dtrain against the float64 results that gen_refs.py
# wrote into tests/ref/*.safetensors (`make refs` regenerates them; `make test` only reads
# them). They share the double-precision reference layers of tests/grad.
set(DT_REF_GRAD_DIR ${CMAKE_CURRENT_LIST_DIR}/../grad)
set(DT_REF_SUPPORT ${CMAKE_CURRENT_LIST_DIR}/ref_util.c ${DT_REF_GRAD_DIR}/ref_layers.c
    ${DT_REF_GRAD_DIR}/grad_util.c)

foreach(name layers loss optim optim_groups schedule init tfm gpt)
  dt_add_test(NAME test_ref_${name}
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ref_${name}.c ${DT_REF_SUPPORT}
              LABELS ref TIMEOUT 60)
  target_include_directories(test_ref_${name} PRIVATE ${DT_REF_GRAD_DIR})
endforeach()
