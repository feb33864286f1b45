# Multi-file checkpoints (shard indexes, DCP folders) and safetensors input:
# torch 2.6's answers (tests/gen_sharded.py) and malformed folders.
if(CKPT_PYTHON3)
  add_test(NAME sharded_fixtures COMMAND ${CKPT_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_fixtures.py
           $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sharded)
  add_test(NAME sharded_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/sharded_test.sh
           $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sharded)
  set_tests_properties(sharded_cli PROPERTIES ENVIRONMENT PYTHON3=${CKPT_PYTHON3})
endif()
# convert and diff across layouts, against torch's dcp_to_torch_save output
if(CKPT_PYTHON3)
  add_test(NAME sharded_convert COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/sharded_convert_test.sh
           $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sharded)
endif()
