#!/bin/sh
# check_headers.sh CC CXX INCLUDE_DIR WORKDIR - every public header compiles
# on its own as C99 with -pedantic -Werror, and as C++ with the system C++
# compiler when there is one (CXX empty or missing: that half is skipped,
# with a message).
cc=$1 cxx=$2 inc=$3 work=$4
pass=0 fail=0
mkdir -p "$work" || exit 1
for h in "$inc"/*.h; do
    name=$(basename "$h")
    printf '#include <%s>\n#include <%s>\nint main(void) { return 0; }\n' "$name" "$name" >"$work/h_$name.c"
    if "$cc" -std=c99 -pedantic -Werror -Wall -Wextra -Wstrict-prototypes -I"$inc" -c "$work/h_$name.c" -o "$work/h_$name.o"; then
        echo "ok - $name compiles as C99 -pedantic -Werror"; pass=$((pass + 1))
    else
        echo "not ok - $name does not compile as C99 -pedantic -Werror"; fail=$((fail + 1))
    fi
    if [ -n "$cxx" ] && command -v "$cxx" >/dev/null 2>&1; then
        printf '#include <%s>\n#include <%s>\nint main() { return 0; }\n' "$name" "$name" >"$work/h_$name.cpp"
        if "$cxx" -std=c++11 -pedantic -Werror -Wall -Wextra -I"$inc" -c "$work/h_$name.cpp" -o "$work/h_$name.cpp.o"; then
            echo "ok - $name compiles as C++11 -pedantic -Werror"; pass=$((pass + 1))
        else
            echo "not ok - $name does not compile as C++11 -pedantic -Werror"; fail=$((fail + 1))
        fi
    fi
done
if [ -z "$cxx" ] || ! command -v "$cxx" >/dev/null 2>&1; then
    echo "skipped: no C++ compiler, the headers were not compiled as C++"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
