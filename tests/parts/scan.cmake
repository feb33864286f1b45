# ckpt scan (issue 12): member, bytes, npy and after-STOP labels, standard
# input, and the called_unknown count of --json (tests/scan/labels_test.sh).
add_test(NAME scan_labels COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scan/labels_test.sh
         $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/scan)

# libarchive is loaded with dlopen() by `ckpt scan` only for an archive that
# is not a torch.save file: a listing maps none of it (/proc/self/maps in a
# program linked to libckpt.a; the loader's LD_DEBUG report for build/ckpt),
# and a scan of a .tar.gz still reads its members.
add_executable(test_lazy_libarchive ${CMAKE_CURRENT_SOURCE_DIR}/scan/lazy_libarchive_test.c)
target_compile_definitions(test_lazy_libarchive PRIVATE _POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)
target_compile_options(test_lazy_libarchive PRIVATE ${CKPT_WARNINGS})
if(CKPT_HAVE_LIBARCHIVE)
  target_compile_definitions(test_lazy_libarchive PRIVATE CKPT_TEST_HAVE_LIBARCHIVE=1)
  set(CKPT_TEST_HAVE_LIBARCHIVE 1)
else()
  set(CKPT_TEST_HAVE_LIBARCHIVE 0)
endif()
target_link_libraries(test_lazy_libarchive PRIVATE ckpt_static)
add_test(NAME scan_lazy_libarchive COMMAND test_lazy_libarchive
         ${PROJECT_SOURCE_DIR}/examples/sample.pt ${CMAKE_CURRENT_SOURCE_DIR}/scan/files)
add_test(NAME scan_lazy_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scan/lazy_cli_test.sh
         $<TARGET_FILE:ckpt> ${PROJECT_SOURCE_DIR}/examples/sample.pt
         ${CMAKE_CURRENT_SOURCE_DIR}/scan/files ${CKPT_TEST_HAVE_LIBARCHIVE})
set_tests_properties(scan_lazy_libarchive scan_lazy_cli PROPERTIES SKIP_RETURN_CODE 77)

# The pickle machine's Python 2 names (src/pickle/compat_pickle.inc) are
# CPython's _compat_pickle NAME_MAPPING and IMPORT_MAPPING, whole: the
# table equals the module of the python3 the tests run with.
if(CKPT_PYTHON3)
  add_test(NAME compat_pickle_table COMMAND ${CKPT_PYTHON3}
           ${PROJECT_SOURCE_DIR}/src/pickle/gen_compat_pickle.py --check
           ${PROJECT_SOURCE_DIR}/src/pickle/compat_pickle.inc)
endif()

# issue 33: a file not read to its end is never "safe" (--json verdict),
# and a dangerous file exits 3 even when its report cannot be written.
add_test(NAME scan_verdict_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scan/verdict_cli_test.sh
         $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/scan ${PROJECT_SOURCE_DIR}/examples/sample.pt)
