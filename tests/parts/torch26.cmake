# Files written by PyTorch 2.6 itself (tests/fixtures/torch26/, made by
# tests/gen_torch26.py in a torch 2.6 root) against torch 2.6's recorded
# answers: every dtype it saves (float8, uint16-64, complex32, the bits
# types), _rebuild_tensor_v3, conj/neg views, full models, optimizers,
# Lightning dicts, protocols 2/4/5, legacy saves, files without CRCs.
# CI needs no torch: the answers are committed.
if(CKPT_PYTHON3)
  add_test(NAME torch26.fixtures COMMAND ${CKPT_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_fixtures.py
           $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/torch26)
  set_tests_properties(torch26.fixtures PROPERTIES TIMEOUT 600)
  # info, verify, show --json and extract -d on the same files
  add_test(NAME torch26.cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/torch26_cli_test.sh
           $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/torch26)
  set_tests_properties(torch26.cli PROPERTIES TIMEOUT 600)
endif()

# The same files truncated and bit-flipped: clean results or clean errors
# (the conj/neg metadata and v3 paths under damage).
add_test(NAME torch26.mutate COMMAND test_mutate ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/torch26)
set_tests_properties(torch26.mutate PROPERTIES TIMEOUT 600)

# conj/neg views through the public API: flags, ranged reads from every
# byte offset, zero-copy refused.
add_executable(torch26_read_test torch26_read_test.c)
target_compile_definitions(torch26_read_test PRIVATE _POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)
target_compile_options(torch26_read_test PRIVATE ${CKPT_WARNINGS})
target_link_libraries(torch26_read_test PRIVATE ckpt_static)
add_test(NAME torch26.read COMMAND torch26_read_test
         ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/torch26/views_zip.pt)
