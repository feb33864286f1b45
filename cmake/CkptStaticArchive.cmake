# ckpt_public_static_archive(<target> <object-library>...)
#
# A static library whose archive exports only the public ckpt_* symbols.
# The objects are compiled with hidden visibility, so the internal ck_*
# functions are global but hidden; an archive of the plain objects would
# still expose them to whatever links it (and clash with a user's own
# ck_* names).  Instead the objects are partially linked into one
# relocatable object (ld -r) in which objcopy makes every hidden symbol
# local (--localize-hidden); the archive holds that one object.
#
# Where ld -r or objcopy is missing (not a GNU/ELF toolchain) the archive
# holds the objects as they are.
function(ckpt_public_static_archive target)
  set(merged ${CMAKE_CURRENT_BINARY_DIR}/${target}_public.o)
  set(objects)
  foreach(lib ${ARGN})
    list(APPEND objects $<TARGET_OBJECTS:${lib}>)
  endforeach()
  if(CMAKE_LINKER AND CMAKE_OBJCOPY AND NOT APPLE AND NOT WIN32)
    add_custom_command(OUTPUT ${merged}
      COMMAND ${CMAKE_LINKER} -r -o ${merged}.tmp ${objects}
      COMMAND ${CMAKE_OBJCOPY} --localize-hidden ${merged}.tmp ${merged}
      COMMAND ${CMAKE_COMMAND} -E remove ${merged}.tmp
      DEPENDS ${ARGN} ${objects}
      COMMAND_EXPAND_LISTS
      COMMENT "Linking ${target}'s objects into one, internal symbols made local"
      VERBATIM)
    add_library(${target} STATIC ${merged})
    set_source_files_properties(${merged} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
    set_target_properties(${target} PROPERTIES LINKER_LANGUAGE C)
  else()
    add_library(${target} STATIC ${objects})
  endif()
endfunction()
