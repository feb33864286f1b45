#!/bin/sh
# run_example.sh EXE SAMPLE EXPECTED [README SOURCE] - run a build of
# examples/list.c (the README's C example) on SAMPLE and compare its output
# with EXPECTED (written from torch.load by examples/list_expected.py); with
# README and SOURCE, check that the README shows exactly SOURCE.
exe=$1 sample=$2 expected=$3 readme=$4 source=$5
pass=0 fail=0
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
if "$exe" "$sample" >"$out"; then
    echo "ok - $(basename "$exe") exits 0"; pass=$((pass + 1))
else
    echo "not ok - $(basename "$exe") exits $?"; fail=$((fail + 1))
fi
if cmp -s "$out" "$expected"; then
    echo "ok - output matches $(basename "$expected")"; pass=$((pass + 1))
else
    echo "not ok - output differs from $(basename "$expected"):"; fail=$((fail + 1))
    diff "$expected" "$out" | head -20
fi
if "$exe" >/dev/null 2>&1; [ $? -eq 2 ]; then
    echo "ok - no argument: exit 2"; pass=$((pass + 1))
else
    echo "not ok - no argument: exit not 2"; fail=$((fail + 1))
fi
if [ -n "$readme" ]; then
    # the first ```c block after the heading "## The C API in a short example"
    awk '/^## The C API in a short example/ { h = 1; next }
         h && /^```c$/ { c = 1; next }
         c && /^```$/ { exit }
         c { print }' "$readme" >"$out"
    if [ -s "$out" ] && cmp -s "$out" "$source"; then
        echo "ok - the README shows $(basename "$source")"; pass=$((pass + 1))
    else
        echo "not ok - the README's C example differs from $source:"; fail=$((fail + 1))
        diff "$source" "$out" | head -20
    fi
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
