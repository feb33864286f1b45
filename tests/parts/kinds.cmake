# Tensor kinds (quantized, sparse, meta, nested, numpy, mixed files) written by torch
# 1.13 (*_t1) and torch 2.6 (*_t2) with tests/gen_kinds.py, against their
# recorded answers.
if(CKPT_PYTHON3)
  add_test(NAME fixtures_kinds COMMAND ${CKPT_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_fixtures.py
           $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/kinds)
  set_tests_properties(fixtures_kinds PROPERTIES TIMEOUT 600)
endif()

# Fresh kind files from the torch on this machine (skipped without torch).
if(EXISTS /usr/bin/python3)
  add_test(NAME difftest_kinds COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/difftest_kinds.py
           $<TARGET_FILE:ckpt>)
  set_tests_properties(difftest_kinds PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
