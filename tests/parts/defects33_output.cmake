# Issue 33, data loss and output policy (tests/cli_defects33_output_test.sh,
# one group each): OUT never a file of the input (shards, index, DCP files),
# convert --force into OUTDIR/ all or nothing under signals and failed
# writes (ENOSPC needs root for a small tmpfs: skipped otherwise), the mode
# of a replaced symlink entry, FILE '-' checked before it is spooled and
# bounded by --max-spool, FIFOs refused without blocking, one rule for sizes.
set(CKPT_DEFECTS33_OUTPUT ${CMAKE_CURRENT_SOURCE_DIR}/cli_defects33_output_test.sh)
foreach(group input batch enospc mode spool fifo sizes)
  add_test(NAME defects33.output.${group} COMMAND sh ${CKPT_DEFECTS33_OUTPUT} $<TARGET_FILE:ckpt>
           ${PROJECT_SOURCE_DIR} ${group})
  set_tests_properties(defects33.output.${group} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
