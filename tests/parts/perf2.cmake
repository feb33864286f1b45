# Issue 14 (helper F2): strided views wider than the read buffer read by one
# pass over their span, against torch 1.13's bytes (skipped without torch).
if(EXISTS /usr/bin/python3)
  add_test(NAME perf.gather_views COMMAND /usr/bin/python3
           ${CMAKE_CURRENT_SOURCE_DIR}/perf/gather_views_test.py $<TARGET_FILE:ckpt>)
  set_tests_properties(perf.gather_views PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
