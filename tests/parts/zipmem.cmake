# Issue 14 (helper Z): the compact ZIP index (derived name lengths, local
# header and central directory offsets) against torch 1.13's archives
# rewritten with comments, extra fields and duplicate records (skipped
# without torch).
if(EXISTS /usr/bin/python3)
  add_test(NAME zipmem.index COMMAND /usr/bin/python3
           ${CMAKE_CURRENT_SOURCE_DIR}/zipmem/zipmem_test.py $<TARGET_FILE:ckpt>)
  set_tests_properties(zipmem.index PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
