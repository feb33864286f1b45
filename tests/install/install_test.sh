#!/bin/sh
# install_test.sh CMAKE BUILD_DIR SOURCE_DIR LIBDIR CC WORK [FLAGS]
#
# `cmake --install BUILD_DIR --prefix` into WORK, then the installed tree is
# moved elsewhere (the package and ckpt.pc must not depend on where it was
# installed) and used the two ways the README says:
#   - a CMake project (tests/install/consumer) with find_package(ckpt) links
#     examples/list.c against ckpt::ckpt and ckpt::ckpt_static;
#   - `cc list.c $(pkg-config --cflags --libs ckpt)` (NEEDED libckpt.so), and
#     with --static: libckpt.a linked in, no NEEDED libckpt.so (readelf -d),
#     and the program still runs once libckpt.so is deleted from the tree
#     (when the shared one no longer starts); and fully static (cc -static).
# And a parent project that uses add_subdirectory is configured
# (tests/install/subproject).
# Each program must print examples/list.expected for examples/sample.pt.
# FLAGS (sanitizer flags of the build) are passed to the compilers.
# READELF (environment; default readelf) reads the programs' dynamic section.
cmake=$1 build=$2 src=$3 libdir=$4 cc=$5 work=$6 flags=$7
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
nok() { echo "not ok - $*"; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
run_example() { # label exe
    if "$2" "$src/examples/sample.pt" >"$work/out.txt" 2>"$work/err.txt" &&
       cmp -s "$work/out.txt" "$src/examples/list.expected"; then
        ok "$1 prints examples/list.expected"
    else
        nok "$1 output differs:"; diff "$src/examples/list.expected" "$work/out.txt" | head; cat "$work/err.txt"
    fi
}

rm -rf "$work" && mkdir -p "$work" || exit 1
if "$cmake" --install "$build" --prefix "$work/stage" >"$work/install.log" 2>&1; then
    ok "cmake --install --prefix"
else
    nok "cmake --install --prefix"; cat "$work/install.log"; finish
fi
mv "$work/stage" "$work/moved" # relocated: nothing may point at stage/
p=$work/moved
headers=$(cd "$src" && ls include/*.h)
for f in $headers "$libdir/libckpt.a" "$libdir/libckpt.so" "$libdir/pkgconfig/ckpt.pc" \
         "$libdir/pkgconfig/ckpt-shared.pc" \
         "$libdir/cmake/ckpt/ckptConfig.cmake" "$libdir/cmake/ckpt/ckptConfigVersion.cmake" \
         "$libdir/cmake/ckpt/ckptTargets.cmake" bin/ckpt share/man/man1/ckpt.1 \
         share/bash-completion/completions/ckpt; do
    if [ -e "$p/$f" ]; then ok "installs $f"; else nok "installs $f"; fi
done
if grep -rq "$work/stage" "$p/$libdir/pkgconfig" "$p/$libdir/cmake"; then
    nok "the package files name the install prefix"
else
    ok "the package files do not name the install prefix"
fi
if "$p/bin/ckpt" ls "$src/examples/sample.pt" >/dev/null; then ok "installed ckpt runs"; else nok "installed ckpt runs"; fi

# 1. find_package(ckpt) from a CMake project
if "$cmake" -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$p" \
        -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
        -DCKPT_EXAMPLE="$src/examples/list.c" >"$work/consumer.log" 2>&1 &&
   "$cmake" --build "$work/consumer" >>"$work/consumer.log" 2>&1; then
    ok "find_package(ckpt) consumer builds"
    run_example "ckpt::ckpt (shared)" "$work/consumer/list_shared"
    run_example "ckpt::ckpt_static" "$work/consumer/list_static"
    if command -v ldd >/dev/null 2>&1; then
        if ldd "$work/consumer/list_shared" | grep -q "$p/$libdir/libckpt.so"; then
            ok "list_shared loads the installed libckpt.so"
        else
            nok "list_shared does not load $p/$libdir/libckpt.so"; ldd "$work/consumer/list_shared"
        fi
    fi
else
    nok "find_package(ckpt) consumer builds"; cat "$work/consumer.log"
fi

# 2. add_subdirectory from a parent project: configured, not built (the
#    library build is the one above)
if "$cmake" -S "$src/tests/install/subproject" -B "$work/subproject" -DCKPT_SOURCE_DIR="$src" \
        -DCMAKE_C_COMPILER="$cc" >"$work/subproject.log" 2>&1; then
    ok "add_subdirectory(ckpt): ckpt::ckpt, and no CLI, tests, fuzz or install rules"
else
    nok "add_subdirectory(ckpt) configure:"; tail -20 "$work/subproject.log"
fi

# 3. pkg-config
if ! command -v pkg-config >/dev/null 2>&1; then
    echo "skipped: pkg-config is not installed, ckpt.pc was not tried"
    finish
fi
export PKG_CONFIG_PATH="$p/$libdir/pkgconfig"
if [ "$(cd "$(pkg-config --variable=prefix ckpt)" && pwd -P)" = "$(cd "$p" && pwd -P)" ]; then
    ok "ckpt.pc's prefix follows the moved tree"
else
    nok "ckpt.pc's prefix is $(pkg-config --variable=prefix ckpt), not $p"
fi
readelf=${READELF:-readelf}
# needs_so EXE: EXE's dynamic section names libckpt.so (NEEDED)
needs_so() { "$readelf" -d "$1" | grep -q 'NEEDED.*\[libckpt\.so'; }
# shellcheck disable=SC2046,SC2086
if "$cc" $flags -o "$work/list_pc" "$src/examples/list.c" $(pkg-config --cflags --libs ckpt) \
        -Wl,-rpath,"$p/$libdir" 2>"$work/pc.log"; then
    ok "cc list.c \$(pkg-config --cflags --libs ckpt)"
    run_example "pkg-config build (shared)" "$work/list_pc"
    if needs_so "$work/list_pc"; then
        ok "pkg-config --libs ckpt: the program needs libckpt.so"
    else
        nok "pkg-config --libs ckpt: no NEEDED libckpt.so:"; "$readelf" -d "$work/list_pc" | grep NEEDED
    fi
else
    nok "cc list.c \$(pkg-config --cflags --libs ckpt)"; cat "$work/pc.log"
fi
# --static (the compiler's default dynamic link otherwise): libckpt.a is
# linked in, libc, zlib and jansson stay shared
# shellcheck disable=SC2046,SC2086
if "$cc" $flags -o "$work/list_pcs" "$src/examples/list.c" \
        $(pkg-config --static --cflags --libs ckpt) 2>"$work/pcs-dyn.log"; then
    ok "cc list.c \$(pkg-config --static --cflags --libs ckpt)"
    run_example "pkg-config --static build" "$work/list_pcs"
    if needs_so "$work/list_pcs"; then
        nok "pkg-config --static --libs ckpt links libckpt.so ($(pkg-config --static --libs ckpt)):"
        "$readelf" -d "$work/list_pcs" | grep NEEDED
    else
        ok "pkg-config --static --libs ckpt: no NEEDED libckpt.so"
    fi
else
    nok "cc list.c \$(pkg-config --static --cflags --libs ckpt)"; cat "$work/pcs-dyn.log"
fi
# Fully static, when this system can link a static program with ckpt's
# dependencies at all (not with sanitizers; libarchive's static link needs
# the static libraries of zstd, lz4, acl... which Debian ships apart).
printf 'int main(void) { return 0; }\n' >"$work/hello.c"
# shellcheck disable=SC2046
if [ -z "$flags" ] && "$cc" -static -o "$work/hello" "$work/hello.c" \
        $(pkg-config --static --libs ckpt) 2>/dev/null; then
    # shellcheck disable=SC2046
    if "$cc" -static -o "$work/list_pc_static" "$src/examples/list.c" \
            $(pkg-config --static --cflags --libs ckpt) 2>"$work/pcs.log"; then
        ok "cc -static list.c \$(pkg-config --static --cflags --libs ckpt)"
        run_example "pkg-config build (static)" "$work/list_pc_static"
    else
        nok "cc -static list.c \$(pkg-config --static --cflags --libs ckpt)"; cat "$work/pcs.log"
    fi
else
    echo "skipped: no static link here (or a sanitized build), cc -static not tried"
fi

# Last: without libckpt.so in the tree, the --static program still runs
# (and the shared one no longer starts: the library really is gone).
rm -f "$p/$libdir"/libckpt.so*
if [ -x "$work/list_pc" ]; then
    if "$work/list_pc" "$src/examples/sample.pt" >/dev/null 2>&1; then
        nok "libckpt.so removed, yet the shared pkg-config build still starts"
    else
        ok "libckpt.so removed: the shared pkg-config build no longer starts"
    fi
fi
[ -x "$work/list_pcs" ] && run_example "pkg-config --static build without libckpt.so" "$work/list_pcs"
finish
