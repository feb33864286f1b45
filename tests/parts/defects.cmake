# CLI defects left by session 4 (tests/cli_defects5_test.sh, one group each):
# diff's exit status on a failed write.
set(CKPT_DEFECTS5 ${CMAKE_CURRENT_SOURCE_DIR}/cli_defects5_test.sh)
add_test(NAME defects5.diff COMMAND sh ${CKPT_DEFECTS5} $<TARGET_FILE:ckpt> ${PROJECT_SOURCE_DIR} diff)
