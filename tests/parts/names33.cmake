# Issue 33, names and CLI text (tests/cli_defects33_names_test.sh, one group
# each): names are byte strings (a NUL in a key), keys that flatten to one
# name, bidi controls in extract -d, file names that are not UTF-8 in
# --json, --key as a path of keys in every command.  The fixtures and
# torch 1.13's answers are in tests/fixtures/names33 (tests/gen_names33.py);
# the test needs python3 only to read them (77 without).
if(CKPT_PYTHON3)
  set(CKPT_NAMES33 ${CMAKE_CURRENT_SOURCE_DIR}/cli_defects33_names_test.sh)
  foreach(group nul clash bidi file key)
    add_test(NAME names33.${group} COMMAND sh ${CKPT_NAMES33} $<TARGET_FILE:ckpt>
             ${PROJECT_SOURCE_DIR} ${group})
    set_tests_properties(names33.${group} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                         ENVIRONMENT CKPT_TEST_PYTHON=${CKPT_PYTHON3})
  endforeach()
endif()
