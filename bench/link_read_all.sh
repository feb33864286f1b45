#!/bin/sh
# bench/link_read_all.sh BUILD OUT - build bench/read_all.c against the static
# library BUILD/libckpt.a, with the libraries that library needs: those its
# ckpt.pc lists (Libs.private but libckpt.a, and Requires.private if any, asked of
# pkg-config), or, in a build without ckpt.pc (CKPT_INSTALL=OFF), zlib,
# jansson, the threads library and libdl when CMake found libarchive (which
# `ckpt scan` loads with dlopen(); nothing links libarchive itself).  A fixed
# "-lz -lpthread -lm" no longer links since jansson joined.
# Used by bench/run.sh; tests/parts/defects.cmake runs it on the test build.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
B=$1
OUT=$2

if [ -f "$B/ckpt.pc" ]; then
    # (less -l:libckpt.a, which --static links from there: linked below)
    libs=$(sed -n 's/^Libs\.private://p' "$B/ckpt.pc" | sed 's/-l:libckpt\.a//')
    req=$(pkg-config --print-requires-private "$B/ckpt.pc")
    if [ -n "$req" ]; then
        libs="$libs $(pkg-config --libs $req)"
    fi
else
    libs="-lz $(pkg-config --libs jansson) -pthread"
    if grep -q '^LIBARCHIVE_FOUND:INTERNAL=1' "$B/CMakeCache.txt" &&
        [ "$(uname -s)" = Linux ]; then
        libs="$libs -ldl" # dlopen(), in libc itself since glibc 2.34
    fi
fi
# shellcheck disable=SC2086 # $libs is a list of flags
${CC:-cc} -O2 -I "$REPO/include" "$HERE/read_all.c" "$B/libckpt.a" $libs -lm -o "$OUT"
