# Issue 13 (helper H): a checkpoint of several files verified part by part
# (ckpt_verify_part), on threads of the caller's; `ckpt verify --jobs`
# over the parts prints what one thread prints.
add_executable(test_verify_part ${CMAKE_CURRENT_SOURCE_DIR}/parverify/test_verify_part.c)
target_link_libraries(test_verify_part PRIVATE ckpt_internal Threads::Threads)
target_include_directories(test_verify_part PRIVATE ${PROJECT_SOURCE_DIR}/src
                           ${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}/unit)
target_compile_definitions(test_verify_part PRIVATE _POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)
add_test(NAME parverify.unit COMMAND test_verify_part)
set_tests_properties(parverify.unit PROPERTIES TIMEOUT 120)
if(CKPT_PYTHON3)
  add_test(NAME parverify.cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/parverify_test.sh
           $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sharded)
  set_tests_properties(parverify.cli PROPERTIES ENVIRONMENT PYTHON3=${CKPT_PYTHON3})
endif()
