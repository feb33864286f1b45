# ckpt scan (issue 12): member, bytes, npy and after-STOP labels, standard
# input, and the called_unknown count of --json (tests/scan/labels_test.sh).
add_test(NAME scan_labels COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/scan/labels_test.sh
         $<TARGET_FILE:ckpt> ${CMAKE_CURRENT_SOURCE_DIR}/scan)
