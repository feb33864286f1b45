# `ckpt diff` against torch's answers (tests/gen_diff.py writes the pairs
# with Debian's torch at test time; skipped without it).
if(EXISTS /usr/bin/python3)
  add_test(NAME diff COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/diff_test.sh $<TARGET_FILE:ckpt>
           ${PROJECT_SOURCE_DIR})
  set_tests_properties(diff PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
