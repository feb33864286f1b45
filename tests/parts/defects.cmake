# CLI defects left by session 4 (tests/cli_defects5_test.sh, one group each):
# diff's exit status on a failed write, convert's message for unreadable
# tensors, show --json's TorchScript constants and extra files, convert
# --force and the shards of an earlier export, the export's CRC thread on
# records over 64 KiB (torch writes the file; under ThreadSanitizer this was
# a crash), and the benchmark's read_all linked against libckpt.a.
set(CKPT_DEFECTS5 ${CMAKE_CURRENT_SOURCE_DIR}/cli_defects5_test.sh)
add_test(NAME defects5.diff COMMAND sh ${CKPT_DEFECTS5} $<TARGET_FILE:ckpt> ${PROJECT_SOURCE_DIR} diff)
if(CKPT_PYTHON3)
  foreach(group unreadable show stale thread)
    add_test(NAME defects5.${group} COMMAND sh ${CKPT_DEFECTS5} $<TARGET_FILE:ckpt>
             ${PROJECT_SOURCE_DIR} ${group})
    set_tests_properties(defects5.${group} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                         ENVIRONMENT CKPT_TEST_PYTHON=${CKPT_PYTHON3})
  endforeach()
  # plain builds only: the link carries no sanitizer flags
  if(NOT CKPT_SANITIZE AND NOT CKPT_TSAN)
    add_test(NAME defects5.bench COMMAND sh ${CKPT_DEFECTS5} $<TARGET_FILE:ckpt>
             ${PROJECT_SOURCE_DIR} bench)
    set_tests_properties(defects5.bench PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                         ENVIRONMENT CKPT_TEST_PYTHON=${CKPT_PYTHON3})
  endif()
endif()
