# `ckpt diff` against torch's answers (tests/gen_diff.py writes the pairs
# with Debian's torch at test time; skipped without it).
if(EXISTS /usr/bin/python3)
  add_test(NAME diff COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/diff_test.sh $<TARGET_FILE:ckpt>
           ${PROJECT_SOURCE_DIR})
  set_tests_properties(diff PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# `ckpt convert FILE OUTDIR/`: Hugging Face's layout (shards as
# huggingface_hub splits them, the index as transformers writes it), tied
# weights, complex64, read-ahead (--jobs) against torch 1.13.
if(EXISTS /usr/bin/python3)
  add_test(NAME convert_folder COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/convert_folder_test.py
           $<TARGET_FILE:ckpt>)
  set_tests_properties(convert_folder PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
