# PyTorch Mobile flatbuffer modules (src/formats/mobile.c): the files torch
# 1.13 and 2.6 wrote (tests/gen_mobile.py) against torch.jit.load's answers,
# every command on them, hostile flatbuffers built byte by byte, and the
# same files truncated and bit-flipped (test_mutate).
if(CKPT_PYTHON3)
  add_test(NAME mobile.fixtures COMMAND ${CKPT_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_fixtures.py
           $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/mobile)
  set_tests_properties(mobile.fixtures PROPERTIES TIMEOUT 300)
  add_test(NAME mobile.cli COMMAND ${CKPT_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/mobile/test_mobile.py
           $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/mobile)
  set_tests_properties(mobile.cli PROPERTIES TIMEOUT 600)
endif()
add_test(NAME mobile.mutate COMMAND test_mutate ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/mobile)
set_tests_properties(mobile.mutate PROPERTIES TIMEOUT 600)
