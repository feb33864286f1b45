#!/bin/sh
# cli_golden_test.sh - the CLI's output on every fixture stays byte-identical.
#
#     tests/cli_golden_test.sh CKPT FIXTURES_DIR MANIFEST          # check
#     tests/cli_golden_test.sh CKPT FIXTURES_DIR MANIFEST --update # record
#
# For each fixture and each reading command (ls, show, info, scan, verify,
# their --json forms, convert to stdout, extract -d), the SHA-256 of stdout,
# stderr and the exit status together is compared with the line recorded in
# MANIFEST.  A refactoring that moves code between the library and the CLI
# must leave every line unchanged; a deliberate change of output is recorded
# again with --update, in the same commit, so the diff shows which outputs
# changed.  Prints "ok"/"not ok" per fixture and "N passed, M failed".

if [ $# -lt 3 ]; then
    echo "usage: $0 CKPT FIXTURES_DIR MANIFEST [--update]" >&2
    exit 2
fi
case $1 in /*) CKPT=$1 ;; *) CKPT=$(pwd)/$1 ;; esac
FIX=$2
case $3 in /*) MANIFEST=$3 ;; *) MANIFEST=$(pwd)/$3 ;; esac
UPDATE=${4:-}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-golden.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'rm -rf "$TMP"; exit 1' HUP INT TERM

# Run from FIXTURES_DIR, so that messages name the file as the manifest
# does.  Each command's stdout, stderr and "exit N" line go, one after the
# other, into the file $TMP/h/NNNNN, and one sha256sum hashes them all at the
# end (a pipeline per command cost most of this test's time).
mkdir "$TMP/h" || exit 1
cd "$FIX" || exit 1
n=0
: >"$TMP/list" # NNNNN<TAB>fixture<TAB>command, in manifest order

# one FIXTURE CMD ARGS...: the output of `ckpt ARGS`, recorded as CMD
one() {
    n=$((n + 1))
    h=$TMP/h/$(printf %05d $n)
    printf '%05d\t%s\t%s\n' $n "$1" "$2" >>"$TMP/list"
    shift 2
    "$CKPT" "$@" >"$h" 2>"$TMP/e"
    s=$?
    cat "$TMP/e" >>"$h"
    echo "exit $s" >>"$h"
}

# extract_all FIXTURE: extract -d's output (its DIR named DIR), then the
# sha256 of every file it wrote
extract_all() {
    n=$((n + 1))
    h=$TMP/h/$(printf %05d $n)
    printf '%05d\t%s\t%s\n' $n "$1" "extract -d" >>"$TMP/list"
    rm -rf "$TMP/x"
    "$CKPT" extract "$1" -d "$TMP/x" >"$TMP/o" 2>"$TMP/e"
    s=$?
    sed "s|$TMP/x|DIR|" "$TMP/o" >"$h"
    cat "$TMP/e" >>"$h"
    echo "exit $s" >>"$h"
    if [ -d "$TMP/x" ]; then
        (cd "$TMP/x" && find . -type f | LC_ALL=C sort | xargs -r sha256sum) >>"$h"
    fi
}

for f in *.pt *.pkl; do
    [ -f "$f" ] || continue
    for cmd in "ls" "ls --json" "show" "show --json" "info" "scan" "scan --json" \
               "verify" "convert - -"; do
        set -- $cmd
        if [ "$cmd" = "convert - -" ]; then
            one "$f" "$cmd" convert "$f" -
        else
            one "$f" "$cmd" "$@" "$f"
        fi
    done
    extract_all "$f"
done
: >"$TMP/now"
if [ "$n" -gt 0 ]; then
    (cd "$TMP/h" && sha256sum -- *) >"$TMP/sums" || exit 1
    awk 'NR == FNR { sum[$2] = $1; next } { print sum[$1] "  " $2 "  " $3 }' \
        "$TMP/sums" FS='\t' "$TMP/list" >"$TMP/now"
fi

if [ "$UPDATE" = --update ]; then
    cp "$TMP/now" "$MANIFEST"
    echo "recorded $(wc -l <"$MANIFEST") outputs in $MANIFEST"
    exit 0
fi
if [ ! -f "$MANIFEST" ]; then
    echo "no manifest $MANIFEST (record it with --update)" >&2
    exit 1
fi

PASSED=0
FAILED=0
for f in $(cut -d' ' -f3 "$TMP/now" | uniq); do
    want=$(grep "  $f  " "$MANIFEST")
    got=$(grep "  $f  " "$TMP/now")
    if [ "$want" = "$got" ]; then
        PASSED=$((PASSED + 1))
        echo "ok - $f"
    else
        FAILED=$((FAILED + 1))
        echo "not ok - $f: output changed for:"
        printf '%s\n' "$got" | while read -r h name rest; do
            printf '%s\n' "$want" | grep -qF "$h  $name  $rest" || echo "    ckpt $rest $name"
        done
    fi
done
extra=$(cut -d' ' -f3 "$MANIFEST" | uniq | while read -r f; do
    grep -q "  $f  " "$TMP/now" || echo "$f"; done)
if [ -n "$extra" ]; then
    FAILED=$((FAILED + 1))
    echo "not ok - fixtures in the manifest but not in $FIX: $extra"
fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
