# Issue 14 (helper F, memory and speed): the arena's in-place growth and
# give-back, the compact string map, batched SETITEMS/APPENDS, and the empty
# argument tuples the pickle machine gives back.  The pickle machine alone:
# common + pickle layers, as unit.test_pickle.
add_executable(test_perf_memory ${CMAKE_CURRENT_SOURCE_DIR}/perf/test_memory.c
               $<TARGET_OBJECTS:ckpt_common> $<TARGET_OBJECTS:ckpt_pickle>)
target_link_libraries(test_perf_memory PRIVATE ZLIB::ZLIB Threads::Threads)
target_include_directories(test_perf_memory PRIVATE ${PROJECT_SOURCE_DIR}/src
                           ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(test_perf_memory PRIVATE _POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)
add_test(NAME perf.memory COMMAND test_perf_memory)
set_tests_properties(perf.memory PROPERTIES TIMEOUT 120)

# A 4 MiB data.pkl read while the machine gives its pages back behind it
# (stored, deflated, standard input): torch 1.13's names, layouts and bytes.
if(EXISTS /usr/bin/python3)
  add_test(NAME perf.discard COMMAND /usr/bin/python3
           ${CMAKE_CURRENT_SOURCE_DIR}/perf/discard_test.py $<TARGET_FILE:ckpt>)
  set_tests_properties(perf.discard PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# The same given-back pages through the library: a hand-built 4 MiB data.pkl
# opened by path, mapped and from memory.
add_executable(test_perf_discard_open ${CMAKE_CURRENT_SOURCE_DIR}/perf/test_discard_open.c)
target_link_libraries(test_perf_discard_open PRIVATE ckpt_internal)
target_include_directories(test_perf_discard_open PRIVATE ${PROJECT_SOURCE_DIR}/src
                           ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(test_perf_discard_open PRIVATE _POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)
add_test(NAME perf.discard_open COMMAND test_perf_discard_open)
set_tests_properties(perf.discard_open PROPERTIES TIMEOUT 120)

# What an open makes resident per tensor (issue 14): a bound, not a timing.
add_executable(test_perf_open_bytes ${CMAKE_CURRENT_SOURCE_DIR}/perf/test_open_bytes.c)
target_link_libraries(test_perf_open_bytes PRIVATE ckpt_internal)
target_include_directories(test_perf_open_bytes PRIVATE ${PROJECT_SOURCE_DIR}/src
                           ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(test_perf_open_bytes PRIVATE _POSIX_C_SOURCE=200809L _DEFAULT_SOURCE)
add_test(NAME perf.open_bytes COMMAND test_perf_open_bytes)
set_tests_properties(perf.open_bytes PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
