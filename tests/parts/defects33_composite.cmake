# Issue 33, composite inputs and safetensors (tests/cli_defects33_composite_test.sh,
# one group each): the tied weights `ckpt convert` writes once read back as
# the source (diff, ls, cat), and folders of 1,200 .distcp files or shards
# under `ulimit -n 64`.  The bounded-work unit tests are tests/unit/
# test_dcp_bounds.c, test_parts_lazy.c and test_st_many.c.
if(CKPT_PYTHON3)
  foreach(group tied fds)
    add_test(NAME defects33.composite.${group} COMMAND sh
             ${CMAKE_CURRENT_SOURCE_DIR}/cli_defects33_composite_test.sh $<TARGET_FILE:ckpt>
             ${PROJECT_SOURCE_DIR} ${group})
    set_tests_properties(defects33.composite.${group} PROPERTIES TIMEOUT 300
                         ENVIRONMENT CKPT_TEST_PYTHON=${CKPT_PYTHON3})
  endforeach()
endif()
# (slow under the sanitizers: files by the thousand, opened again and again)
set_tests_properties(unit.test_dcp_bounds unit.test_parts_lazy unit.test_st_many PROPERTIES
                     TIMEOUT 600)
