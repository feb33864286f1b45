# TorchScript (torch.jit.save 1.x/2.x, lite .ptl) and torch.export .pt2
# archives, against the answers of the torch that wrote them
# (tests/gen_script.py), and a differential test against torch.jit.load.
if(CKPT_PYTHON3)
  add_test(NAME script.fixtures COMMAND ${CKPT_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/test_fixtures.py
           $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/script)
  set_tests_properties(script.fixtures PROPERTIES TIMEOUT 300)
endif()
if(EXISTS /usr/bin/python3 AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/difftest_script.py)
  add_test(NAME script.difftest COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/difftest_script.py
           $<TARGET_FILE:ckpt>)
  set_tests_properties(script.difftest PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
# The TorchScript and .pt2 fixtures truncated and bit-flipped (test_mutate
# of tests/CMakeLists.txt): the code/ parser and the nested archives.
add_test(NAME script.mutate COMMAND test_mutate ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/script)
set_tests_properties(script.mutate PROPERTIES TIMEOUT 600)
# constants.pkl and _extra_files as values (ckpt_part) against torch's answers.
add_executable(test_script_constants script/test_constants.c)
target_link_libraries(test_script_constants PRIVATE ckpt_internal)
target_include_directories(test_script_constants PRIVATE ${PROJECT_SOURCE_DIR}/include)
set(SCRIPT_FX ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/script)
add_test(NAME script.constants COMMAND test_script_constants ${SCRIPT_FX}/consts_t1.pt
         ${SCRIPT_FX}/consts_t2.pt ${SCRIPT_FX}/model_t1.pt ${SCRIPT_FX}/model_t2.pt)
# Hostile TorchScript and .pt2 archives crafted byte by byte.
if(CKPT_PYTHON3)
  add_test(NAME script.hostile COMMAND ${CKPT_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/script/test_hostile.py
           $<TARGET_FILE:ckpt>)
  set_tests_properties(script.hostile PROPERTIES TIMEOUT 300)
endif()
