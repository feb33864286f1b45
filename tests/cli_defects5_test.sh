#!/bin/sh
# cli_defects5_test.sh - the CLI defects left by session 4, one group each:
#
#     tests/cli_defects5_test.sh CKPT SOURCE_DIR GROUP
#
#   diff        a failed write to stdout is trouble (exit 2, one line), not
#               "differ" (1)
#
# Prints "ok"/"not ok" lines and "N passed, M failed"; exits 77 when what a
# group needs is missing.

case $1 in /*) CKPT=$1 ;; *) CKPT=$(pwd)/$1 ;; esac
SRC=$(cd "$2" && pwd)
GROUP=$3
FIX=$SRC/tests/fixtures
PY=${CKPT_TEST_PYTHON:-python3}
PASSED=0
FAILED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
nok() { FAILED=$((FAILED + 1)); echo "not ok - $1"; }
check() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-defects5.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'rm -rf "$TMP"; exit 1' HUP INT TERM

lines() { wc -l <"$1" | tr -d ' '; }

# ---------------------------------------------------------------------------
group_diff() {
    A=$FIX/dtypes_zip.pt
    B=$FIX/dtypes_legacy.pt
    C=$FIX/many_zip.pt
    "$CKPT" diff "$A" "$B" >"$TMP/o" 2>"$TMP/e"
    check $? "diff of equal files exits 0"
    "$CKPT" diff "$A" "$C" >"$TMP/o" 2>"$TMP/e"
    [ $? = 1 ] && [ -s "$TMP/o" ]
    check $? "diff of different files exits 1 with output"
    if [ -w /dev/full ]; then
        for args in "$A $B" "$A $C" "--json $A $C" "--max-abs $A $B"; do
            # shellcheck disable=SC2086
            "$CKPT" diff $args >/dev/full 2>"$TMP/e"
            st=$?
            [ $st = 2 ]
            check $? "diff $args >/dev/full exits 2 (trouble), not $st"
            [ "$(lines "$TMP/e")" = 1 ] && grep -q '^ckpt: write error: No space left on device$' "$TMP/e"
            check $? "diff $args >/dev/full: one line 'ckpt: write error: ...' ($(head -c 200 "$TMP/e"))"
        done
        # the other commands keep exit 1 for it
        "$CKPT" ls "$A" >/dev/full 2>"$TMP/e"
        check $(($? != 1)) "ls >/dev/full still exits 1"
    else
        echo "skip - /dev/full is not writable here"
    fi
}

case $GROUP in
diff) "group_$GROUP" ;;
*)
    echo "usage: $0 CKPT SOURCE_DIR diff" >&2
    exit 2
    ;;
esac
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
